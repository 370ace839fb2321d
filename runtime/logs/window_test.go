package logs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
)

// TestReadTail: the tail is the last N of the selected records, counted
// across the rotated files, after the role, generation and since
// selection.
func TestReadTail(t *testing.T) {
	files := map[string]string{
		"app.log.2": line(1, "g1", "one") + line(2, "seed", "seeded") + line(3, "g1", "two"),
		"app.log.1": line(4, "g1", "three") + line(5, "sidecar.web", "GET /") + line(6, "g2", "four"),
		"app.log":   line(7, "g2", "five") + line(8, "seed", "reseeded") + line(9, "g1", "six"),
	}
	tests := map[string]struct {
		filter Filter
		tail   int64
		want   []string
	}{
		"no tail: all":              {Filter{}, 0, []string{"g1 one", "g1 two", "g1 three", "g2 four", "g2 five", "g1 six"}},
		"last one":                  {Filter{}, 1, []string{"g1 six"}},
		"across rotated files":      {Filter{}, 4, []string{"g1 three", "g2 four", "g2 five", "g1 six"}},
		"more than there are":       {Filter{}, 100, []string{"g1 one", "g1 two", "g1 three", "g2 four", "g2 five", "g1 six"}},
		"exactly as many":           {Filter{}, 6, []string{"g1 one", "g1 two", "g1 three", "g2 four", "g2 five", "g1 six"}},
		"of one generation":         {Filter{Generation: 1}, 3, []string{"g1 two", "g1 three", "g1 six"}},
		"of the seed":               {Filter{Role: layout.RoleSeed}, 1, []string{"seed reseeded"}},
		"of a sidecar":              {Filter{Role: layout.RoleSidecar, Sidecar: "web"}, 5, []string{"sidecar.web GET /"}},
		"since, then tail":          {Filter{Since: t0.Add(3 * time.Second)}, 2, []string{"g2 five", "g1 six"}},
		"since leaves fewer":        {Filter{Since: t0.Add(7 * time.Second)}, 3, []string{"g2 five", "g1 six"}},
		"a generation with nothing": {Filter{Generation: 9}, 2, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, files)
			var got []string
			err := Reader{Tail: tc.tail}.Read(context.Background(), filepath.Join(dir, "app.log"), 2, tc.filter, false,
				func(r Record) error {
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

// TestFollowTail: with follow, the last N kept records come first, then
// every record appended, none held back.
func TestFollowTail(t *testing.T) {
	tests := map[string]struct {
		tail  int64
		after int // records appended while following
	}{
		"tail 2 of 5, then 3 new": {tail: 2, after: 3},
		"tail 1, then 1 new":      {tail: 1, after: 1},
		"tail beyond, then 2 new": {tail: 50, after: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.log")
			rf, err := OpenRotating(path, 120, 5)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rf.Close() })
			var all []string
			write := func(i int) {
				text := fmt.Sprintf("line %02d", i)
				if _, err := rf.Write([]byte(line(i, "g1", text) + line(i, "seed", "not selected"))); err != nil {
					t.Fatal(err)
				}
				all = append(all, "g1 "+text)
			}
			for i := range 5 {
				write(i)
			}
			want := append([]string(nil), all[max(0, len(all)-int(tc.tail)):]...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan string, 100)
			done := make(chan error, 1)
			go func() {
				done <- Reader{Poll: 2 * time.Millisecond, Tail: tc.tail}.Read(ctx, path, 5, Filter{}, true, func(r Record) error {
					got <- r.Source + " " + r.Text
					return nil
				})
			}()
			var seen []string
			receive := func(n int) {
				for range n {
					select {
					case s := <-got:
						seen = append(seen, s)
					case <-time.After(5 * time.Second):
						t.Fatalf("after %v, no more records", seen)
					}
				}
			}
			receive(len(want))
			for i := range tc.after {
				write(5 + i)
				want = append(want, all[len(all)-1])
				// Each new record arrives alone: nothing is held back.
				receive(1)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Read after cancel = %v", err)
			}
			if d := cmp.Diff(want, seen); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestLimitWriter(t *testing.T) {
	tests := map[string]struct {
		limit   int64
		writes  []string
		want    string
		wantErr []bool // per write: ErrLimit
	}{
		"no limit":               {0, []string{"abc", "def"}, "abcdef", []bool{false, false}},
		"under":                  {10, []string{"abc", "def"}, "abcdef", []bool{false, false}},
		"reached exactly":        {6, []string{"abc", "def", "g"}, "abcdef", []bool{false, true, true}},
		"cut inside a write":     {4, []string{"abc", "def", "g"}, "abcd", []bool{false, true, true}},
		"cut in the first write": {2, []string{"abcdef"}, "ab", []bool{true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			w := LimitWriter(&buf, tc.limit)
			var gotErr []bool
			for _, s := range tc.writes {
				_, err := w.Write([]byte(s))
				if err != nil && !errors.Is(err, ErrLimit) {
					t.Fatal(err)
				}
				gotErr = append(gotErr, err != nil)
			}
			if d := cmp.Diff(tc.want, buf.String()); d != "" {
				t.Errorf("written (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantErr, gotErr); d != "" {
				t.Errorf("ErrLimit per write (-want,+got):\n%s", d)
			}
		})
	}
}

// TestReadLimitBytes: a reader writing lines into a LimitWriter stops at
// the limit, a follower too, with what fit written; tail and limit
// combine (the limit counts from the tail's first line).
func TestReadLimitBytes(t *testing.T) {
	files := map[string]string{
		"app.log.1": line(1, "g1", "one") + line(2, "g1", "two"),
		"app.log":   line(3, "g1", "three") + line(4, "g1", "four"),
	}
	lineLen := int64(len(line(1, "g1", "one")))
	tests := map[string]struct {
		tail   int64
		limit  int64
		follow bool
		want   string
	}{
		"two lines":           {limit: 2 * lineLen, want: line(1, "g1", "one") + line(2, "g1", "two")},
		"a line and a bit":    {limit: lineLen + 5, want: line(1, "g1", "one") + line(2, "g1", "two")[:5]},
		"following, it stops": {limit: lineLen, follow: true, want: line(1, "g1", "one")},
		"tail then limit":     {tail: 2, limit: int64(len(line(3, "g1", "three"))) + 3, want: line(3, "g1", "three") + line(4, "g1", "four")[:3]},
		"no limit":            {want: strings.Join([]string{line(1, "g1", "one"), line(2, "g1", "two"), line(3, "g1", "three"), line(4, "g1", "four")}, "")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, files)
			var buf bytes.Buffer
			w := LimitWriter(&buf, tc.limit)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := Reader{Poll: 2 * time.Millisecond, Tail: tc.tail}.Read(ctx, filepath.Join(dir, "app.log"), 1, Filter{}, tc.follow,
				func(r Record) error {
					_, err := w.Write([]byte(r.Line() + "\n"))
					return err
				})
			if tc.limit > 0 && !errors.Is(err, ErrLimit) {
				t.Errorf("Read = %v, want ErrLimit", err)
			}
			if tc.limit == 0 && err != nil {
				t.Errorf("Read = %v", err)
			}
			if ctx.Err() != nil {
				t.Error("the reader did not stop at the limit")
			}
			if d := cmp.Diff(tc.want, buf.String()); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}
