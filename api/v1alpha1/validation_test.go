package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

var k8s client.Client

func TestMain(m *testing.M) {
	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// instance is a valid Instance; cases change one thing to make it bad.
func instance(name string) *v1.Instance {
	return &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.InstanceSpec{
			Host:     name + ".example.com",
			NodeName: "node-a",
			Template: v1.Template{
				Command: []string{"/usr/bin/app"},
				Args:    []string{"--listen", "$(UNITLET_APP_SOCKET)"},
				Env:     []v1.EnvVar{{Name: "MODE", Value: "prod"}},
				Tier: v1.Tier{
					Memory: resource.MustParse("256Mi"),
					CPU:    resource.MustParse("500m"),
					Pids:   512,
				},
				Readiness: &v1.Readiness{HTTPGet: &v1.HTTPGetProbe{Path: "/healthz"}},
			},
		},
	}
}

func generation(name string) *v1.Generation {
	inst := instance(name)
	return &v1.Generation{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: "default"},
		Spec: v1.GenerationSpec{
			Instance: name, NodeName: "node-a", Number: 1, Template: inst.Spec.Template,
		},
	}
}

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func TestInstanceValidation(t *testing.T) {
	cases := map[string]struct {
		mutate func(*v1.Instance)
		want   string // a piece of the API server's message
	}{
		"drain limit negative": {
			func(i *v1.Instance) { n := int32(-1); i.Spec.DrainLimitSeconds = &n }, "spec.drainLimitSeconds in body should be greater than or equal to 0"},
		"idleAfter under a second": {
			func(i *v1.Instance) {
				i.Spec.SocketActivation = &v1.SocketActivation{IdleAfter: &metav1.Duration{Duration: 100 * time.Millisecond}}
			}, "idleAfter must be at least 1s"},
		"host with capitals": {
			func(i *v1.Instance) { i.Spec.Host = "Shop.Example.com" }, "host must be a DNS-1123 subdomain"},
		"host with underscore": {
			func(i *v1.Instance) { i.Spec.Host = "my_shop.example.com" }, "host must be a DNS-1123 subdomain"},
		"host starting with a dash": {
			func(i *v1.Instance) { i.Spec.Host = "-shop.example.com" }, "host must be a DNS-1123 subdomain"},
		"host with empty label": {
			func(i *v1.Instance) { i.Spec.Host = "shop..example.com" }, "host must be a DNS-1123 subdomain"},
		"host empty": {
			func(i *v1.Instance) { i.Spec.Host = "" }, "spec.host in body should be at least 1 chars long"},
		"relative command": {
			func(i *v1.Instance) { i.Spec.Template.Command = []string{"app"} }, "command[0] must be an absolute path"},
		"empty command": {
			func(i *v1.Instance) { i.Spec.Template.Command = nil }, "spec.template.command: Required value"},
		"env name starting with digit": {
			func(i *v1.Instance) { i.Spec.Template.Env = []v1.EnvVar{{Name: "1BAD", Value: "x"}} }, "env name must start with a letter or '_'"},
		"env name with dash": {
			func(i *v1.Instance) { i.Spec.Template.Env = []v1.EnvVar{{Name: "MY-VAR", Value: "x"}} }, "env name must start with a letter or '_'"},
		"env name reserved": {
			func(i *v1.Instance) { i.Spec.Template.Env = []v1.EnvVar{{Name: "UNITLET_APP_SOCKET", Value: "x"}} }, "reserved for the platform"},
		"instance key name reserved": {
			func(i *v1.Instance) { i.Spec.Template.Env = []v1.EnvVar{{Name: v1.EnvInstanceKey, Value: "guess"}} }, "reserved for the platform"},
		"env name duplicated": {
			func(i *v1.Instance) {
				i.Spec.Template.Env = []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}}
			}, "Duplicate value"},
		"memory below floor": {
			func(i *v1.Instance) { i.Spec.Template.Tier.Memory = resource.MustParse("1Mi") }, "tier.memory must be at least 4Mi"},
		"cpu zero": {
			func(i *v1.Instance) { i.Spec.Template.Tier.CPU = resource.MustParse("0") }, "tier.cpu must be positive"},
		"cpu negative": {
			func(i *v1.Instance) { i.Spec.Template.Tier.CPU = resource.MustParse("-1") }, "tier.cpu must be positive"},
		"pids below floor": {
			func(i *v1.Instance) { i.Spec.Template.Tier.Pids = 4 }, "tier.pids must be at least 8"},
		"overlap below tier": {
			func(i *v1.Instance) { i.Spec.Overlap = &v1.Overlap{Memory: qty("128Mi")} }, "overlap.memory must be at least template.tier.memory"},
		"unknown strategy": {
			func(i *v1.Instance) { i.Spec.Strategy = "Rolling" }, `Unsupported value: "Rolling": supported values: "Overlap", "Replace"`},
		"two readiness probes": {
			func(i *v1.Instance) { i.Spec.Template.Readiness.Socket = &v1.SocketProbe{} }, "readiness needs exactly one probe"},
		"no readiness probe": {
			func(i *v1.Instance) { i.Spec.Template.Readiness.HTTPGet = nil }, "readiness needs exactly one probe"},
		"readiness path relative": {
			func(i *v1.Instance) { i.Spec.Template.Readiness.HTTPGet.Path = "healthz" }, "httpGet.path must start with '/'"},
		"envFrom names both": {
			func(i *v1.Instance) {
				i.Spec.Template.EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.LocalObjectReference{Name: "s"}, ConfigMapRef: &v1.LocalObjectReference{Name: "c"}}}
			}, "envFrom entry needs exactly one of secretRef or configMapRef"},
		"envFrom names neither": {
			func(i *v1.Instance) { i.Spec.Template.EnvFrom = []v1.EnvFromSource{{}} }, "envFrom entry needs exactly one of secretRef or configMapRef"},
		"relative workingDir": {
			func(i *v1.Instance) { i.Spec.Template.WorkingDir = "srv/app" }, "workingDir must be an absolute path"},
		"bad user name": {
			func(i *v1.Instance) { i.Spec.Template.User = "Root!" }, "user must be a valid user name"},
		"seed with relative command": {
			func(i *v1.Instance) { i.Spec.Template.Seed = &v1.Role{Command: []string{"./migrate"}} }, "command[0] must be an absolute path"},
		"sidecar with bad name": {
			func(i *v1.Instance) {
				i.Spec.Template.Sidecars = []v1.Sidecar{{Name: "Side_Car", Role: v1.Role{Command: []string{"/bin/true"}}}}
			}, "sidecar name must be a DNS-1123 label"},
		"unknown moves": {
			func(i *v1.Instance) { i.Spec.Placement = &v1.Placement{Moves: "Sometimes"} }, `Unsupported value: "Sometimes": supported values: "Never", "Allowed"`},
		"lostAfterSeconds negative": {
			func(i *v1.Instance) { i.Spec.Placement = &v1.Placement{LostAfterSeconds: ptr.To[int32](-1)} }, "should be greater than or equal to 0"},
		"readiness timeout zero": {
			func(i *v1.Instance) { i.Spec.Template.Readiness.TimeoutSeconds = -1 }, "should be greater than or equal to 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inst := instance("bad-" + strings.ToLower(strings.NewReplacer(" ", "-").Replace(name)))
			tc.mutate(inst)
			err := k8s.Create(ctx(t), inst)
			if err == nil {
				_ = k8s.Delete(ctx(t), inst)
				t.Fatalf("accepted; want refusal with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with\n  %v\nwant a message containing\n  %q", err, tc.want)
			}
		})
	}
}

