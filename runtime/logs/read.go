package logs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/unitlet/unitlet/runtime/layout"
)

// Record is one parsed line of an instance's log file.
type Record struct {
	Time   time.Time
	Source string // as written: g3, seed, sidecar.web, cmd/stderr, ...
	Text   string
}

// ParseRecord parses one line of the file, without its newline.
func ParseRecord(line string) (Record, error) {
	ts, rest, ok := strings.Cut(line, " ")
	src, text, ok2 := strings.Cut(rest, " ")
	if !ok || !ok2 || src == "" {
		return Record{}, fmt.Errorf("log record %q: want <time> <source> <text>", line)
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return Record{}, fmt.Errorf("log record %q: %w", line, err)
	}
	return Record{Time: t, Source: src, Text: text}, nil
}

// Line is the record as the file stores it, without the newline.
func (r Record) Line() string {
	return r.Time.UTC().Format(time.RFC3339Nano) + " " + r.Source + " " + r.Text
}

// origin is who wrote a record; its String is the record's source:
// g<N> for generation N, else the role; then .<name> for a sidecar (several
// write into one file) and /<stream> for a second stream (cmd's stderr).
type origin struct {
	role    layout.Role
	gen     int64
	sidecar string
	stream  string
}

const (
	genPrefix  = "g"
	sidecarSep = "."
	streamSep  = "/"
)

func (o origin) String() string {
	s := string(o.role)
	if o.gen != 0 {
		s = genPrefix + strconv.FormatInt(o.gen, 10)
	}
	if o.sidecar != "" {
		s += sidecarSep + o.sidecar
	}
	if o.stream != "" {
		s += streamSep + o.stream
	}
	return s
}

// parseOrigin is the inverse of origin.String.
func parseOrigin(s string) (origin, error) {
	var o origin
	rest, stream, _ := strings.Cut(s, streamSep)
	head, sidecar, _ := strings.Cut(rest, sidecarSep)
	o.stream, o.sidecar = stream, sidecar
	if g, ok := strings.CutPrefix(head, genPrefix); ok {
		if n, err := strconv.ParseInt(g, 10, 64); err == nil && n > 0 {
			o.role, o.gen = layout.RoleApp, n
			return o, nil
		}
	}
	o.role = layout.Role(head)
	if !o.role.Valid() {
		return origin{}, fmt.Errorf("log source %q: unknown role %q", s, head)
	}
	return o, nil
}

// Filter says which records a reader wants.
type Filter struct {
	Role       layout.Role // "" or RoleApp: a generation's app; RoleSeed; RoleSidecar
	Generation int64       // run role only: 0 = every generation
	Sidecar    string      // role sidecar: the sidecar's name (required)
	Since      time.Time   // zero: everything kept
}

// ParseRole parses the CLI's role: "" or "run", "seed" or "sidecar/NAME".
func ParseRole(s string) (layout.Role, string, error) {
	switch s {
	case "", string(layout.RoleApp):
		return layout.RoleApp, "", nil
	case string(layout.RoleSeed):
		return layout.RoleSeed, "", nil
	case string(layout.RoleCommand):
		return "", "", errors.New("a command has no log to read: its output goes to the caller")
	}
	name, ok := strings.CutPrefix(s, string(layout.RoleSidecar)+"/")
	if !ok {
		return "", "", fmt.Errorf("role %q: want run, seed or sidecar/NAME", s)
	}
	// Only the name is checked: layout's rule for sidecar names.
	if _, err := (layout.Instance{}).Sidecar(name); err != nil {
		return "", "", fmt.Errorf("role %q: %w", s, err)
	}
	return layout.RoleSidecar, name, nil
}

// Validate refuses a filter that could match nothing by mistake.
func (f Filter) Validate() error {
	switch f.Role {
	case "", layout.RoleApp, layout.RoleSeed:
		if f.Sidecar != "" {
			return fmt.Errorf("log filter: role %s has no sidecar (got %q)", f.role(), f.Sidecar)
		}
	case layout.RoleSidecar:
		if f.Sidecar == "" {
			return errors.New("log filter: role sidecar needs the sidecar's name")
		}
	default:
		return fmt.Errorf("log filter: role %q has no log to read", f.Role)
	}
	if f.Generation != 0 && f.role() != layout.RoleApp {
		return fmt.Errorf("log filter: role %s has no generation (got %d)", f.Role, f.Generation)
	}
	return nil
}

func (f Filter) role() layout.Role {
	if f.Role == "" {
		return layout.RoleApp
	}
	return f.Role
}

// Match reports whether r is one of the records f wants.
func (f Filter) Match(r Record) bool {
	o, err := parseOrigin(r.Source)
	switch {
	case err != nil || r.Time.Before(f.Since):
		return false
	case o.role != f.role() || o.sidecar != f.Sidecar:
		return false
	case f.Generation != 0:
		return o.gen == f.Generation
	}
	return true
}

// DefaultPoll is how often a following reader looks for new lines.
const DefaultPoll = 200 * time.Millisecond

// Reader reads an instance's log files. The zero Reader is ready to use.
type Reader struct {
	Poll time.Duration // 0: DefaultPoll
	// Tail keeps only the last Tail of the selected records kept now (0:
	// all); with follow, the records appended later all follow them.
	Tail int64
}

// Read is Reader{}.Read.
func Read(ctx context.Context, path string, keep int, f Filter, follow bool, emit func(Record) error) error {
	return Reader{}.Read(ctx, path, keep, f, follow, emit)
}

