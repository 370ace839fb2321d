package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// sample reads one of config/samples as a user would apply it, on node.
func sample(t *testing.T, file, node string) *v1.Instance {
	t.Helper()
	return testutil.Sample(t, file, node)
}

func kubectl(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The helpers below keep this package's names and limits; the work is
// internal/testutil's, shared with test/systemd and controllers.

func getInstance(t *testing.T, name string) *v1.Instance {
	t.Helper()
	return kube.Instance(t, name)
}

func getGeneration(t *testing.T, inst string, n int64) *v1.Generation {
	t.Helper()
	return kube.Generation(t, inst, n)
}

func conditions(conds []metav1.Condition) string { return testutil.Conditions(conds) }

// waitServing waits for Ready=True with generation active serving.
func waitServing(t *testing.T, name string, active int64) *v1.Instance {
	t.Helper()
	return kube.WaitServing(t, name, active)
}

// unixGet sends GET path over a unix socket.
func unixGet(sock, path string) (string, error) { return testutil.UnixGet(sock, path) }

func updateInstance(t *testing.T, name string, mutate func(*v1.Instance)) {
	t.Helper()
	kube.UpdateInstance(t, name, 10*time.Second, mutate)
}

// deleteAndWait deletes an Instance and waits until its finalizer is released.
func deleteAndWait(t *testing.T, name string) {
	t.Helper()
	kube.DeleteAndWait(t, name, 60*time.Second)
}