func TestValidInstanceAccepted(t *testing.T) {
	inst := instance("good")
	inst.Spec.Overlap = &v1.Overlap{Memory: qty("512Mi")}
	inst.Spec.Template.Seed = &v1.Role{Command: []string{"/usr/bin/migrate"}}
	inst.Spec.Template.Sidecars = []v1.Sidecar{{Name: "worker", Role: v1.Role{Command: []string{"/usr/bin/worker"}}}}
	inst.Spec.Template.EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.LocalObjectReference{Name: "creds"}}}
	if err := k8s.Create(ctx(t), inst); err != nil {
		t.Fatalf("valid instance refused: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), inst) })
	if inst.Spec.Strategy != v1.StrategyOverlap {
		t.Errorf("strategy default = %q, want Overlap", inst.Spec.Strategy)
	}
	if got := inst.Spec.Template.Readiness.TimeoutSeconds; got != 30 {
		t.Errorf("readiness timeout default = %d, want 30", got)
	}
}

// TestInstanceNodeNameTransitions: an unplaced Instance may be bound once;
// a bound one changes node only as a move it allows, and never goes back
// to unplaced.
func TestInstanceNodeNameTransitions(t *testing.T) {
	const refused = "nodeName cannot be cleared once set, and changes only when placement.moves is Allowed"
	cases := map[string]struct {
		from, to string
		moves    v1.MovePolicy
		want     string // "" accepted
	}{
		"bind unplaced":           {from: "", to: "node-a"},
		"same node":               {from: "node-a", to: "node-a"},
		"move when Never":         {from: "node-a", to: "node-b", moves: v1.MovesNever, want: refused},
		"move by default (Never)": {from: "node-a", to: "node-b", want: refused},
		"move when Allowed":       {from: "node-a", to: "node-b", moves: v1.MovesAllowed},
		"clear when Allowed":      {from: "node-a", to: "", moves: v1.MovesAllowed, want: refused},
		"clear when Never":        {from: "node-a", to: "", want: refused},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inst := instance("nn-" + strings.ToLower(strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(name)))
			inst.Spec.NodeName = tc.from
			if tc.moves != "" {
				inst.Spec.Placement = &v1.Placement{Moves: tc.moves}
			}
			if err := k8s.Create(ctx(t), inst); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), inst) })
			inst.Spec.NodeName = tc.to
			err := k8s.Update(ctx(t), inst)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%q -> %q refused: %v", tc.from, tc.to, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("%q -> %q: got %v, want refusal with %q", tc.from, tc.to, err, tc.want)
			}
		})
	}
}

