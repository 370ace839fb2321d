package testutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// Namespace is where the tests' Instances live.
const Namespace = "default"

// Sample reads one of config/samples as a user would apply it, on node.
func Sample(t testing.TB, file, node string) *v1.Instance {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	inst := &v1.Instance{}
	if err := yaml.UnmarshalStrict(raw, inst); err != nil {
		t.Fatalf("sample %s: %v", file, err)
	}
	inst.Spec.NodeName = node
	return inst
}

// Conditions renders conds as "Type=Status/Reason: Message; ..." for
// failure messages.
func Conditions(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, c.Type+"="+string(c.Status)+"/"+c.Reason+": "+c.Message)
	}
	return strings.Join(parts, "; ")
}

// API is a test's way to the API server: the client it reads and writes
// with, and how often its waits look again.
type API struct {
	Client client.Client
	Every  time.Duration
}

// Instance reads the Instance name, failing t when it cannot.
func (a API) Instance(t testing.TB, name string) *v1.Instance {
	t.Helper()
	inst := &v1.Instance{}
	if err := a.Client.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: name}, inst); err != nil {
		t.Fatalf("get instance %s: %v", name, err)
	}
	return inst
}

// Generation reads generation n of the Instance inst, failing t when it
// cannot.
func (a API) Generation(t testing.TB, inst string, n int64) *v1.Generation {
	t.Helper()
	g := &v1.Generation{}
	if err := a.Client.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: fmt.Sprintf("%s-g%d", inst, n)}, g); err != nil {
		t.Fatalf("get generation %d of %s: %v", n, inst, err)
	}
	return g
}

// WaitServing waits up to 90 s for Ready=True with generation active
// serving.
func (a API) WaitServing(t testing.TB, name string, active int64) *v1.Instance {
	t.Helper()
	var inst *v1.Instance
	Eventually(t, fmt.Sprintf("%s serving generation %d", name, active), 90*time.Second, a.Every, func() (bool, string) {
		inst = a.Instance(t, name)
		return inst.Status.ActiveGeneration == active && meta.IsStatusConditionTrue(inst.Status.Conditions, v1.ConditionReady),
			fmt.Sprintf("active=%d %s", inst.Status.ActiveGeneration, Conditions(inst.Status.Conditions))
	})
	return inst
}

// UpdateInstance re-reads the Instance name and applies mutate, retrying
// conflicts until limit passes.
func (a API) UpdateInstance(t testing.TB, name string, limit time.Duration, mutate func(*v1.Instance)) {
	t.Helper()
	Eventually(t, "update of "+name, limit, a.Every, func() (bool, string) {
		inst := a.Instance(t, name)
		mutate(inst)
		err := a.Client.Update(context.Background(), inst)
		return err == nil, fmt.Sprint(err)
	})
}

// DeleteAndWait deletes the Instance name and waits up to limit until it
// is gone: its finalizer released.
func (a API) DeleteAndWait(t testing.TB, name string, limit time.Duration) {
	t.Helper()
	inst := &v1.Instance{}
	inst.Namespace, inst.Name = Namespace, name
	if err := a.Client.Delete(context.Background(), inst); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	Eventually(t, name+" deleted", limit, a.Every, func() (bool, string) {
		err := a.Client.Get(context.Background(), client.ObjectKeyFromObject(inst), inst)
		return client.IgnoreNotFound(err) == nil && err != nil, Conditions(inst.Status.Conditions)
	})
}

// SwapUnderLoad sends GETs to http://addr/ from workers clients while
// mutate changes the Instance name's template, and until its generation
// 1 is proven gone and at least min requests were sent; it fails t on any
// failed request, or on a swap that no request saw, and returns the
// load's tally. Requests answered during the swap (from the update until
// generation 1 is proven gone) are counted apart from those after it.
func (a API) SwapUnderLoad(t testing.TB, name, addr string, workers int, min int64, mutate func(*v1.Instance)) *Load {
	t.Helper()
	l := StartLoad(addr, workers, min, 5*time.Minute)
	defer l.Stop()
	time.Sleep(2 * time.Second) // load on the old generation first
	from := l.Tally()
	a.UpdateInstance(t, name, time.Minute, mutate)
	a.WaitServing(t, name, 2)
	Eventually(t, "generation 1 proven gone", 2*time.Minute, a.Every, func() (bool, string) {
		g := a.Generation(t, name, 1)
		return meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionTerminated), Conditions(g.Status.Conditions)
	})
	during := l.Tally().Since(from)
	l.Stop()
	fmt.Printf("%s swap: %d requests (%d during the swap, %d failed), by answer: %v\n",
		name, l.Total(), during.Total(), l.Failed.Load(), l.Bodies())
	if l.Failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed during the swap; first: %v", l.Failed.Load(), l.Total(), l.FirstErr())
	}
	if during.OK == 0 {
		t.Fatalf("no request was answered during the swap: it was not under load")
	}
	return l
}

// NewestGeneration says what the newest of gens reports of itself
// ("none" without any): why a swap waits is in its Started and Ready
// conditions, for a failure's message.
func NewestGeneration(gens []v1.Generation) string {
	var newest *v1.Generation
	for i := range gens {
		if newest == nil || gens[i].Spec.Number > newest.Spec.Number {
			newest = &gens[i]
		}
	}
	if newest == nil {
		return "none"
	}
	return fmt.Sprintf("%d %s %s", newest.Spec.Number, newest.Status.Phase, Conditions(newest.Status.Conditions))
}
