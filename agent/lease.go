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

	"github.com/unitlet/unitlet/nodewatch"
)

// The node's Lease, as the kubelet keeps one: renewed every leaseRenew,
// valid for leaseDuration, so nodewatch marks the node's Instances
// NodeLost within leaseDuration of the agent's end.
const (
	leaseRenew    = 10 * time.Second
	leaseDuration = 40 * time.Second
)

// leaseRenewer keeps namespace/node's Lease renewed while the agent runs,
// as holder (the node and its machine ID): a Lease another machine holds
// and renews means two agents claim one node name, and this one must not
// host (Claim) until that Lease runs out.
type leaseRenewer struct {
	client          client.Client
	namespace, node string
	holder          string
	clock           clock.Clock
	log             logr.Logger
	every, duration time.Duration

	mu    sync.Mutex
	claim error // nil once held; errNotYetHeld before the first renewal
}

var errNotYetHeld = errors.New("the node's Lease has not been taken yet")

// Claim is nil while this agent holds its node's Lease. A failed renewal
// (the API unreachable) leaves it as it was: unknown is not a conflict.
func (l *leaseRenewer) Claim() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.claim
}

func (l *leaseRenewer) setClaim(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claim = err
}

// NeedLeaderElection is false: every agent renews its own node's Lease.
func (l *leaseRenewer) NeedLeaderElection() bool { return false }

// Start renews until ctx ends. A failed renewal is logged once per cause
// and tried again at the next tick: the Lease's duration covers several.
func (l *leaseRenewer) Start(ctx context.Context) error {
	logged := ""
	for {
		err := l.renew(ctx)
		if err != nil && errors.Is(l.Claim(), errNotYetHeld) {
			// Never held: say why on /hostingz, not only in the log.
			l.setClaim(fmt.Errorf("%w: %w", errNotYetHeld, err))
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

func (l *leaseRenewer) renew(ctx context.Context) error {
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
			return fmt.Errorf("create lease %s/%s: %w", l.namespace, l.node, err)
		}
		l.setClaim(nil)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read lease %s/%s: %w", l.namespace, l.node, err)
	}
	if other := ptr.Deref(lease.Spec.HolderIdentity, ""); other != "" && other != l.holder && stillHeld(lease, now) {
		err := fmt.Errorf("node name %s is claimed by another agent (%s) whose Lease is still renewed: two agents must not host one node; this one waits for that Lease to run out",
			l.node, other)
		l.setClaim(err)
		return err
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != l.holder {
		lease.Spec.AcquireTime = &metav1.MicroTime{Time: now}
	}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = ptr.To(l.holder), seconds
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if err := l.client.Update(ctx, lease); err != nil {
		return fmt.Errorf("renew lease %s/%s: %w", l.namespace, l.node, err)
	}
	l.setClaim(nil)
	return nil
}

// stillHeld: lease has not run out at now (nodewatch's reading of it).
func stillHeld(lease *coordinationv1.Lease, now time.Time) bool {
	expiry, ok := nodewatch.Expiry(lease)
	return ok && now.Before(expiry)
}
