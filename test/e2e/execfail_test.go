package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// TestCommandThatCannotBeExecuted: an Instance whose command is
// /tmp/nothing (never visible to an app: /tmp is private to each) reads
// ExecFailed with the exec's error and why on its Generation and on
// itself, not exit code 127; it is retried with the backoff, and its
// retries do not push the generation that served out of the history.
func TestCommandThatCannotBeExecuted(t *testing.T) {
	a := startAgent(t, "e2e-execfail")
	inst := sample(t, "hosting_v1alpha1_instance_replace.yaml", a.Node)
	inst.Name, inst.Spec.Host = "noexec", "noexec.example.com"
	inst.Spec.GenerationHistoryLimit = ptr.To[int32](1)
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteAndWait(t, inst.Name) })
	waitServing(t, inst.Name, 1)

	updateInstance(t, inst.Name, func(i *v1.Instance) { i.Spec.Template.Command = []string{"/tmp/nothing"} })
	const why = "exec /tmp/nothing: no such file or directory (/tmp is private to each app: put the binary in the data dir or a system path)"
	testutil.Eventually(t, "the Instance reads ExecFailed with the why", 60*time.Second, pollEvery, func() (bool, string) {
		c := meta.FindStatusCondition(getInstance(t, inst.Name).Status.Conditions, v1.ConditionReconciling)
		return c != nil && c.Reason == v1.ReasonExecFailed && strings.Contains(c.Message, why), fmt.Sprintf("Reconciling %+v", c)
	})
	g2 := getGeneration(t, inst.Name, 2)
	if c := meta.FindStatusCondition(g2.Status.Conditions, v1.ConditionStarted); c == nil || c.Reason != v1.ReasonExecFailed || !strings.Contains(c.Message, why) {
		t.Errorf("generation 2 Started = %+v, want ExecFailed with the why", c)
	}

	// Retries 10s, then 20s apart: generation 4 is the third attempt.
	testutil.Eventually(t, "several retries", 90*time.Second, pollEvery, func() (bool, string) {
		return generationExists(t, inst.Name, 4), conditions(getInstance(t, inst.Name).Status.Conditions)
	})
	testutil.Eventually(t, "generation 1 kept, the retries pruned but the newest", 30*time.Second, pollEvery, func() (bool, string) {
		var kept []int64
		for n := int64(1); n <= 6; n++ {
			if generationExists(t, inst.Name, n) {
				kept = append(kept, n)
			}
		}
		return len(kept) <= 3 && kept[0] == 1, fmt.Sprintf("kept %v", kept)
	})
}

func generationExists(t *testing.T, inst string, n int64) bool {
	t.Helper()
	var g v1.Generation
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("%s-g%d", inst, n)}, &g)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}
