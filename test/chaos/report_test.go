package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// report tallies the whole run: what ran, what was injected, what was
// checked and every invariant that did not hold (each also fails its test).
type report struct {
	mu        sync.Mutex
	scenarios []string
	faults    map[string]int
	checks    int
	broken    map[string][]string // lie, orphan, duplicate, restart
	visible   []time.Duration     // uncertainty: known by the agent → condition seen
}

// Violation kinds.
const (
	lie       = "lies"
	orphan    = "orphans"
	duplicate = "duplicates"
	restart   = "restarts"
)

func (r *report) scenario(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scenarios = append(r.scenarios, name)
}

func (r *report) fault(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.faults == nil {
		r.faults = map[string]int{}
	}
	r.faults[kind]++
}

func (r *report) checked(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks += n
}

// broke records a violation of kind and fails t with it.
func (r *report) broke(t testing.TB, kind, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	r.mu.Lock()
	if r.broken == nil {
		r.broken = map[string][]string{}
	}
	r.broken[kind] = append(r.broken[kind], msg)
	r.mu.Unlock()
	t.Errorf("%s: %s", strings.TrimSuffix(kind, "s"), msg)
}

func (r *report) sawUncertainty(after time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.visible = append(r.visible, after)
}

func (r *report) clean() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.broken) == 0
}

// String is the report printed at the end of the run.
func (r *report) String(seed uint64, took time.Duration) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "\nchaos report (seed %d, %s)\n", seed, took.Round(time.Second))
	fmt.Fprintf(&b, "  scenarios run:      %d (%s)\n", len(r.scenarios), strings.Join(r.scenarios, ", "))
	kinds := make([]string, 0, len(r.faults))
	total := 0
	for k, n := range r.faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		total += n
	}
	sort.Strings(kinds)
	fmt.Fprintf(&b, "  faults injected:    %d (%s)\n", total, strings.Join(kinds, ", "))
	fmt.Fprintf(&b, "  invariant checks:   %d\n", r.checks)
	for _, k := range []string{lie, orphan, duplicate, restart} {
		fmt.Fprintf(&b, "  %-19s %d\n", k+":", len(r.broken[k]))
		for _, m := range r.broken[k] {
			fmt.Fprintf(&b, "    - %s\n", m)
		}
	}
	if len(r.visible) > 0 {
		v := slices.Clone(r.visible)
		slices.Sort(v)
		fmt.Fprintf(&b, "  uncertainty shown:  %d times, slowest %s after the agent knew (limit 1s)\n", len(v), v[len(v)-1].Round(time.Millisecond))
	}
	return b.String()
}
