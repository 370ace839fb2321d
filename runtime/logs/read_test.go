package logs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// line is record i of source src as the file holds it, with its newline.
func line(i int, src, text string) string {
	return Record{Time: t0.Add(time.Duration(i) * time.Second), Source: src, Text: text}.Line() + "\n"
}

func TestRecordRoundTrip(t *testing.T) {
	tests := map[string]struct {
		line string
		want Record
	}{
		"generation":   {"2025-03-01T12:00:00.5Z g3 hello world", Record{t0.Add(time.Second / 2), "g3", "hello world"}},
		"sidecar":      {"2025-03-01T12:00:00Z sidecar.web GET /", Record{t0, "sidecar.web", "GET /"}},
		"empty text":   {"2025-03-01T12:00:00Z seed ", Record{t0, "seed", ""}},
		"spaces kept":  {"2025-03-01T12:00:00Z g1   indented ", Record{t0, "g1", "  indented "}},
		"cmd's stderr": {"2025-03-01T12:00:00Z cmd/stderr oops", Record{t0, "cmd/stderr", "oops"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRecord(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("parse (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.line, got.Line()); d != "" {
				t.Errorf("line (-want,+got):\n%s", d)
			}
		})
	}
}

func TestParseRecordRejects(t *testing.T) {
	tests := map[string]string{
		"empty":        "",
		"one field":    "2025-03-01T12:00:00Z",
		"no text":      "2025-03-01T12:00:00Z g3",
		"no source":    "2025-03-01T12:00:00Z  text",
		"bad time":     "yesterday g3 text",
		"local layout": "2025-03-01 12:00:00 g3 text",
	}
	for name, l := range tests {
		t.Run(name, func(t *testing.T) {
			if r, err := ParseRecord(l); err == nil {
				t.Errorf("ParseRecord(%q) = %+v, want an error", l, r)
			}
		})
	}
}

// The reader parses the source back into the labels the writer formatted.
func TestOriginRoundTrip(t *testing.T) {
	tests := map[string]origin{
		"generation":   {role: layout.RoleApp, gen: 12},
		"seed":         {role: layout.RoleSeed},
		"sidecar":      {role: layout.RoleSidecar, sidecar: "web"},
		"cmd":          {role: layout.RoleCommand},
		"cmd's stderr": {role: layout.RoleCommand, stream: "stderr"},
	}
	for name, o := range tests {
		t.Run(name, func(t *testing.T) {
			src := Labels{Role: o.role, Generation: o.gen, Sidecar: o.sidecar, Stream: o.stream}.source()
			got, err := parseOrigin(src)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(o, got, cmp.AllowUnexported(origin{})); d != "" {
				t.Errorf("parseOrigin(%q) (-want,+got):\n%s", src, d)
			}
		})
	}
	for _, bad := range []string{"", "g", "g0", "gx", "web", ".web", "/stderr"} {
		if o, err := parseOrigin(bad); err == nil {
			t.Errorf("parseOrigin(%q) = %+v, want an error", bad, o)
		}
	}
}

func TestFilterMatch(t *testing.T) {
	since := t0.Add(time.Minute)
	tests := map[string]struct {
		filter Filter
		source string
		at     time.Time
		want   bool
	}{
		"run, any generation":        {Filter{}, "g7", t0, true},
		"run by name":                {Filter{Role: layout.RoleApp}, "g1", t0, true},
		"run is not seed":            {Filter{}, "seed", t0, false},
		"run is not a sidecar":       {Filter{}, "sidecar.web", t0, false},
		"run is not cmd":             {Filter{}, "cmd/stderr", t0, false},
		"one generation":             {Filter{Generation: 3}, "g3", t0, true},
		"another generation":         {Filter{Generation: 3}, "g30", t0, false},
		"seed":                       {Filter{Role: layout.RoleSeed}, "seed", t0, true},
		"seed is not run":            {Filter{Role: layout.RoleSeed}, "g1", t0, false},
		"sidecar by name":            {Filter{Role: layout.RoleSidecar, Sidecar: "web"}, "sidecar.web", t0, true},
		"another sidecar":            {Filter{Role: layout.RoleSidecar, Sidecar: "web"}, "sidecar.cache", t0, false},
		"sidecar is not run":         {Filter{Role: layout.RoleSidecar, Sidecar: "web"}, "g1", t0, false},
		"since: at":                  {Filter{Since: since}, "g1", since, true},
		"since: after":               {Filter{Since: since}, "g1", since.Add(time.Nanosecond), true},
		"since: before":              {Filter{Since: since}, "g1", since.Add(-time.Nanosecond), false},
		"since and generation":       {Filter{Generation: 2, Since: since}, "g2", since.Add(time.Hour), true},
		"unparsable source dropped":  {Filter{}, "gx", t0, false},
		"sidecar source without run": {Filter{}, "g1.web", t0, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.filter.Match(Record{Time: tc.at, Source: tc.source, Text: "x"})
			if got != tc.want {
				t.Errorf("%+v.Match(%s at %v) = %v, want %v", tc.filter, tc.source, tc.at, got, tc.want)
			}
		})
	}
}

