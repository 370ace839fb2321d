package watchfilter

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestOnlyDeletes(t *testing.T) {
	o := &corev1.ConfigMap{}
	got := map[string]bool{
		"create":  OnlyDeletes.Create(event.CreateEvent{Object: o}),
		"update":  OnlyDeletes.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: o}),
		"generic": OnlyDeletes.Generic(event.GenericEvent{Object: o}),
		"delete":  OnlyDeletes.Delete(event.DeleteEvent{Object: o}),
	}
	for kind, passed := range got {
		if passed != (kind == "delete") {
			t.Errorf("%s passed: %v", kind, passed)
		}
	}
}
