package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/controllers"
	"github.com/unitlet/unitlet/internal/nodelease"
)

// leaseRenewer keeps namespace/node's Lease renewed while the agent runs,
// as holder (the node and its machine ID): a Lease another machine holds
// and renews means two agents claim one node name, and this one must not
// host, nor write the Enrollment, until that Lease runs out. A Lease that
// cannot be written at all (its namespace missing, the agent's rights
// wrong) is no such conflict: the Enrollment reports it (see State).
type leaseRenewer struct {
	client          client.Client
	namespace, node string
	holder          string
	clock           clock.Clock
	log             logr.Logger
	every, duration time.Duration

	mu    sync.Mutex
	state controllers.NodeLease
	tried bool
}

var errNotYetTried = errors.New("the node's Lease has not been taken yet")

// State is how the Lease stands. Before the first renewal it is a
// Conflict (nothing known yet); a failed renewal leaves Conflict as it
// was: the API unreachable, or the Lease unwritable, is not a conflict.
func (l *leaseRenewer) State() controllers.NodeLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.tried {
		return controllers.NodeLease{Conflict: errNotYetTried}
	}
	return l.state
}

// record is one renewal's result: err, and conflict when another agent
// holds the Lease.
func (l *leaseRenewer) record(err error, conflict bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tried = true
	l.state.Err = err
	switch {
	case err == nil:
		l.state.Held, l.state.Conflict = true, nil
	case conflict:
		l.state.Conflict = err
	}
}

// NeedLeaderElection is false: every agent renews its own node's Lease.
func (l *leaseRenewer) NeedLeaderElection() bool { return false }

// Start renews until ctx ends. A failed renewal is logged once per cause
// and tried again at the next tick: the Lease's duration covers several.
func (l *leaseRenewer) Start(ctx context.Context) error {
	logged := ""
	for {
		conflict, err := l.renew(ctx)
		if ctx.Err() == nil {
			l.record(err, conflict)
		}
		if err != nil && ctx.Err() == nil && err.Error() != logged {
			logged = err.Error()
			l.log.Error(err, "node lease not renewed; nodewatch marks the node lost once it runs out")
		} else if err == nil {
			logged = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.clock.After(l.every):
		}
	}
}

// renew takes or renews the Lease; conflict says another agent holds it.
func (l *leaseRenewer) renew(ctx context.Context) (conflict bool, _ error) {
	now := l.clock.Now()
	seconds := ptr.To(int32(l.duration / time.Second))
	lease := &coordinationv1.Lease{}
	err := l.client.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: l.node}, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.namespace, Name: l.node},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.holder), LeaseDurationSeconds: seconds,
				AcquireTime: &metav1.MicroTime{Time: now}, RenewTime: &metav1.MicroTime{Time: now}},
		}
		if err := l.client.Create(ctx, lease); err != nil {
			return false, fmt.Errorf("create lease %s/%s: %w", l.namespace, l.node, err)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read lease %s/%s: %w", l.namespace, l.node, err)
	}
	if other := ptr.Deref(lease.Spec.HolderIdentity, ""); other != "" && other != l.holder && stillHeld(lease, now) {
		return true, fmt.Errorf("node name %s is claimed by another agent (%s) whose Lease is still renewed: two agents must not host one node; this one waits for that Lease to run out",
			l.node, other)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != l.holder {
		lease.Spec.AcquireTime = &metav1.MicroTime{Time: now}
	}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = ptr.To(l.holder), seconds
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if err := l.client.Update(ctx, lease); err != nil {
		return false, fmt.Errorf("renew lease %s/%s: %w", l.namespace, l.node, err)
	}
	return false, nil
}

// stillHeld: lease has not run out at now (as nodewatch reads it).
func stillHeld(lease *coordinationv1.Lease, now time.Time) bool {
	expiry, ok := nodelease.Expiry(lease)
	return ok && now.Before(expiry)
}
