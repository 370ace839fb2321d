package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/util/retry"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// TestCycles: create, swap, suspend, resume and delete at random over
// Instances of both strategies, the agent killed with SIGKILL at a random
// point of about half of them; after each step settles, the checker.
func TestCycles(t *testing.T) {
	tally.scenario("cycles")
	rng := rngFor(t)
	a := startNodeAgent(t, "chaos-cycles")
	m := newModel(a.Node)
	startSampler(t, a, m)
	pool := map[string]v1.Strategy{"over-a": v1.StrategyOverlap, "over-b": v1.StrategyOverlap, "repl-a": v1.StrategyReplace, "repl-b": v1.StrategyReplace}
	names := []string{"over-a", "over-b", "repl-a", "repl-b"}
	for i := 1; i <= cycles && !t.Failed(); i++ {
		name := names[rng.IntN(len(names))]
		d, ok := m.get(name)
		op := "create"
		switch r := rng.IntN(10); {
		case !ok || d.deleted:
			d = desired{strategy: pool[name], salt: i}
		case r < 5:
			op, d.salt = "swap", i
		case r < 7:
			op, d.suspended = map[bool]string{true: "suspend", false: "resume"}[!d.suspended], !d.suspended
		default:
			op, d.deleted = "delete", true
		}
		kill := rng.IntN(2) == 0
		t.Logf("cycle %d: %s %s (%s)%s", i, op, name, pool[name], map[bool]string{true: ", agent killed", false: ""}[kill])
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return m.apply(context.Background(), name, d) })
		if err != nil {
			t.Fatalf("cycle %d: %s %s: %v", i, op, name, err)
		}
		if kill {
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			crash(t, a, time.Duration(rng.IntN(300))*time.Millisecond)
		}
		m.waitSettled(t)
		checkSettled(t, a, m)
	}
	deleteAll(t, m)
	checkSettled(t, a, m)
	fmt.Printf("chaos: %d cycles run\n", cycles)
}
