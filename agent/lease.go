package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The node's Lease, as the kubelet keeps one: renewed every leaseRenew,
// valid for leaseDuration, so nodewatch marks the node's Instances
// NodeLost within leaseDuration of the agent's end.
const (
	leaseRenew    = 10 * time.Second
	leaseDuration = 40 * time.Second
)

// leaseRenewer keeps namespace/node's Lease renewed while the agent runs.
type leaseRenewer struct {
	client          client.Client
	namespace, node string
	clock           clock.Clock
	log             logr.Logger
	every           time.Duration
}

// NeedLeaderElection is false: every agent renews its own node's Lease.
func (l *leaseRenewer) NeedLeaderElection() bool { return false }

// Start renews until ctx ends. A failed renewal is logged once per cause
// and tried again at the next tick: the Lease's duration covers several.
func (l *leaseRenewer) Start(ctx context.Context) error {
	logged := ""
	for {
		if err := l.renew(ctx); err != nil && ctx.Err() == nil && err.Error() != logged {
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
	now := metav1.NewMicroTime(l.clock.Now())
	lease := &coordinationv1.Lease{}
	err := l.client.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: l.node}, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.namespace, Name: l.node},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.node), LeaseDurationSeconds: ptr.To(int32(leaseDuration / time.Second)),
				AcquireTime: &now, RenewTime: &now},
		}
		if err := l.client.Create(ctx, lease); err != nil {
			return fmt.Errorf("create lease %s/%s: %w", l.namespace, l.node, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read lease %s/%s: %w", l.namespace, l.node, err)
	}
	lease.Spec.HolderIdentity = ptr.To(l.node)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(leaseDuration / time.Second))
	lease.Spec.RenewTime = &now
	if err := l.client.Update(ctx, lease); err != nil {
		return fmt.Errorf("renew lease %s/%s: %w", l.namespace, l.node, err)
	}
	return nil
}