// Read emits, oldest first, every kept record of the log whose current
// file is path (path.<keep> ... path.1, then path) that f matches (the
// last rd.Tail of them, when set). Lines
// that do not parse are skipped. With follow it then emits records as they
// are appended, across rotations, until ctx ends (nil) or emit fails (its
// error); a path that does not exist yet is waited for.
func (rd Reader) Read(ctx context.Context, path string, keep int, f Filter, follow bool, emit func(Record) error) error {
	if err := f.Validate(); err != nil {
		return err
	}
	poll := rd.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	set := fileSet{path: path, keep: keep}
	held := newTailBuffer(rd.Tail, emit)
	t := tail{filter: f, emit: held.add}
	defer t.close()
	for ctx.Err() == nil {
		moved, err := t.step(set)
		if err != nil {
			return err
		}
		if !moved { // every file there is was read: the tail is known
			if err := held.caughtUp(); err != nil {
				return err
			}
		}
		if !follow && !moved {
			return nil
		}
		if !moved {
			sleep(ctx, poll)
		}
	}
	if follow {
		return nil // the end a follower waits for
	}
	return ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// tail reads one file of the set at a time, from the oldest on.
type tail struct {
	filter  Filter
	emit    func(Record) error
	cur     *os.File
	info    os.FileInfo // cur's, to find it among the names after a rotation
	partial []byte      // a line whose newline has not been written yet
	buf     []byte
}

// step reads cur to its end, then moves to the next file if there is one;
// moved says it did, so the new file is read at once.
func (t *tail) step(set fileSet) (moved bool, err error) {
	if t.cur != nil {
		if err := t.drain(); err != nil {
			return false, err
		}
	}
	next, err := set.after(t.info)
	if next == nil || err != nil {
		return false, err
	}
	if t.cur != nil {
		// The writer closed cur before renaming it: what it holds now is all.
		if err := t.drain(); err != nil {
			next.Close()
			return false, err
		}
	}
	t.close()
	return true, t.open(next)
}

func (t *tail) open(f *os.File) error {
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("log file %s: %w", f.Name(), err)
	}
	t.cur, t.info = f, info
	return nil
}

// close drops cur and any torn line at its end: a record never spans files.
func (t *tail) close() {
	if t.cur != nil {
		t.cur.Close()
	}
	t.cur, t.info, t.partial = nil, nil, t.partial[:0]
}

// drain emits the records f wants up to cur's end, holding back a last
// line until its newline arrives.
func (t *tail) drain() error {
	if t.buf == nil {
		t.buf = make([]byte, 32<<10)
	}
	for {
		n, err := t.cur.Read(t.buf)
		t.partial = append(t.partial, t.buf[:n]...)
		if i := bytes.LastIndexByte(t.partial, '\n'); i >= 0 {
			if err := t.lines(t.partial[:i]); err != nil {
				return err
			}
			t.partial = append(t.partial[:0], t.partial[i+1:]...)
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("log file %s: %w", t.cur.Name(), err)
		}
	}
}

func (t *tail) lines(b []byte) error {
	for line := range strings.SplitSeq(string(b), "\n") {
		r, err := ParseRecord(line)
		if err != nil || !t.filter.Match(r) {
			continue
		}
		if err := t.emit(r); err != nil {
			return err
		}
	}
	return nil
}

// fileSet names an instance's log files: name(0) is the current file,
// name(i) the i-th rotated one (higher is older).
type fileSet struct {
	path string
	keep int
}

func (s fileSet) name(i int) string {
	if i == 0 {
		return s.path
	}
	return s.path + "." + strconv.Itoa(i)
}

// maxMoves bounds how often the files may move under one look-up.
const maxMoves = 100

// after opens the file written after cur, or the oldest there is for a nil
// cur; nil if cur is still the current file or nothing newer is there yet.
func (s fileSet) after(cur os.FileInfo) (*os.File, error) {
	for range maxMoves {
		j := s.keep + 1
		if cur != nil {
			j = s.find(cur)
		}
		switch {
		case j == 0:
			return nil, nil
		case j < 0: // rotated out (or removed, keep 0): all that is left is newer
			j, cur = s.keep+1, nil
		}
		i, f, err := s.openBelow(j)
		if f == nil || err != nil {
			return nil, err
		}
		if s.still(i, j, cur) {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("log files %s: moved %d times while being opened", s.path, maxMoves)
}

// find returns the index of the name cur has now, -1 if none. Names are
// tried from the newest up, the way rotation moves a file, so a file is
// missed only if it was rotated out.
func (s fileSet) find(cur os.FileInfo) int {
	for i := 0; i <= s.keep; i++ {
		if st, err := os.Stat(s.name(i)); err == nil && os.SameFile(st, cur) {
			return i
		}
	}
	return -1
}

// still reports whether the names between i and j are still missing and
// name(j) still cur (if given): else a rotation moved files while the file
// at i was being opened, and it may not be the one wanted.
func (s fileSet) still(i, j int, cur os.FileInfo) bool {
	for k := i + 1; k < j; k++ {
		if _, err := os.Stat(s.name(k)); !errors.Is(err, os.ErrNotExist) {
			return false
		}
	}
	if cur == nil {
		return true
	}
	st, err := os.Stat(s.name(j))
	return err == nil && os.SameFile(st, cur)
}

// openBelow opens the first name below j that exists; mid-rotation, one
// name of the set is briefly missing.
func (s fileSet) openBelow(j int) (int, *os.File, error) {
	for i := j - 1; i >= 0; i-- {
		f, err := os.Open(s.name(i))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, nil, fmt.Errorf("log file: %w", err)
		}
		return i, f, nil
	}
	return 0, nil, nil
}
