package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// key follows one Instance the drain moved: the key its first generation
// was given is the one it runs with on its new node; a changed key or a
// missing one refuses the next start while the serving generation goes
// on; a rotation rolls a generation with a new key.
func (f *fleet) key(t *testing.T) {
	moved := make([]string, 0, len(f.movedByDrain))
	for n := range f.movedByDrain {
		moved = append(moved, n)
	}
	sort.Strings(moved)
	name := moved[0]
	addr := f.router.listen(f.root, name)
	before := f.movedByDrain[name]
	keyBefore := bodyKey(t, before)
	secret := keySecret(t, name)
	if got := string(secret.Data["key"]); got != keyBefore {
		t.Fatalf("%s's first generation ran with key %q, its Secret holds %q", name, keyBefore, got)
	}
	now, err := httpGet(addr)
	if err != nil {
		t.Fatal(err)
	}
	if bodyKey(t, now) != keyBefore || now == before {
		t.Fatalf("after its move %s answers %q, before it answered %q: want another generation with the same key", name, now, before)
	}
	inst := getInstance(t, name)
	if inst.Status.KeyFingerprint != fingerprint(keyBefore) {
		t.Errorf("status.keyFingerprint %s, want sha256 of the key %s", inst.Status.KeyFingerprint, fingerprint(keyBefore))
	}

	// Tampered: the Secret's key changed outside a rotation.
	patchSecret(t, secret, func(s *corev1.Secret) { s.Data["key"] = []byte("tampered") })
	refused := f.nextRefused(t, name, v1.ReasonInstanceKeyMismatch)
	patchSecret(t, keySecret(t, name), func(s *corev1.Secret) { s.Data["key"] = []byte(keyBefore) })
	f.waitServes(t, name, refused, keyBefore)

	// Missing: the Secret deleted.
	kept := keySecret(t, name)
	if err := k8s.Delete(context.Background(), kept); err != nil {
		t.Fatal(err)
	}
	refused = f.nextRefused(t, name, v1.ReasonInstanceKeyUnavailable)
	kept.ResourceVersion, kept.UID = "", ""
	if err := k8s.Create(context.Background(), kept); err != nil {
		t.Fatal(err)
	}
	f.waitServes(t, name, refused, keyBefore)

	// Rotated: an administrator's act; the next generation has a new key.
	inst = getInstance(t, name)
	patch := client.MergeFrom(inst.DeepCopy())
	if inst.Annotations == nil {
		inst.Annotations = map[string]string{}
	}
	inst.Annotations[v1.AnnotationRotateKey] = "fleet-1"
	if err := k8s.Patch(context.Background(), inst, patch); err != nil {
		t.Fatal(err)
	}
	served := inst.Status.ActiveGeneration
	testutil.Eventually(t, name+" serving a rotated key", 2*time.Minute, 200*time.Millisecond, func() (bool, string) {
		body, err := httpGet(addr)
		if err != nil {
			return false, err.Error()
		}
		got := getInstance(t, name)
		return got.Status.ActiveGeneration > served && bodyKey(t, body) != keyBefore &&
				got.Status.KeyFingerprint == fingerprint(bodyKey(t, body)),
			fmt.Sprintf("answers %q, fingerprint %s", body, got.Status.KeyFingerprint)
	})
}

// nextRefused changes the template of name so that a new generation is
// made, and waits until its start is refused with reason; the serving
// generation keeps answering. It returns the refused number.
func (f *fleet) nextRefused(t *testing.T, name, reason string) int64 {
	t.Helper()
	inst := getInstance(t, name)
	served := inst.Status.ActiveGeneration
	patch := client.MergeFrom(inst.DeepCopy())
	inst.Spec.Template.Env = testutil.SetEnv(inst.Spec.Template.Env, "TRY", reason)
	if err := k8s.Patch(context.Background(), inst, patch); err != nil {
		t.Fatal(err)
	}
	var refused int64
	testutil.Eventually(t, name+"'s next start refused with "+reason, time.Minute, 200*time.Millisecond, func() (bool, string) {
		for _, g := range generations(t, name) {
			c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionPrepared)
			if g.Spec.Number > served && c != nil && c.Status == "False" && c.Reason == reason {
				refused = g.Spec.Number
				return true, ""
			}
		}
		return false, fmt.Sprintf("no generation after %d refused", served)
	})
	if got := getInstance(t, name); got.Status.ActiveGeneration != served {
		t.Errorf("generation %d no longer serves after a refused start (active %d)", served, got.Status.ActiveGeneration)
	}
	return refused
}

// waitServes waits until a generation numbered refused or later serves
// with key.
func (f *fleet) waitServes(t *testing.T, name string, refused int64, key string) {
	t.Helper()
	addr := f.router.listen(f.root, name)
	testutil.Eventually(t, name+" serving again once its key is right", 2*time.Minute, 200*time.Millisecond, func() (bool, string) {
		got := getInstance(t, name)
		body, err := httpGet(addr)
		if err != nil {
			return false, err.Error()
		}
		return got.Status.ActiveGeneration >= refused && bodyKey(t, body) == key,
			fmt.Sprintf("active %d, answers %q", got.Status.ActiveGeneration, body)
	})
}

func keySecret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	inst := getInstance(t, name)
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: keyNS, Name: "ik-" + string(inst.UID)}, s); err != nil {
		t.Fatalf("key Secret of %s: %v", name, err)
	}
	return s
}

func patchSecret(t *testing.T, s *corev1.Secret, mutate func(*corev1.Secret)) {
	t.Helper()
	patch := client.MergeFrom(s.DeepCopy())
	mutate(s)
	if err := k8s.Patch(context.Background(), s, patch); err != nil {
		t.Fatal(err)
	}
}

// bodyKey is the key an answer of the app names.
func bodyKey(t *testing.T, body string) string {
	t.Helper()
	_, key, ok := strings.Cut(strings.TrimSpace(body), " key=")
	if !ok || key == "" {
		t.Fatalf("answer %q names no key", body)
	}
	return key
}

func fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
