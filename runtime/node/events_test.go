package node

import (
	"fmt"
	"testing"
	"time"
)

// A burst of exits larger than any buffer, sent while nobody reads (a mass
// delete while the reconcilers are busy), is delivered whole, and a slot
// seen twice before it was read is delivered once. The one exception the
// design allows: the delivery loop takes the pending set once before it
// blocks on the silent reader, so the slot whose two sends straddle that
// take (only ever the last of that set) goes out twice.
func TestEventsNeverDropped(t *testing.T) {
	e := newFakeEnv(t)
	sent := map[Ref]int{}
	for i := range 2000 {
		ref := GenerationRef("default", fmt.Sprintf("app-%d", i), 1)
		e.node.send(ref)
		sent[ref]++
		if i%3 == 0 {
			e.node.send(ref) // seen twice before it was read
			sent[ref]++
		}
	}
	got := map[Ref]int{}
	for len(got) < len(sent) {
		select {
		case ref := <-e.node.Events():
			got[ref]++
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d delivered, then nothing", len(got), len(sent))
		}
	}
	for {
		select {
		case ref := <-e.node.Events():
			got[ref]++
			continue
		case <-time.After(100 * time.Millisecond):
		}
		break
	}
	twice := 0
	for ref, n := range got {
		switch {
		case n > sent[ref]:
			t.Errorf("%v delivered %d times, sent %d", ref, n, sent[ref])
		case n == 2:
			twice++
		}
	}
	if len(got) != len(sent) || twice > 1 {
		t.Errorf("%d of %d slots delivered, %d of them twice (at most one may be)", len(got), len(sent), twice)
	}
}
