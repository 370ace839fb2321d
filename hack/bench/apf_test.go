package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// TestFlowControlAndFloor applies config/flowcontrol to a real API server
// and checks which priority level each of unitlet's ServiceAccounts (and
// another one) lands in, then runs the API floor for a few Instances: its
// writes are accepted and leave nothing behind.
func TestFlowControlAndFloor(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{env: env, c: c, app: "/bin/true", o: options{n: 5}}
	if err := h.applyFlowControl(ctx); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct{ ns, sa, want string }{
		"the agents":       {agentNS, agentSA, agentLevel},
		"the cluster side": {agentNS, "unitlet-nodewatch", "workload-high"},
		"another client":   {readerNS, "other", "workload-low"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			u, err := h.saUser(ctx, tc.ns, tc.sa)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.waitLevel(ctx, u.Config(), tc.want); err != nil {
				t.Error(err)
			}
			if tc.sa == agentSA {
				h.agentCfg = u.Config()
			}
		})
	}
	if h.agentCfg == nil {
		t.Fatal("no agent credentials")
	}
	rd, err := h.newReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stop := rd.start(ctx)
	sleep(ctx, 300*time.Millisecond)
	if l := stop(); l.Count == 0 || l.P99 <= 0 || l.Max < l.P99 {
		t.Errorf("the other client's reads: %+v", l)
	}
	r := &results{N: h.o.n}
	if err := apiFloor(ctx, h, r); err != nil {
		t.Fatal(err)
	}
	if r.Floor.Create <= 0 || r.Floor.Swap <= 0 || r.Floor.Delete <= 0 {
		t.Errorf("floor not timed: %+v", *r.Floor)
	}
	var insts v1.InstanceList
	var gens v1.GenerationList
	if err := c.List(ctx, &insts, client.InNamespace(floorNS)); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &gens, client.InNamespace(floorNS)); err != nil {
		t.Fatal(err)
	}
	left := append(objectNames(insts.Items), objectNames(gens.Items)...)
	if d := cmp.Diff([]string(nil), left); d != "" {
		t.Errorf("left after the floor's delete (-want,+got):\n%s", d)
	}
}

func objectNames[T any, P interface {
	*T
	metav1.Object
}](items []T) []string {
	var out []string
	for i := range items {
		out = append(out, P(&items[i]).GetName())
	}
	return out
}
