package join

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/instancefs"
)

// The range system groups are allocated from, top down, as Debian's
// groupadd --system and systemd-sysusers do.
const (
	sysGIDMin = 100
	sysGIDMax = 999
)

// lockWait bounds the wait for the group database's lock.
const lockWait = 10 * time.Second

// GroupDB is the node's group database: the files group and gshadow in
// Dir, "/etc" on a host. In the DaemonSet's container the host's /etc is
// mounted elsewhere, and the container's own /etc is not the node's, so the
// agent reads and writes the files itself rather than through NSS or
// groupadd (neither of which is in its image).
type GroupDB struct{ Dir string }

func (db GroupDB) dir() string {
	if db.Dir == "" {
		return "/etc"
	}
	return db.Dir
}

// Resolve returns the gid of spec: a numeric gid as it is, a name from
// the database.
func (db GroupDB) Resolve(spec string) (int, error) {
	if spec == "" {
		return -1, errors.New("no socket group configured (--socket-group)")
	}
	if gid, err := strconv.Atoi(spec); err == nil {
		if gid < 0 {
			return -1, fmt.Errorf("socket group gid %d is negative", gid)
		}
		return gid, nil
	}
	groups, err := db.read()
	if err != nil {
		return -1, err
	}
	if gid, ok := groups[spec]; ok {
		return gid, nil
	}
	return -1, fmt.Errorf("group %s is not in %s: the agent creates it once the node is approved (or create it: groupadd --system %s; or pass --socket-group=<gid>)",
		spec, filepath.Join(db.dir(), "group"), spec)
}

// Ensure creates a named group that the database lacks, as a system
// group, and returns its gid. A numeric gid or an existing group is
// returned as it is.
func (db GroupDB) Ensure(spec string) (int, error) {
	if gid, err := db.Resolve(spec); err == nil || !isName(spec) {
		return gid, err
	}
	unlock, err := db.lock()
	if err != nil {
		return -1, err
	}
	defer unlock()
	groups, err := db.read() // again, under the lock
	if err != nil {
		return -1, err
	}
	if gid, ok := groups[spec]; ok {
		return gid, nil
	}
	gid := freeGID(groups)
	if gid < 0 {
		return -1, fmt.Errorf("create group %s: no free system gid in %d-%d", spec, sysGIDMin, sysGIDMax)
	}
	if err := db.append("group", fmt.Sprintf("%s:x:%d:\n", spec, gid), false); err != nil {
		return -1, err
	}
	if err := db.append("gshadow", spec+":!::\n", true); err != nil {
		return -1, err
	}
	return gid, nil
}

// read parses the group file into name → gid.
func (db GroupDB) read() (map[string]int, error) {
	lines, err := identity.ReadColonFile(filepath.Join(db.dir(), "group"))
	if err != nil {
		return nil, fmt.Errorf("read the node's group database: %w", err)
	}
	groups := map[string]int{}
	for _, f := range lines {
		if len(f) < 3 {
			continue
		}
		if gid, err := strconv.Atoi(f[2]); err == nil {
			groups[f[0]] = gid
		}
	}
	return groups, nil
}

func freeGID(groups map[string]int) int {
	used := map[int]bool{}
	for _, gid := range groups {
		used[gid] = true
	}
	for gid := sysGIDMax; gid >= sysGIDMin; gid-- {
		if !used[gid] {
			return gid
		}
	}
	return -1
}

// append writes file with line added, atomically (instancefs), keeping
// the old file's mode and owner (gshadow is root:shadow 0640); optional:
// a missing file is left missing.
func (db GroupDB) append(file, line string, optional bool) error {
	path := filepath.Join(db.dir(), file)
	old, err := os.ReadFile(path)
	if optional && errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return err
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		old = append(old, '\n')
	}
	if err := instancefs.WriteAtomic(db.dir(), file, append(old, line...), os.FileMode(st.Mode&0o7777)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Lchown(path, int(st.Uid), int(st.Gid))
}

// isName: spec names a group (not empty, not a gid).
func isName(spec string) bool {
	_, err := strconv.Atoi(spec)
	return spec != "" && err != nil
}

// lock takes the lock every shadow tool and systemd-sysusers take before
// they change the database (lckpwdf: a write lock on .pwd.lock).
func (db GroupDB) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(db.dir(), ".pwd.lock"), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the node's group database: %w", err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	deadline := time.Now().Add(lockWait)
	for {
		err = unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk)
		if err == nil {
			return func() { _ = f.Close() }, nil // closing drops the lock
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock the node's group database: held for %s: %w", lockWait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
