package node

import (
	"context"
	"maps"
	"slices"
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
	byPID := map[int]string{}
	for _, name := range names {
		inst := kube.Instance(t, name)
		if inst.Status.ActiveGeneration == 0 || inst.DeletionTimestamp != nil {
			continue
		}
		g := kube.Generation(t, name, inst.Status.ActiveGeneration)
		if g.Status.MainPID == 0 || !meta.IsStatusConditionTrue(g.Status.Conditions, v1.ConditionReady) {
			continue
		}
		byPID[int(g.Status.MainPID)] = name
	}
	// A process gone since its status was read is left out, not taken
	// for one without a key.
	keys := map[string]string{}
	for pid, key := range vm.ProcEnv(t, slices.Collect(maps.Keys(byPID)), v1.EnvInstanceKey) {
		if key == "" {
			t.Errorf("%s runs without an instance key", byPID[pid])
		}
		keys[byPID[pid]] = key
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
			// One asleep ran nothing to read; one that ran must have
			// been read, or this check would check nothing.
			if len(old[name].live) > 0 {
				t.Errorf("%s: no running process's key read before the reboot", name)
			}
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
