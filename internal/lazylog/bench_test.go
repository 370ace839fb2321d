package lazylog

import (
	"io"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// BenchmarkReconcileLogger: what each reconcile's logger costs, made as
// controller-runtime makes it (its kind, namespace, name, reconcileID),
// for a reconcile that writes no line, zapr as the agent builds it
// beside the same logger wrapped.
func BenchmarkReconcileLogger(b *testing.B) {
	for name, wrap := range map[string]func(logr.Logger) logr.Logger{
		"zapr":    func(l logr.Logger) logr.Logger { return l },
		"wrapped": Wrap,
	} {
		b.Run(name, func(b *testing.B) {
			root := wrap(zap.New(zap.WriteTo(io.Discard))).WithValues("controller", "instance", "controllerGroup", "hosting.unitlet.dev", "controllerKind", "Instance")
			b.ReportAllocs()
			for b.Loop() {
				l := root.WithValues("Instance", klog.KRef("default", "app-0001"), "namespace", "default", "name", "app-0001")
				l = l.WithValues("reconcileID", "6f1c2b8e-3a52-4a59-9d1e-0c7b6f7f2a11")
				l.V(1).Info("not enabled")
			}
		})
	}
}