// TestHostClaimHolderImmutable: a claim passes to another holder only by
// being deleted and created anew, never by an update; its node follows
// the holder's moves (cluster/moves), so an update may change it.
func TestHostClaimHolderImmutable(t *testing.T) {
	c := &v1.HostClaim{ObjectMeta: metav1.ObjectMeta{Name: "claimed.example.com"},
		Spec: v1.HostClaimSpec{Namespace: "default", Name: "holder", UID: "u-holder", NodeName: "node-a"}}
	if err := k8s.Create(ctx(t), c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), c) })
	for name, tc := range map[string]struct {
		mutate  func(*v1.HostClaimSpec)
		refused bool
	}{
		"namespace": {mutate: func(s *v1.HostClaimSpec) { s.Namespace = "other" }, refused: true},
		"name":      {mutate: func(s *v1.HostClaimSpec) { s.Name = "other" }, refused: true},
		"uid":       {mutate: func(s *v1.HostClaimSpec) { s.UID = "u-other" }, refused: true},
		"node":      {mutate: func(s *v1.HostClaimSpec) { s.NodeName = "node-b" }},
	} {
		t.Run(name, func(t *testing.T) {
			cur := &v1.HostClaim{}
			if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(c), cur); err != nil {
				t.Fatal(err)
			}
			tc.mutate(&cur.Spec)
			err := k8s.Update(ctx(t), cur)
			if refused := err != nil && strings.Contains(err.Error(), "a HostClaim's holder is immutable"); refused != tc.refused || (err != nil && !refused) {
				t.Fatalf("got %v, want refused %v", err, tc.refused)
			}
		})
	}
}

func TestGenerationValidation(t *testing.T) {
	t.Run("number zero refused", func(t *testing.T) {
		g := generation("gen-zero")
		g.Spec.Number = 0
		err := k8s.Create(ctx(t), g)
		if err == nil || !strings.Contains(err.Error(), "number must be at least 1") {
			t.Fatalf("got %v, want refusal of number 0", err)
		}
	})

	g := generation("frozen")
	g.Spec.Host = "frozen.example.com"
	if err := k8s.Create(ctx(t), g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), g) })

	updates := map[string]struct {
		mutate func(*v1.Generation)
		want   string
	}{
		"template changed": {func(g *v1.Generation) { g.Spec.Template.Args = []string{"--other"} }, "template is immutable"},
		"tier changed":     {func(g *v1.Generation) { g.Spec.Template.Tier.Pids = 1024 }, "template is immutable"},
		"number changed":   {func(g *v1.Generation) { g.Spec.Number = 2 }, "number is immutable"},
		"instance changed": {func(g *v1.Generation) { g.Spec.Instance = "other" }, "instance is immutable"},
		"node changed":     {func(g *v1.Generation) { g.Spec.NodeName = "node-b" }, "nodeName is immutable"},
		"host changed":     {func(g *v1.Generation) { g.Spec.Host = "other.example.com" }, "host is immutable"},
	}
	for name, tc := range updates {
		t.Run(name, func(t *testing.T) {
			cur := &v1.Generation{}
			if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(g), cur); err != nil {
				t.Fatal(err)
			}
			tc.mutate(cur)
			err := k8s.Update(ctx(t), cur)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want refusal containing %q", err, tc.want)
			}
		})
	}

	t.Run("retired may change", func(t *testing.T) {
		cur := &v1.Generation{}
		if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(g), cur); err != nil {
			t.Fatal(err)
		}
		cur.Spec.Retired = true
		if err := k8s.Update(ctx(t), cur); err != nil {
			t.Fatalf("marking retired refused: %v", err)
		}
		cur.Spec.Retired = false
		if err := k8s.Update(ctx(t), cur); err == nil || !strings.Contains(err.Error(), "retired cannot be undone") {
			t.Fatalf("un-retiring: %v, want refused", err)
		}
	})
}

// TestSamplesAccepted applies every file in config/samples as a user would.
func TestSamplesAccepted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
				t.Fatalf("not YAML: %v", err)
			}
			obj.SetName("sample-" + obj.GetName())
			if err := k8s.Create(ctx(t), obj); err != nil {
				t.Fatalf("sample refused: %v", err)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
		})
	}
}
