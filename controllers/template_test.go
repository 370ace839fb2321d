package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
)

// An envFrom the agent may not read names the namespace and the command
// that opts it in; other failures say what they are.
func TestRefEnvErrors(t *testing.T) {
	tests := map[string]struct {
		err      error
		wantIn   []string
		wantNot  string
		wantKind func(error) bool
	}{
		"forbidden": {
			err:      apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "app-env", errors.New("RBAC: no")),
			wantIn:   []string{"secret app-env", "namespace shop is not opted in", "kubectl create rolebinding unitlet-agent-env -n shop --clusterrole=unitlet-agent-env-reader"},
			wantKind: apierrors.IsForbidden,
		},
		"not found": {
			err:      apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "app-env"),
			wantIn:   []string{"secret app-env", "not found"},
			wantNot:  "rolebinding",
			wantKind: apierrors.IsNotFound,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return tc.err
				},
			}).Build()
			tmpl := &v1.Template{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.LocalObjectReference{Name: "app-env"}}}}
			_, err := refEnv(context.Background(), c, "shop", tmpl)
			if err == nil || !tc.wantKind(err) {
				t.Fatalf("refEnv = %v, want a wrapped %v", err, tc.err)
			}
			for _, want := range tc.wantIn {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q lacks %q", err, want)
				}
			}
			if tc.wantNot != "" && strings.Contains(err.Error(), tc.wantNot) {
				t.Errorf("%q names %q", err, tc.wantNot)
			}
		})
	}
}
