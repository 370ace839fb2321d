package lazylog

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	uzap "go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// line writes one line through a logger made as the agent makes its own,
// wrapped, with f, and returns it decoded.
func line(t *testing.T, f func(logr.Logger)) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	f(Wrap(zap.New(zap.WriteTo(&buf), zap.RawZapOpts(uzap.AddCaller()))))
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("decode %q: %v", buf.String(), err)
	}
	return m
}

func TestWrittenAsUnwrapped(t *testing.T) {
	tests := map[string]struct {
		log  func(logr.Logger)
		want map[string]any
	}{
		"values before and after a name": {
			log:  func(l logr.Logger) { l.WithValues("a", 1).WithName("n").WithValues("b", "x").Info("hi", "c", true) },
			want: map[string]any{"logger": "n", "msg": "hi", "a": 1.0, "b": "x", "c": true},
		},
		"a line from a logger already written through": {
			log: func(l logr.Logger) {
				l = l.WithValues("a", 1)
				l.V(1).Info("not enabled")
				l.WithValues("b", 2).Error(nil, "bad")
			},
			want: map[string]any{"msg": "bad", "a": 1.0, "b": 2.0},
		},
		"no values": {
			log:  func(l logr.Logger) { l.Info("plain") },
			want: map[string]any{"msg": "plain"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := line(t, tc.log)
			for _, k := range []string{"ts", "level", "caller", "stacktrace"} {
				if k == "caller" && !strings.HasPrefix(got[k].(string), "lazylog/lazylog_test.go:") {
					t.Errorf("caller %q: want this test's line, not the wrapper's", got[k])
				}
				delete(got, k)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("line (-want,+got):\n%s", diff)
			}
		})
	}
}

// counting counts the values its WithValues was given.
type counting struct {
	logr.LogSink
	calls *int
}

func (c counting) WithValues(kv ...any) logr.LogSink {
	*c.calls++
	return counting{c.LogSink.WithValues(kv...), c.calls}
}

func TestValuesAddedOnlyWhenWritten(t *testing.T) {
	calls := 0
	l := Wrap(logr.New(counting{funcr.New(func(string, string) {}, funcr.Options{}).GetSink(), &calls}))
	per := l.WithValues("controller", "instance").WithValues("namespace", "a", "name", "b")
	per.V(1).Info("a debug line, not enabled")
	if calls != 0 {
		t.Fatalf("values added %d times with nothing written, want 0", calls)
	}
	per.Info("one")
	per.Info("two")
	if calls != 1 {
		t.Errorf("values added %d times for two lines, want once", calls)
	}
}
