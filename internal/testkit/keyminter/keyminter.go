// Package keyminter runs the cluster side's instance key controller
// (cluster/instancekey) in a test process, as `unitlet cluster` runs it
// beside the agents: without it no Instance makes a generation. Beside
// it runs the cluster side's release of host claims whose holder is gone
// (cluster/moves.ClaimReconciler): an agent leaves a deleted Instance's
// claim to it, and a later test's Instance on another node may name the
// same host.
package keyminter

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterkey "github.com/unitlet/unitlet/cluster/instancekey"
	"github.com/unitlet/unitlet/cluster/moves"
	"github.com/unitlet/unitlet/internal/scheme"
)

// Namespace is where the keys are minted (the agents' default).
const Namespace = clusterkey.DefaultNamespace

// Start creates Namespace, mints keys and releases the claims of gone
// holders until ctx ends.
func Start(ctx context.Context, cfg *rest.Config) error { return start(ctx, cfg, true) }

// StartKeys is Start without the claims' release: for a suite that
// tests what the agent alone does with a claim its holder left.
func StartKeys(ctx context.Context, cfg *rest.Config) error { return start(ctx, cfg, false) }

func start(ctx context.Context, cfg *rest.Config, releaseClaims bool) error {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{Namespace: {}}}}}})
	if err != nil {
		return fmt.Errorf("key minter: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return fmt.Errorf("key minter: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("key minter: namespace %s: %w", Namespace, err)
	}
	r := &clusterkey.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), KeyNamespace: Namespace}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("key minter: %w", err)
	}
	if releaseClaims {
		claims := &moves.ClaimReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}
		if err := claims.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("host claims: %w", err)
		}
	}
	go func() { _ = mgr.Start(ctx) }()
	return nil
}
