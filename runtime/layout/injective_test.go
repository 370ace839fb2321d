package layout

import (
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"testing"
)

// pair is an Instance's identity.
type pair struct{ ns, name string }

// derived is every name a node gives one Instance that another must never
// share: its run dir, slice, parent cgroup and the units of a spread of
// its slots (sidecars and runs named like roles, to meet the names a
// role unit of another instance could take).
func derived(t testing.TB, l Layout, p pair) map[string]string {
	t.Helper()
	inst, err := l.Instance(p.ns, p.name)
	if err != nil {
		t.Fatalf("%s/%s: %v", p.ns, p.name, err)
	}
	out := map[string]string{
		"run dir": inst.RunDir(),
		"slice":   inst.SliceName(),
		"cgroup":  inst.Cgroup(),
	}
	slots := []struct {
		role Role
		gen  int64
		name string
	}{
		{RoleApp, 1, ""}, {RoleApp, 12, ""}, {RoleSeed, 0, ""},
		{RoleSidecar, 0, "seed"}, {RoleSidecar, 0, "cmd"}, {RoleSidecar, 0, "g1"}, {RoleSidecar, 0, "a-b"},
		{RoleCommand, 0, "seed"}, {RoleCommand, 0, "sidecar"}, {RoleCommand, 0, "x"},
	}
	for _, s := range slots {
		proc, err := inst.Slot(s.role, s.gen, s.name)
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("unit %s %d %s", s.role, s.gen, s.name)] = proc.UnitName()
	}
	return out
}

// owners maps each derived name (and each slice a derived slice nests
// in: systemd reads a '-' in a slice name as nesting) to the pairs that
// reach it.
type owners map[string]map[pair]bool

func (o owners) add(name string, p pair) {
	if o[name] == nil {
		o[name] = map[pair]bool{}
	}
	o[name][p] = true
}

func (o owners) addAll(t testing.TB, l Layout, p pair) {
	for kind, n := range derived(t, l, p) {
		o.add(n, p)
		if kind == "slice" {
			// The slices it nests in are only ever shared parents, never
			// an instance's own: mark them so one that is shows.
			for _, parent := range parentSlices(n) {
				o.add(parent, pair{ns: "(parent slice)"})
			}
		}
	}
}

// shared lists the names two distinct pairs reach.
func (o owners) shared() []string {
	var out []string
	for n, ps := range o {
		if len(ps) > 1 {
			var who []string
			for p := range ps {
				who = append(who, p.ns+"/"+p.name)
			}
			out = append(out, fmt.Sprintf("%s: %v", n, who))
		}
	}
	return out
}

// injectiveLayout is a node's layout with a run root as long as any
// a node or a test uses.
var injectiveLayout = Layout{StateRoot: "/var/lib/unitlet", RunRoot: "/dev/shm/unitlet-test-0123", CgroupRoot: "unitlet"}

// longName is a valid name long enough for every shortened form.
func longName(tag string) string {
	l := strings.Repeat("a-b", 20)
	return tag + "." + l + "." + l + "." + l
}

// crafted answers pairs with the pairs an attacker would craft against
// them: named after their short id, in a namespace spelled like it, with
// names spelled like role slots, and in namespaces named like the
// shortened forms' own dirs.
func crafted(t testing.TB, l Layout, ps []pair) []pair {
	out := append([]pair(nil), ps...)
	for _, p := range ps {
		inst, err := l.Instance(p.ns, p.name)
		if err != nil {
			t.Fatal(err)
		}
		id := inst.ShortID()
		for _, ns := range []string{"h", "s", "x", id} {
			out = append(out, pair{ns, id})
		}
		for _, name := range []string{"sidecar", "cmd", "seed", "g1", "x", "a-b", id + ".x"} {
			out = append(out, pair{id, name})
		}
	}
	return out
}

// Every name derived from an Instance is its own: no crafted pair and no
// random pair reaches another's run dir, unit, slice or cgroup, and each
// stays within its limit.
func TestDerivedNamesAreInjective(t *testing.T) {
	base := []pair{{"ns", "web"}, {"a-b", "c"}, {"a", "b-c"}, {"ns", longName("x")}, {"ns", longName("y")},
		{strings.Repeat("n", 63), strings.Repeat("m", 63) + "." + strings.Repeat("m", 63) + "." + strings.Repeat("m", 63) + "." + strings.Repeat("m", 61)}}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		base = append(base, pair{randomLabel(rng, 1+rng.IntN(63)), randomName(rng, 1+rng.IntN(253))})
	}
	ps := crafted(t, injectiveLayout, base)
	o := owners{}
	seen := map[pair]bool{}
	for _, p := range ps {
		if seen[p] {
			continue
		}
		seen[p] = true
		o.addAll(t, injectiveLayout, p)
		checkLimits(t, injectiveLayout, p)
	}
	for _, s := range o.shared() {
		t.Errorf("shared %s", s)
	}
}

