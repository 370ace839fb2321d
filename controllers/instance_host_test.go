package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

func TestHostHolder(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Second))
	at := func(name, ns, host, node string, created metav1.Time, deleting bool) v1.Instance {
		i := v1.Instance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, CreationTimestamp: created}}
		i.Spec.Host, i.Spec.NodeName = host, node
		if deleting {
			i.DeletionTimestamp = &t1
		}
		return i
	}
	first := at("first", "a", "shop.example.com", "n1", t0, false)
	tests := map[string]struct {
		inst   v1.Instance
		others []v1.Instance
		want   string // holder's ns/name, "" when inst holds the host
	}{
		"alone":                        {first, []v1.Instance{first}, ""},
		"created first holds":          {at("second", "a", "shop.example.com", "n1", t1, false), []v1.Instance{first}, "a/first"},
		"the holder itself":            {first, []v1.Instance{first, at("second", "a", "shop.example.com", "n1", t1, false)}, ""},
		"same time: by name":           {at("b", "a", "shop.example.com", "n1", t0, false), []v1.Instance{at("a", "a", "shop.example.com", "n1", t0, false)}, "a/a"},
		"a holder being deleted":       {at("second", "a", "shop.example.com", "n1", t1, false), []v1.Instance{at("first", "a", "shop.example.com", "n1", t0, true)}, ""},
		"another host":                 {at("second", "a", "other.example.com", "n1", t1, false), []v1.Instance{first}, ""},
		"another node":                 {at("second", "a", "shop.example.com", "n2", t1, false), []v1.Instance{first}, ""},
		"another namespace, same host": {at("second", "b", "shop.example.com", "n1", t1, false), []v1.Instance{first}, "a/first"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := ""
			if h := hostHolder(&tc.inst, tc.others); h != nil {
				got = h.Namespace + "/" + h.Name
			}
			if got != tc.want {
				t.Errorf("hostHolder = %q, want %q", got, tc.want)
			}
		})
	}
}

// The second Instance with a host already served on the node starts
// nothing and says why, naming the holder.
func TestSecondInstanceWithAHostWaits(t *testing.T) {
	create(t, instance("host-first"))
	waitInstance(t, "host-first", v1.ConditionReady, "True/Reconciled")
	create(t, instance("host-second", func(i *v1.Instance) { i.Spec.Host = "host-first.example.com" }))
	inst := waitInstance(t, "host-second", v1.ConditionStalled, "True/"+v1.ReasonHostInUse)
	if c := condition(inst.Status.Conditions, v1.ConditionReady); c != "False/"+v1.ReasonHostInUse {
		t.Errorf("Ready = %s", c)
	}
	for _, c := range inst.Status.Conditions {
		if c.Type == v1.ConditionStalled && !strings.Contains(c.Message, "default/host-first") {
			t.Errorf("Stalled message %q does not name the holder", c.Message)
		}
	}
	if g := getGeneration(t, "host-second", 1); g != nil {
		t.Fatalf("the second Instance made generation 1")
	}
}