func TestParseRole(t *testing.T) {
	tests := map[string]struct {
		role    layout.Role
		sidecar string
		wantErr bool
	}{
		"":                {role: layout.RoleApp},
		"run":             {role: layout.RoleApp},
		"seed":            {role: layout.RoleSeed},
		"sidecar/web":     {role: layout.RoleSidecar, sidecar: "web"},
		"sidecar":         {wantErr: true},
		"sidecar/":        {wantErr: true},
		"sidecar/Web_1":   {wantErr: true},
		"sidecar/a/b":     {wantErr: true},
		"cmd":             {wantErr: true},
		"g3":              {wantErr: true},
		"sidecars/web":    {wantErr: true},
		"sidecar.web":     {wantErr: true},
		"run/generation1": {wantErr: true},
	}
	for in, tc := range tests {
		t.Run(in, func(t *testing.T) {
			role, sidecar, err := ParseRole(in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseRole(%q) error %v, want error %v", in, err, tc.wantErr)
			}
			if d := cmp.Diff([]string{string(tc.role), tc.sidecar}, []string{string(role), sidecar}); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
			if err == nil {
				if err := (Filter{Role: role, Sidecar: sidecar}).Validate(); err != nil {
					t.Errorf("a parsed role's filter is refused: %v", err)
				}
			}
		})
	}
}

func TestFilterValidateRejects(t *testing.T) {
	tests := map[string]Filter{
		"sidecar without name":    {Role: layout.RoleSidecar},
		"cmd":                     {Role: layout.RoleCommand},
		"unknown role":            {Role: "web"},
		"seed with generation":    {Role: layout.RoleSeed, Generation: 1},
		"run with sidecar":        {Sidecar: "web"},
		"sidecar with generation": {Role: layout.RoleSidecar, Sidecar: "web", Generation: 2},
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			if err := f.Validate(); err == nil {
				t.Errorf("%+v.Validate() = nil, want an error", f)
			}
			err := Read(context.Background(), filepath.Join(t.TempDir(), "app.log"), 1, f, false,
				func(Record) error { return nil })
			if err == nil {
				t.Error("Read with that filter = nil, want an error")
			}
		})
	}
}

// collect runs a Reader into a list until stopped.
type collect struct {
	mu   sync.Mutex
	recs []string // source and text of each record
	done chan error
	stop context.CancelFunc
}

func startRead(t *testing.T, path string, keep int, f Filter, follow bool) *collect {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &collect{done: make(chan error, 1), stop: cancel}
	go func() {
		c.done <- Reader{Poll: 2 * time.Millisecond}.Read(ctx, path, keep, f, follow, func(r Record) error {
			c.mu.Lock()
			c.recs = append(c.recs, r.Source+" "+r.Text)
			c.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-c.done
	})
	return c
}

// wait polls until at least n records came and returns them.
func (c *collect) wait(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		got := append([]string(nil), c.recs...)
		c.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(time.Millisecond)
	}
}

