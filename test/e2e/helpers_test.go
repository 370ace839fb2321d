package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testenv"
)

// sample reads one of config/samples as a user would apply it, on node.
func sample(t *testing.T, file, node string) *v1.Instance {
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

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func getInstance(t *testing.T, name string) *v1.Instance {
	t.Helper()
	inst := &v1.Instance{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, inst); err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return inst
}

func getGeneration(t *testing.T, inst string, n int64) *v1.Generation {
	t.Helper()
	g := &v1.Generation{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("%s-g%d", inst, n)}, g); err != nil {
		t.Fatalf("get generation %d of %s: %v", n, inst, err)
	}
	return g
}

func conditions(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, c.Type+"="+string(c.Status)+"/"+c.Reason+": "+c.Message)
	}
	return strings.Join(parts, "; ")
}

// waitReady waits for Ready=True with generation active serving.
func waitServing(t *testing.T, name string, active int64) *v1.Instance {
	t.Helper()
	var inst *v1.Instance
	eventually(t, fmt.Sprintf("%s serving generation %d", name, active), 90*time.Second, func() (bool, string) {
		inst = getInstance(t, name)
		return inst.Status.ActiveGeneration == active && meta.IsStatusConditionTrue(inst.Status.Conditions, v1.ConditionReady),
			fmt.Sprintf("active=%d %s", inst.Status.ActiveGeneration, conditions(inst.Status.Conditions))
	})
	return inst
}

// unixGet sends GET path over a unix socket.
func unixGet(sock, path string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := c.Get("http://instance" + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("status %s", resp.Status)
	}
	return string(b), err
}

func updateInstance(t *testing.T, name string, mutate func(*v1.Instance)) {
	t.Helper()
	eventually(t, "update of "+name, 10*time.Second, func() (bool, string) {
		inst := getInstance(t, name)
		mutate(inst)
		err := k8s.Update(context.Background(), inst)
		return err == nil, fmt.Sprint(err)
	})
}

// deleteAndWait deletes an Instance and waits until its lease is released.
func deleteAndWait(t *testing.T, name string) {
	t.Helper()
	inst := &v1.Instance{}
	inst.Namespace, inst.Name = "default", name
	if err := k8s.Delete(context.Background(), inst); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	eventually(t, name+" deleted", 60*time.Second, func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(inst), inst)
		return client.IgnoreNotFound(err) == nil && err != nil, conditions(inst.Status.Conditions)
	})
}
