package identity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/instancefs"
)

// Store resolves an Instance's credential and keeps the allocated ones on
// the node: one file per uid in Dir, named by the uid and holding
// "namespace/name". Creating that file (O_EXCL) is the claim, so a uid
// is never given twice even across a crash; it is read back whole on the
// first use after a restart, so an Instance keeps its uid for its life.
type Store struct {
	Dir   string
	Range Range
	Users Users
	// SocketGID is the socket group's gid (-1: none), never granted.
	SocketGID int

	mu     sync.Mutex
	loaded bool
	byKey  map[string]int
	next   int // where the search for a free uid starts
}

// Resolve returns the credential ns/name runs as: user's when user is set
// and g grants it (see Grant), else the Instance's own uid, allocated on
// first use. A user g does not name is refused before the node's user
// database is read.
func (s *Store) Resolve(ns, name, user string, g Grant) (Credential, error) {
	if user != "" {
		if user != g.User {
			return Credential{}, fmt.Errorf("user %s: %w", user, ErrNotGranted)
		}
		a, err := s.Users.Lookup(user)
		if err != nil {
			return Credential{}, err
		}
		return s.restrict(a, g)
	}
	uid, err := s.allocate(key(ns, name))
	if err != nil {
		return Credential{}, err
	}
	return Credential{UID: uid, GID: uid, Groups: []int{uid}}, nil
}

// Release gives ns/name's uid back; call only once nothing of the
// Instance runs and its files are gone, or a later Instance given the
// uid could reach what is left.
func (s *Store) Release(ns, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return err
	}
	k := key(ns, name)
	uid, ok := s.byKey[k]
	if !ok {
		return nil
	}
	if err := os.Remove(filepath.Join(s.Dir, strconv.Itoa(uid))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("release uid %d of %s: %w", uid, k, err)
	}
	delete(s.byKey, k)
	return nil
}

func key(ns, name string) string { return ns + "/" + name }

func (s *Store) allocate(k string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(); err != nil {
		return -1, err
	}
	if uid, ok := s.byKey[k]; ok {
		return uid, nil
	}
	for i := 0; i < s.Range.Size; i++ {
		uid := s.Range.First + (s.next+i)%s.Range.Size
		err := claim(s.Dir, uid, k)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("claim uid %d for %s: %w", uid, k, err)
		}
		s.byKey[k] = uid
		s.next = (s.next + i + 1) % s.Range.Size
		return uid, nil
	}
	return -1, fmt.Errorf("%s: %w (%s)", k, ErrRangeFull, s.Range)
}

// load reads the claims once. A claim outside the range (the range was
// changed) still belongs to its Instance: its files are owned by it.
func (s *Store) load() error {
	if s.loaded {
		return nil
	}
	if s.Range.Size <= 0 {
		return errors.New("identity: no uid range")
	}
	d, err := instancefs.MkdirAll(s.Dir, 0o700)
	if err != nil {
		return fmt.Errorf("identity dir: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read %s: %w", s.Dir, err)
	}
	s.byKey = make(map[string]int, len(names))
	for _, n := range names {
		uid, err := strconv.Atoi(n)
		if err != nil {
			continue // a temporary file of an interrupted write
		}
		b, err := instancefs.ReadFileLimit(s.Dir, n, 4096)
		if err != nil {
			return fmt.Errorf("read claim %s: %w", n, err)
		}
		k := strings.TrimSpace(string(b))
		if k == "" {
			// Created, never written (a crash or a full disk between the
			// two): allocate returned no one this uid, so it is free.
			if err := os.Remove(filepath.Join(s.Dir, n)); err != nil {
				return fmt.Errorf("remove empty claim %s: %w", n, err)
			}
			continue
		}
		if old, dup := s.byKey[k]; !dup || uid < old {
			s.byKey[k] = uid
		}
	}
	s.loaded = true
	return nil
}

// claim creates Dir/<uid> holding k; os.ErrExist when another holds it.
// The file is synced: a claim lost in a crash could give the uid twice.
func claim(dir string, uid int, k string) error {
	f, err := instancefs.Open(dir, strconv.Itoa(uid), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(k + "\n")
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		// A claim not written whole is no claim: left behind, it would
		// take the uid from the range for good (each retry of a full
		// disk, one more).
		_ = os.Remove(filepath.Join(dir, strconv.Itoa(uid)))
	}
	return err
}
