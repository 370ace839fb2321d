package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/node"
)

func roleRef(name string, r layout.Role) node.Ref {
	return node.Ref{InstanceRef: node.InstanceRef{Namespace: "default", Name: name}, Role: r}
}

func withSeed(i *v1.Instance) { i.Spec.Template.Seed = &v1.Role{Command: []string{"/usr/bin/migrate"}} }

func TestSeedRunsBeforeTheFirstGeneration(t *testing.T) {
	create(t, instance("seeded", withSeed))
	testutil.Eventually(t, "seed running", waitLimit, pollEvery, func() (bool, string) {
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
	testutil.Eventually(t, "seed started", waitLimit, pollEvery, func() (bool, string) { return fake.Count("start badseed/seed") == 1, "" })
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
	testutil.Eventually(t, "seed started again", waitLimit, pollEvery, func() (bool, string) { return fake.Count("start badseed/seed") == 2, "" })
	fake.exit(roleRef("badseed", layout.RoleSeed), 0)
	waitInstance(t, "badseed", v1.ConditionReady, "True/Reconciled")
}

func withSidecars(names ...string) func(*v1.Instance) {
	return func(i *v1.Instance) {
		i.Spec.Template.Sidecars = nil
		for _, n := range names {
			i.Spec.Template.Sidecars = append(i.Spec.Template.Sidecars, v1.Sidecar{Name: n, Role: v1.Role{Command: []string{"/usr/bin/" + n}}})
		}
	}
}

// Two sidecars run side by side; when one dies only it is proven gone and
// started again, the other is left alone.
func TestSidecarRestartedWhenItDies(t *testing.T) {
	create(t, instance("sided", withSidecars("worker", "cache")))
	waitInstance(t, "sided", v1.ConditionReady, "True/Reconciled")
	testutil.Eventually(t, "sidecars started", waitLimit, pollEvery, func() (bool, string) {
		return fake.Count("start sided/sidecar.worker") == 1 && fake.Count("start sided/sidecar.cache") == 1, strings.Join(fake.Calls("sided"), ", ")
	})
	fake.exit(node.SidecarRef("default", "sided", "worker"), 1)
	testutil.Eventually(t, "worker restarted", waitLimit, pollEvery, func() (bool, string) {
		return fake.Count("start sided/sidecar.worker") == 2 && fake.Count("retire sided/sidecar.worker") >= 1, strings.Join(fake.Calls("sided"), ", ")
	})
	if n, r := fake.Count("start sided/sidecar.cache"), fake.Count("retire sided/sidecar.cache"); n != 1 || r != 0 {
		t.Errorf("cache started %d times and retired %d times, want 1 and 0: %s", n, r, strings.Join(fake.Calls("sided"), ", "))
	}
}

// A sidecar that dies again right after its restart waits out the
// restart backoff: started again, but not before the backoff has passed.
func TestSidecarRestartBacksOff(t *testing.T) {
	create(t, instance("crashy", withSidecars("worker")))
	waitInstance(t, "crashy", v1.ConditionReady, "True/Reconciled")
	ref := node.SidecarRef("default", "crashy", "worker")
	starts := func() int { return fake.Count("start crashy/sidecar.worker") }
	testutil.Eventually(t, "sidecar started", waitLimit, pollEvery, func() (bool, string) { return starts() == 1, strings.Join(fake.Calls("crashy"), ", ") })
	fake.exit(ref, 1)
	testutil.Eventually(t, "first restart at once", waitLimit, pollEvery, func() (bool, string) {
		return starts() == 2, strings.Join(fake.Calls("crashy"), ", ")
	})
	died := time.Now()
	fake.exit(ref, 1)
	time.Sleep(testRestartBackoff / 2)
	if n := starts(); n != 2 {
		t.Fatalf("restarted %d times within %s of dying again, want 2 (the backoff is %s)", n, time.Since(died), testRestartBackoff)
	}
	testutil.Eventually(t, "second restart after the backoff", waitLimit, pollEvery, func() (bool, string) {
		return starts() == 3, strings.Join(fake.Calls("crashy"), ", ")
	})
	if since := time.Since(died); since < testRestartBackoff-100*time.Millisecond {
		t.Errorf("second restart %s after the death, want no sooner than the backoff %s", since, testRestartBackoff)
	}
}

// A sidecar removed from the template is retired; the one kept runs on.
// Deleting the Instance retires the rest.
func TestSidecarRemovedFromTheTemplateIsRetired(t *testing.T) {
	create(t, instance("trimmed", withSidecars("worker", "cache")))
	waitInstance(t, "trimmed", v1.ConditionReady, "True/Reconciled")
	testutil.Eventually(t, "sidecars started", waitLimit, pollEvery, func() (bool, string) {
		return fake.Count("start trimmed/sidecar.worker") == 1 && fake.Count("start trimmed/sidecar.cache") == 1, strings.Join(fake.Calls("trimmed"), ", ")
	})
	updateInstance(t, "trimmed", withSidecars("worker"))
	testutil.Eventually(t, "cache retired", waitLimit, pollEvery, func() (bool, string) {
		return fake.Count("retire trimmed/sidecar.cache") >= 1, strings.Join(fake.Calls("trimmed"), ", ")
	})
	waitInstance(t, "trimmed", v1.ConditionReady, "True/Reconciled")
	if n, r := fake.Count("start trimmed/sidecar.worker"), fake.Count("retire trimmed/sidecar.worker"); n != 1 || r != 0 {
		t.Errorf("worker started %d times and retired %d times, want 1 and 0", n, r)
	}
	if n := fake.Count("start trimmed/sidecar.cache"); n != 1 {
		t.Errorf("cache started %d times after its removal, want once in all", n)
	}
}

// Suspend retires every sidecar, also one removed from the template in
// the same change: the node's listing names it.
func TestSuspendRetiresSidecarsRemovedFromTheTemplate(t *testing.T) {
	create(t, instance("hushed", withSidecars("worker", "cache")))
	waitInstance(t, "hushed", v1.ConditionReady, "True/Reconciled")
	testutil.Eventually(t, "sidecars started", waitLimit, pollEvery, func() (bool, string) {
		return fake.Count("start hushed/sidecar.worker") == 1 && fake.Count("start hushed/sidecar.cache") == 1, strings.Join(fake.Calls("hushed"), ", ")
	})
	updateInstance(t, "hushed", func(i *v1.Instance) {
		withSidecars("worker")(i)
		i.Spec.Suspend = true
	})
	testutil.Eventually(t, "both retired", waitLimit, pollEvery, func() (bool, string) {
		return fake.Count("retire hushed/sidecar.worker") >= 1 && fake.Count("retire hushed/sidecar.cache") >= 1, strings.Join(fake.Calls("hushed"), ", ")
	})
	refs, _ := fake.List(context.Background())
	for _, ref := range refs {
		if ref.Name == "hushed" {
			t.Errorf("%s still held after suspend", slot(ref))
		}
	}
}

// Seed and sidecars start in the template's environment, envFrom
// included; a seed whose Secret cannot be read is not started and says
// why, and starts once the Secret is there.
func TestRolesGetEnvFrom(t *testing.T) {
	withEnvFrom := func(i *v1.Instance) {
		i.Spec.Template.EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.LocalObjectReference{Name: "roles-env"}}}
	}
	create(t, instance("envroles", withSeed, withSidecars("worker"), withEnvFrom))
	inst := waitInstance(t, "envroles", v1.ConditionReconciling, "True/EnvUnavailable")
	if n := fake.Count("start envroles/seed"); n != 0 {
		t.Fatalf("seed started %d times without its Secret", n)
	}
	if c := meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionReconciling); !strings.Contains(c.Message, "roles-env") {
		t.Errorf("Reconciling message %q does not name the Secret", c.Message)
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "roles-env", Namespace: "default"}, StringData: map[string]string{"DB_URL": "postgres://db"}})
	testutil.Eventually(t, "seed started", waitLimit, pollEvery, func() (bool, string) { return fake.Count("start envroles/seed") == 1, "" })
	want := map[string]string{"DB_URL": "postgres://db"}
	if diff := cmp.Diff(want, fake.RefEnv(roleRef("envroles", layout.RoleSeed))); diff != "" {
		t.Errorf("seed's envFrom (-want,+got):\n%s", diff)
	}
	fake.exit(roleRef("envroles", layout.RoleSeed), 0)
	waitInstance(t, "envroles", v1.ConditionReady, "True/Reconciled")
	testutil.Eventually(t, "sidecar started", waitLimit, pollEvery, func() (bool, string) { return fake.Count("start envroles/sidecar.worker") == 1, "" })
	if diff := cmp.Diff(want, fake.RefEnv(node.SidecarRef("default", "envroles", "worker"))); diff != "" {
		t.Errorf("sidecar's envFrom (-want,+got):\n%s", diff)
	}
}
