package node

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/instancekey"
	"github.com/unitlet/unitlet/internal/testkit/keyminter"
)

// runningKeys is the instance key in the environment of each running
// Instance's serving process, read in the guest in one go: for those of
// names whose active generation is Ready with a main process, and not
// being deleted (a held one's processes may sleep on a frozen file
// system).
func runningKeys(t *testing.T, names []string) map[string]string {
	t.Helper()
	var script strings.Builder
	for _, name := range names {
		inst := kube.Instance(t, name)
		if inst.Status.ActiveGeneration == 0 || inst.DeletionTimestamp != nil {
			continue
		}
		g := kube.Generation(t, name, inst.Status.ActiveGeneration)
		if g.Status.MainPID == 0 || !meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionReady) {
			continue
		}
		// A process gone meanwhile (the status read is older) has no
		// environment to read: skipped, not taken for one without a key.
		fmt.Fprintf(&script, "if e=$(tr '\\0' '\\n' 2>/dev/null </proc/%d/environ) && [ -n \"$e\" ]; then "+
			"printf '%%s %%s\\n' %s \"$(printf '%%s\\n' \"$e\" | sed -n 's/^%s=//p')\"; fi\n",
			g.Status.MainPID, name, v1.EnvInstanceKey)
	}
	keys := map[string]string{}
	if script.Len() == 0 {
		return keys
	}
	for _, line := range strings.Split(strings.TrimSpace(guest(t, script.String())), "\n") {
		name, key, _ := strings.Cut(line, " ")
		if name == "" {
			continue // nothing printed
		}
		if key == "" {
			t.Errorf("%s runs without an instance key", name)
		}
		keys[name] = key
	}
	return keys
}

// keptKeys: each Instance that ran before the reboot runs after it with
// the key it had, which is its key Secret's (the reboot neither lost nor
// minted a key: the cluster side's, not the node's, to give).
func keptKeys(t *testing.T, fleet []string, old bootSnapshot) {
	t.Helper()
	now := runningKeys(t, fleet)
	for _, name := range fleet {
		before := old[name].key
		if before == "" {
			continue
		}
		inst := kube.Instance(t, name)
		secret := &corev1.Secret{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: keyminter.Namespace, Name: instancekey.SecretName(inst.UID)}, secret); err != nil {
			t.Fatalf("%s's key Secret: %v", name, err)
		}
		if got := now[name]; got != before || got != string(secret.Data["key"]) {
			t.Errorf("%s runs with key %q after the reboot; before it ran with %q, its Secret holds %q", name, got, before, secret.Data["key"])
		}
	}
}
