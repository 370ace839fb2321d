package layout

import (
	"errors"
	"math"
	"path"
	"strings"
	"testing"
)

func TestInstanceCgroupParsesBack(t *testing.T) {
	cases := map[string]struct{ ns, name string }{
		"plain":                {"default", "shop"},
		"dashes on both sides": {"a-b", "c"},
		"dash moved":           {"a", "b-c"},
		"dotted name":          {"team-1", "shop.example"},
	}
	seen := map[string]string{}
	for label, tc := range cases {
		t.Run(label, func(t *testing.T) {
			base := path.Base(InstanceCgroup("unitlet", tc.ns, tc.name))
			if other, dup := seen[base]; dup {
				t.Fatalf("%s/%s and %s share cgroup %s", tc.ns, tc.name, other, base)
			}
			seen[base] = tc.ns + "/" + tc.name
			ns, name, ok := ParseInstanceCgroup(base)
			if !ok || ns != tc.ns || name != tc.name {
				t.Fatalf("ParseInstanceCgroup(%q) = %q, %q, %v", base, ns, name, ok)
			}
		})
	}
}

// A parent cgroup whose natural name would pass a path component's limit
// is shortened, and that name parses back to no instance.
func TestLongInstanceCgroupIsShortened(t *testing.T) {
	ns, name := strings.Repeat("n", 63), strings.Repeat("m", 63)+"."+strings.Repeat("m", 63)+"."+strings.Repeat("m", 63)+"."+strings.Repeat("m", 61)
	base := path.Base(InstanceCgroup("unitlet", ns, name))
	if len(base) > 255 || !strings.HasPrefix(base, CgroupPrefix+"_") {
		t.Fatalf("cgroup %q (%d bytes)", base, len(base))
	}
	if ns, name, ok := ParseInstanceCgroup(base); ok {
		t.Fatalf("ParseInstanceCgroup(%q) = %q, %q, true", base, ns, name)
	}
}

// A generation number is an int64, as in the API: below 1 is none.
func TestGenerationNumbersBelowOneRefused(t *testing.T) {
	inst, err := Layout{StateRoot: "/s", RunRoot: "/r", CgroupRoot: "u"}.Instance("ns", "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{0, -1, math.MinInt64} {
		if _, err := GenerationCgroup(n); !errors.Is(err, ErrNotAGeneration) {
			t.Errorf("GenerationCgroup(%d) = %v, want ErrNotAGeneration", n, err)
		}
		if _, err := inst.Generation(n); !errors.Is(err, ErrNotAGeneration) {
			t.Errorf("Generation(%d) = %v, want ErrNotAGeneration", n, err)
		}
	}
	for _, name := range []string{"g-1", "g9223372036854775808", "g0"} {
		if n, ok := ParseGenerationCgroup(name); ok {
			t.Errorf("ParseGenerationCgroup(%q) = %d, want none", name, n)
		}
	}
}
