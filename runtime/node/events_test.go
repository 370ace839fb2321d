package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A burst of exits larger than any buffer, sent while nobody reads (a mass
// delete while the reconcilers are busy), is delivered whole, each slot
// once however often it was seen.
func TestEventsNeverDropped(t *testing.T) {
	e := newFakeEnv(t)
	want := map[Ref]int{}
	for i := range 2000 {
		ref := GenerationRef("default", fmt.Sprintf("app-%d", i), 1)
		e.node.send(ref)
		if i%3 == 0 {
			e.node.send(ref) // seen twice before it was read
		}
		want[ref] = 1
	}
	got := map[Ref]int{}
	for len(got) < len(want) {
		select {
		case ref := <-e.node.Events():
			got[ref]++
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d delivered, then nothing", len(got), len(want))
		}
	}
	select {
	case ref := <-e.node.Events():
		got[ref]++
	case <-time.After(100 * time.Millisecond):
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deliveries (-want,+got):\n%s", diff)
	}
}
