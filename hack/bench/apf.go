package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/unitlet/unitlet/internal/testkit/keyminter"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// The agents' API Priority and Fairness in the bench: config/flowcontrol is
// applied to the bench's API server, the agent authenticates as the
// production ServiceAccount (so that FlowSchema, not system:masters'
// exemption, decides its requests), and another client's reads are timed
// at rest and during the create.

const (
	agentNS, agentSA   = "unitlet-system", "unitlet-agent"
	readerNS, readerSA = "bench-other", "reader"
	agentLevel         = "unitlet-agents"
)

// reads is another client's GET and LIST of a ConfigMap, seconds.
type reads struct {
	AtRest       latencies `json:"atRest"`
	DuringCreate latencies `json:"duringCreate"`
	// AgentLevel is the priority level the API server put the agent's
	// credentials in (its X-Kubernetes-PF-PriorityLevel-UID answer).
	AgentLevel string `json:"agentPriorityLevel"`
}

type latencies struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50Seconds"`
	P90   float64 `json:"p90Seconds"`
	P99   float64 `json:"p99Seconds"`
	Max   float64 `json:"maxSeconds"`
}

// saUser is a user of the bench's API server named as ServiceAccount
// name of ns is (a pod's token authenticates as the same user and groups),
// bound to cluster-admin: the bench measures flow control, not
// authorization.
func (h *harness) saUser(ctx context.Context, ns, name string) (*envtest.AuthenticatedUser, error) {
	user := "system:serviceaccount:" + ns + ":" + name
	u, err := h.env.AddUser(envtest.User{Name: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}, nil)
	if err != nil {
		return nil, err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-" + ns + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	return u, h.c.Create(ctx, crb)
}

// startKeyMinter runs the cluster side's instance key controller, as
// `unitlet cluster` does (no Instance makes a generation without its
// key), as the cluster side's ServiceAccount, so its FlowSchema applies.
func (h *harness) startKeyMinter(ctx context.Context) error {
	u, err := h.saUser(ctx, agentNS, "unitlet-nodewatch")
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(u.Config())
	cfg.QPS = -1
	return keyminter.Start(ctx, cfg)
}

// applyFlowControl creates what config/flowcontrol holds, as
// config/default would.
func (h *harness) applyFlowControl(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "flowcontrol", "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var u unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if err := h.c.Create(ctx, &u); err != nil {
				return fmt.Errorf("%s: %s %s: %w", f, u.GetKind(), u.GetName(), err)
			}
		}
	}
	return nil
}

// priorityLevel is the name of the level the API server puts cfg's
// requests in, from its answer's X-Kubernetes-PF-PriorityLevel-UID.
func (h *harness) priorityLevel(ctx context.Context, cfg *rest.Config) (string, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/api/v1/namespaces/"+benchNS+"/configmaps?limit=1", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	uid := resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
	var levels unstructured.UnstructuredList
	levels.SetAPIVersion("flowcontrol.apiserver.k8s.io/v1")
	levels.SetKind("PriorityLevelConfigurationList")
	if err := h.c.List(ctx, &levels); err != nil {
		return "", err
	}
	for _, l := range levels.Items {
		if string(l.GetUID()) == uid {
			return l.GetName(), nil
		}
	}
	return "", fmt.Errorf("no priority level has the UID %q the API server answered", uid)
}

// waitLevel waits until the API server puts cfg's requests in priority
// level want: its flow control reads new FlowSchemas from a watch.
func (h *harness) waitLevel(ctx context.Context, cfg *rest.Config, want string) error {
	var got string
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); sleep(ctx, 200*time.Millisecond) {
		if got, err = h.priorityLevel(ctx, cfg); err == nil && got == want {
			return nil
		}
	}
	return fmt.Errorf("requests in priority level %q, want %s (config/flowcontrol): %v", got, want, err)
}

// reader is the other client: its own user (a ServiceAccount of another
// namespace, so service-accounts → workload-low), its own connection, no
// client-side limit.
type reader struct {
	cs *kubernetes.Clientset
}

func (h *harness) newReader(ctx context.Context) (*reader, error) {
	u, err := h.saUser(ctx, readerNS, readerSA)
	if err != nil {
		return nil, err
	}
	if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: readerNS}}); err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: readerNS, Name: "probe"}, Data: map[string]string{"k": "v"}}
	if err := h.c.Create(ctx, cm); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(u.Config())
	cfg.QPS = -1
	cs, err := kubernetes.NewForConfig(cfg)
	return &reader{cs: cs}, err
}

// start reads (a GET, then a LIST, 10 ms apart) until the returned
// function is called, which returns their latencies.
func (rd *reader) start(ctx context.Context) func() latencies {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			t0 := time.Now()
			var err error
			if i%2 == 0 {
				_, err = rd.cs.CoreV1().ConfigMaps(readerNS).Get(ctx, "probe", metav1.GetOptions{})
			} else {
				_, err = rd.cs.CoreV1().ConfigMaps(readerNS).List(ctx, metav1.ListOptions{})
			}
			if err == nil {
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
			}
			sleep(ctx, 10*time.Millisecond)
		}
	}()
	return func() latencies {
		cancel()
		wg.Wait()
		var l latencies
		l.Count = len(lat)
		l.P50, l.P90, l.P99 = testutil.Percentiles(lat)
		if len(lat) > 0 {
			l.Max = lat[len(lat)-1].Seconds() // percentiles sorted them
		}
		return l
	}
}

// phaseCreateWithReads is the create, with the other client's reads timed
// over it and, before it, over 10 s at rest.
func phaseCreateWithReads(ctx context.Context, h *harness, r *results) (err error) {
	if r.Reads.AgentLevel, err = h.priorityLevel(ctx, h.agentCfg); err != nil {
		return err
	}
	rd, err := h.newReader(ctx)
	if err != nil {
		return fmt.Errorf("the other client: %w", err)
	}
	stop := rd.start(ctx)
	sleep(ctx, 10*time.Second)
	r.Reads.AtRest = stop()
	stop = rd.start(ctx)
	err = phaseCreate(ctx, h, r)
	r.Reads.DuringCreate = stop()
	return err
}