// checkLimits: unit and slice names within systemd's 255, the parent
// cgroup's name within a path component's 255.
func checkLimits(t testing.TB, l Layout, p pair) {
	t.Helper()
	for kind, n := range derived(t, l, p) {
		switch {
		case kind == "run dir":
		case kind == "cgroup" && len(path.Base(n)) > 255:
			t.Errorf("%s/%s: cgroup %q is %d bytes", p.ns, p.name, path.Base(n), len(path.Base(n)))
		case kind != "cgroup" && len(n) > unitNameMax:
			t.Errorf("%s/%s: %s %q is %d bytes", p.ns, p.name, kind, n, len(n))
		}
	}
}

const labelChars = "abcdefghijklmnopqrstuvwxyz0123456789-"

// randomLabel is a DNS label of n bytes, dashes frequent.
func randomLabel(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = labelChars[rng.IntN(len(labelChars))]
		if rng.IntN(4) == 0 {
			b[i] = '-'
		}
	}
	b[0], b[n-1] = 'a'+byte(rng.IntN(26)), '0'+byte(rng.IntN(10))
	return string(b)
}

// randomName is a DNS subdomain of at most n bytes.
func randomName(rng *rand.Rand, n int) string {
	var parts []string
	for left := n; left > 0; {
		l := min(1+rng.IntN(63), left)
		parts = append(parts, randomLabel(rng, l))
		left -= l + 1
	}
	return strings.Join(parts, ".")
}

// The pairs that shared names before every shortened form moved into a
// space no natural name can take.
func TestCraftedPairsDoNotCollide(t *testing.T) {
	l := injectiveLayout
	long := pair{"ns", longName("x")}
	li, err := l.Instance(long.ns, long.name)
	if err != nil {
		t.Fatal(err)
	}
	id := li.ShortID()
	slice := func(i Instance) []string { return []string{i.SliceName()} }
	tests := map[string]struct {
		other        pair
		mine, theirs func(Instance) []string
	}{
		// <run>/h/<id>: the long name's shortened run dir was the natural
		// run dir of the name <id> in namespace h.
		"run dir": {other: pair{"h", id}, mine: runDir, theirs: runDir},
		// unitlet-<id>-sidecar-seed.service: the long name's sidecar
		// called seed was the seed of the name sidecar in namespace <id>.
		"unit": {other: pair{id, "sidecar"}, mine: func(i Instance) []string {
			sc, _ := i.Sidecar("seed")
			return []string{sc.UnitName()}
		}, theirs: func(i Instance) []string {
			seed, _ := i.RoleSlot(RoleSeed, 0)
			return []string{seed.UnitName()}
		}},
		// unitlet-<id>.slice held every slice of namespace <id>:
		// unitlet-<id>-x.slice nests in it.
		"slice": {other: pair{id, "x"}, mine: slice, theirs: func(i Instance) []string { return parentSlices(i.SliceName()) }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			oi, err := l.Instance(tc.other.ns, tc.other.name)
			if err != nil {
				t.Fatal(err)
			}
			mine := map[string]bool{}
			for _, n := range tc.mine(li) {
				mine[n] = true
			}
			for _, n := range tc.theirs(oi) {
				if mine[n] {
					t.Errorf("%s/%s and %s/%s share %q", long.ns, long.name, tc.other.ns, tc.other.name, n)
				}
			}
		})
	}
}

func runDir(i Instance) []string { return []string{i.RunDir()} }

// parentSlices are the slices systemd nests name in (each '-' is a
// level), from the nearest up.
func parentSlices(name string) []string {
	var out []string
	stem := strings.TrimSuffix(name, ".slice")
	for i := strings.LastIndexByte(stem, '-'); i > 0; i = strings.LastIndexByte(stem[:i], '-') {
		out = append(out, stem[:i]+".slice")
	}
	return out
}
