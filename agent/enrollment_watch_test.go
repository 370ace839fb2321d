package agent

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/unitlet/unitlet/runtime/join"
)

// TestApprovalNoticedAtOnce: with a poll an hour apart, approving the
// node's Enrollment still starts hosting at once, and taking the approval
// back stops it at once: the agent watches its own Enrollment, with the
// rights config/rbac grants it.
func TestApprovalNoticedAtOnce(t *testing.T) {
	needRoot(t)
	opts := flowRoots(t)
	// A state root the guard accepts: approval is all that is missing.
	if err := os.Chmod(opts.StateRoot, join.RootMode); err != nil {
		t.Fatal(err)
	}
	const node = "watch-node"
	a := startAgent(t, node, opts, func(j *joining) { j.every = time.Hour })
	a.expectStage(t, http.StatusServiceUnavailable, join.StageAwaitingApproval)

	setApproved(t, node, true)
	a.expectStage(t, http.StatusOK, join.StageHosting)
	setApproved(t, node, false)
	a.expectStage(t, http.StatusServiceUnavailable, join.StageApprovalRevoked)
	if err := a.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}
