// Package statuswrite is how the node agent writes an Instance's status.
// nodewatch writes conditions of the same Instances (NodeLost, NoAgent):
// neither writer may drop what the other wrote.
package statuswrite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// Instance writes inst's status, computed from base, with base's
// resourceVersion as the precondition: it lands only on the version it was
// computed from. On a conflict (nodewatch wrote in between) the changes
// from base to inst are rebased onto the latest version, read from
// latest (uncached), and written again under the same lock, a few times
// at most; the last conflict is returned, for the reconcile to be retried.
// A latest version changed in what the status was computed from is
// ErrStale, and nothing is written.
// A vanished Instance is no error. inst ends as what was written.
func Instance(ctx context.Context, c client.Client, latest client.Reader, inst, base *v1.Instance) error {
	if equality.Semantic.DeepEqual(base.Status, inst.Status) {
		return nil
	}
	mine, from := inst.Status.DeepCopy(), base.Status.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := c.Status().Patch(ctx, inst, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh := &v1.Instance{}
		if err := latest.Get(ctx, client.ObjectKeyFromObject(inst), fresh); err != nil {
			return fmt.Errorf("read the latest after a conflict: %w", err)
		}
		if inputsChanged(base, fresh) {
			return ErrStale
		}
		base = fresh
		fresh.DeepCopyInto(inst)
		inst.Status = Rebase(*from, *mine, fresh.Status)
		if equality.Semantic.DeepEqual(fresh.Status, inst.Status) {
			return nil // the latest already says it all
		}
		return err
	})
	return client.IgnoreNotFound(err)
}

// ErrStale: the Instance changed since base in what its status was
// computed from (its spec, its deletion, its key: the key minter writes
// every new Instance's as the agent writes its first status). Nothing is
// written: laid over the latest, a status computed before the key came
// would still say it waits for the key. That change's own event brings a
// reconcile that computes the status afresh.
var ErrStale = errors.New("statuswrite: the Instance changed since the status was computed")

// inputsChanged: fresh differs from base in what the agent's status is
// computed from. nodewatch's conditions are not: they are rebased.
func inputsChanged(base, fresh *v1.Instance) bool {
	return fresh.UID != base.UID || fresh.Generation != base.Generation ||
		!fresh.DeletionTimestamp.Equal(base.DeletionTimestamp) || fresh.Status.KeyFingerprint != base.Status.KeyFingerprint
}

// Rebase is the agent's status mine, computed from base, laid over
// theirs, the latest, field by field: a field (or a condition, by type)
// the agent left as it found it in base is theirs; one it set, changed or
// removed is its own (the agent is alive and just looked; nodewatch,
// which watches the Instance, looks again at what results). A base read
// from a cache that had not seen the agent's own last write so leaves that
// write standing (an idleSince it set a moment ago, say), where taking
// every field from mine would undo it.
func Rebase(base, mine, theirs v1.InstanceStatus) v1.InstanceStatus {
	out := rebaseFields(base, mine, theirs)
	out.Conditions = nil
	for _, t := range theirs.Conditions {
		b, m := find(base.Conditions, t.Type), find(mine.Conditions, t.Type)
		switch {
		case same(b, m):
			out.Conditions = append(out.Conditions, t)
		case m != nil:
			out.Conditions = append(out.Conditions, *m)
		}
	}
	for _, m := range mine.Conditions {
		if find(theirs.Conditions, m.Type) == nil && !same(find(base.Conditions, m.Type), &m) {
			out.Conditions = append(out.Conditions, m)
		}
	}
	return out
}

// rebaseFields merges the status's fields but the conditions, each by its
// JSON name: theirs where mine equals base, else mine.
func rebaseFields(base, mine, theirs v1.InstanceStatus) v1.InstanceStatus {
	b, m, t := fields(base), fields(mine), fields(theirs)
	out := map[string]json.RawMessage{}
	for _, k := range keys(b, m, t) {
		v, changed := m[k], !bytes.Equal(b[k], m[k])
		if !changed {
			v = t[k]
		}
		if v != nil {
			out[k] = v
		}
	}
	raw, err := json.Marshal(out)
	var st v1.InstanceStatus
	if err == nil {
		err = json.Unmarshal(raw, &st)
	}
	if err != nil {
		return *mine.DeepCopy() // cannot happen with the API's own types
	}
	return st
}

func fields(s v1.InstanceStatus) map[string]json.RawMessage {
	s.Conditions = nil
	raw, _ := json.Marshal(s)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	return m
}

func keys(ms ...map[string]json.RawMessage) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

func find(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func same(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return equality.Semantic.DeepEqual(*a, *b)
}
