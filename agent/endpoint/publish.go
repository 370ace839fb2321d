package endpoint

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/internal/enrollment"
)

// publishUntilDone writes the endpoint into the node's Enrollment,
// retrying until it is there or ctx ends: a caller finds the agent only
// through it.
func (s *Server) publishUntilDone(ctx context.Context, addr string, caPEM []byte) {
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Cap: time.Minute, Steps: 1 << 30}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if err := s.publish(ctx, addr, caPEM); err != nil {
			s.Log.Info("endpoint not published yet; retrying", "err", err.Error())
			return false, nil
		}
		s.Log.Info("endpoint published", "enrollment", s.NodeName, "address", addr)
		return true, nil
	})
}

// publish sets status.endpoint of the node's Enrollment, creating the
// Enrollment (not approved) when it does not exist yet.
func (s *Server) publish(ctx context.Context, addr string, caPEM []byte) error {
	enr, err := enrollment.Ensure(ctx, s.Client, s.NodeName)
	if err != nil {
		return err
	}
	want := &v1.AgentEndpoint{Address: addr, ServerName: agentapi.ServerName(s.NodeName), CABundle: caPEM}
	if e := enr.Status.Endpoint; e != nil && e.Address == want.Address && e.ServerName == want.ServerName && bytes.Equal(e.CABundle, caPEM) {
		return nil
	}
	orig := enr.DeepCopy()
	enr.Status.Endpoint = want
	if err := s.Client.Status().Patch(ctx, enr, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("enrollment %s endpoint: %w", s.NodeName, err)
	}
	return nil
}
