package agentproc

import (
	"testing"

	"github.com/unitlet/unitlet/runtime/identity"
)

// Two agents of one process get ranges apart from each other and from
// the default range (`make run`'s agent's).
func TestClaimIDs(t *testing.T) {
	a, b := claimIDs(t), claimIDs(t)
	overlap := func(x, y identity.Range) bool { return x.First < y.First+y.Size && y.First < x.First+x.Size }
	for _, c := range []struct {
		name string
		x, y identity.Range
	}{{"the two claims", a, b}, {"the first and the default range", a, identity.DefaultRange}, {"the second and the default range", b, identity.DefaultRange}} {
		if overlap(c.x, c.y) {
			t.Errorf("%s overlap: %s and %s", c.name, c.x, c.y)
		}
	}
	if a.Size != idSlotSize || b.Size != idSlotSize {
		t.Errorf("sizes %d, %d: want %d", a.Size, b.Size, idSlotSize)
	}
}