// end stops the reader and returns Read's error.
func (c *collect) end(t *testing.T) error {
	t.Helper()
	c.stop()
	select {
	case err := <-c.done:
		c.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return after its context ended")
		return nil
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadRotatedSet(t *testing.T) {
	files := map[string]string{
		"app.log.3": line(1, "g1", "one") + line(2, "seed", "seeded"),
		// app.log.2 is missing: skipped.
		"app.log.1": line(3, "g1", "two") + "not a record\n" + line(4, "sidecar.web", "GET /"),
		"app.log":   line(5, "g2", "three") + line(6, "sidecar.cache", "miss"),
		"app.log.4": line(0, "g1", "beyond keep"),
	}
	tests := map[string]struct {
		files  map[string]string
		filter Filter
		want   []string
	}{
		"run role, oldest first": {files, Filter{}, []string{"g1 one", "g1 two", "g2 three"}},
		"one generation":         {files, Filter{Generation: 2}, []string{"g2 three"}},
		"seed":                   {files, Filter{Role: layout.RoleSeed}, []string{"seed seeded"}},
		"sidecar":                {files, Filter{Role: layout.RoleSidecar, Sidecar: "web"}, []string{"sidecar.web GET /"}},
		"since":                  {files, Filter{Since: t0.Add(3 * time.Second)}, []string{"g1 two", "g2 three"}},
		"nothing there":          {nil, Filter{}, nil},
		"only rotated files":     {map[string]string{"app.log.2": line(1, "g1", "old")}, Filter{}, []string{"g1 old"}},
		"torn last line dropped": {map[string]string{"app.log": line(1, "g1", "a") + "2025-03-01T12:00:00Z g1 torn"}, Filter{}, []string{"g1 a"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			var got []string
			err := Read(context.Background(), filepath.Join(dir, "app.log"), 3, tc.filter, false, func(r Record) error {
				got = append(got, r.Source+" "+r.Text)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestReadThroughRotatingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	rf, err := OpenRotating(path, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rf.Close() })
	var want []string
	for i := range 20 {
		text := fmt.Sprintf("line %02d", i)
		if _, err := rf.Write([]byte(line(i, "g1", text))); err != nil {
			t.Fatal(err)
		}
		want = append(want, "g1 "+text)
	}
	// Two 32-byte records fit a file: the current one and two rotated are kept.
	want = want[len(want)-6:]
	var got []string
	err = Read(context.Background(), path, 2, Filter{}, false, func(r Record) error {
		got = append(got, r.Source+" "+r.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

func TestReadEmitError(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"app.log": line(1, "g1", "a") + line(2, "g1", "b")})
	stop := errors.New("client gone")
	n := 0
	err := Read(context.Background(), filepath.Join(dir, "app.log"), 1, Filter{}, true, func(Record) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("Read = %v after %d records, want %v after 1", err, n, stop)
	}
}

func TestFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	rf, err := OpenRotating(path, 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rf.Close() })
	rf.Write([]byte(line(1, "g1", "before") + line(2, "seed", "not ours")))
	c := startRead(t, path, 2, Filter{}, true)
	c.wait(t, 1)
	rf.Write([]byte(line(3, "g1", "after") + line(4, "g2", "next generation")))
	want := []string{"g1 before", "g1 after", "g2 next generation"}
	got := c.wait(t, len(want))
	if err := c.end(t); err != nil {
		t.Errorf("Read after cancel = %v, want nil", err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

// Rotation while following loses and repeats nothing, whether the writer
// waits for the reader between batches or races it.
func TestFollowRotation(t *testing.T) {
	tests := map[string]struct {
		maxBytes int64
		keep     int
		batch    int // records written before waiting for the reader
		total    int
	}{
		"paced, files rotated out": {maxBytes: 150, keep: 2, batch: 5, total: 150},
		"racing the reader":        {maxBytes: 400, keep: 60, batch: 500, total: 500},
		"keep 0, paced":            {maxBytes: 150, keep: 0, batch: 3, total: 60},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.log")
			rf, err := OpenRotating(path, tc.maxBytes, tc.keep)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rf.Close() })
			c := startRead(t, path, tc.keep, Filter{}, true)
			var want []string
			for i := range tc.total {
				text := fmt.Sprintf("line %04d", i)
				if _, err := rf.Write([]byte(line(i, "g1", text))); err != nil {
					t.Fatal(err)
				}
				want = append(want, "g1 "+text)
				if (i+1)%tc.batch == 0 {
					if got := c.wait(t, i+1); len(got) != i+1 {
						t.Fatalf("after %d records read %d:\n%s", i+1, len(got), cmp.Diff(want, got))
					}
				}
			}
			got := c.wait(t, len(want))
			if err := c.end(t); err != nil {
				t.Errorf("Read after cancel = %v, want nil", err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

// A line is emitted only once its newline is written.
func TestFollowHoldsPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	full := line(2, "g1", "whole line")
	cut := len(full) - 5
	writeFiles(t, filepath.Dir(path), map[string]string{"app.log": line(1, "g1", "first") + full[:cut]})
	c := startRead(t, path, 1, Filter{}, true)
	// The partial line was read with the first, at once.
	c.wait(t, 1)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(full[cut:] + line(3, "g1", "third")); err != nil {
		t.Fatal(err)
	}
	want := []string{"g1 first", "g1 whole line", "g1 third"}
	got := c.wait(t, len(want))
	c.end(t)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}

func TestFollowWaitsForFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "app.log")
	c := startRead(t, path, 2, Filter{}, true)
	rf, err := OpenRotating(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rf.Close() })
	var want []string
	for i := range 5 {
		text := fmt.Sprintf("line %d", i)
		rf.Write([]byte(line(i, "g1", text)))
		want = append(want, "g1 "+text)
	}
	got := c.wait(t, len(want))
	if err := c.end(t); err != nil {
		t.Errorf("Read after cancel = %v, want nil", err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}
