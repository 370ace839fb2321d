package controllers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/node"
)

func roleRef(name string, r layout.Role) node.Ref {
	return node.Ref{InstanceRef: node.InstanceRef{Namespace: "default", Name: name}, Role: r}
}

func withSeed(i *v1.Instance) { i.Spec.Template.Seed = &v1.Role{Command: []string{"/usr/bin/migrate"}} }

func TestSeedRunsBeforeTheFirstGeneration(t *testing.T) {
	create(t, instance("seeded", withSeed))
	eventually(t, "seed running", func() (bool, string) {
		i := getInstance(t, "seeded")
		return condition(i.Status.Conditions, v1.ConditionReconciling) == "True/Progressing" && fake.Count("start seeded/seed") == 1,
			conditionsOf(i.Status.Conditions)
	})
	if getGeneration(t, "seeded", 1) != nil {
		t.Fatal("generation 1 created while the seed runs")
	}
	fake.exit(roleRef("seeded", layout.RoleSeed), 0)
	waitInstance(t, "seeded", v1.ConditionReady, "True/Reconciled")
	want := []string{"start seeded/seed", "retire seeded/seed", "start seeded/g1", "promote seeded/g1"}
	if diff := cmp.Diff(want, fake.Calls("seeded")[:len(want)]); diff != "" {
		t.Errorf("calls (-want,+got):\n%s", diff)
	}
}

func TestSeedFailureStallsWithItsExit(t *testing.T) {
	create(t, instance("badseed", withSeed))
	eventually(t, "seed started", func() (bool, string) { return fake.Count("start badseed/seed") == 1, "" })
	fake.exit(roleRef("badseed", layout.RoleSeed), 3)
	inst := waitInstance(t, "badseed", v1.ConditionStalled, "True/SeedFailed")
	if c := meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionStalled); !strings.Contains(c.Message, "exit code 3") {
		t.Errorf("Stalled message %q does not carry the exit code", c.Message)
	}
	if getGeneration(t, "badseed", 1) != nil {
		t.Fatal("a generation started after the seed failed")
	}
	// A changed spec runs the seed again.
	updateInstance(t, "badseed", func(i *v1.Instance) { i.Spec.Template.Seed.Args = []string{"--fixed"} })
	eventually(t, "seed started again", func() (bool, string) { return fake.Count("start badseed/seed") == 2, "" })
	fake.exit(roleRef("badseed", layout.RoleSeed), 0)
	waitInstance(t, "badseed", v1.ConditionReady, "True/Reconciled")
}

func TestSidecarRestartedWhenItDies(t *testing.T) {
	create(t, instance("sided", func(i *v1.Instance) {
		i.Spec.Template.Sidecars = []v1.Sidecar{{Name: "worker", Role: v1.Role{Command: []string{"/usr/bin/worker"}}}}
	}))
	waitInstance(t, "sided", v1.ConditionReady, "True/Reconciled")
	eventually(t, "sidecar started", func() (bool, string) { return fake.Count("start sided/sidecar") == 1, "" })
	fake.exit(roleRef("sided", layout.RoleSidecar), 1)
	eventually(t, "sidecar restarted", func() (bool, string) {
		return fake.Count("start sided/sidecar") == 2 && fake.Count("retire sided/sidecar") >= 1, strings.Join(fake.Calls("sided"), ", ")
	})
}
