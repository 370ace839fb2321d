package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
)

// ClusterSideUser is the cluster side's service account (config/nodewatch).
const ClusterSideUser = "system:serviceaccount:unitlet-system:unitlet-nodewatch"

// AsClusterSide installs the cluster side's service account and role
// (config/nodewatch) as admin and returns e's config acting as that
// account: what its RBAC refuses, a test run with it is refused.
func (e *Env) AsClusterSide(ctx context.Context) (*rest.Config, error) {
	for _, f := range []string{"config/default/namespace.yaml", "config/nodewatch/service_account.yaml",
		"config/nodewatch/role.yaml", "config/nodewatch/role_binding.yaml"} {
		objs, err := DecodeFile(f)
		if err != nil {
			return nil, err
		}
		for _, u := range objs {
			if err := e.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("install %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: ClusterSideUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:unitlet-system", "system:authenticated"}}
	return cfg, nil
}

// DecodeFile reads the objects of a YAML file of the repository (a path
// from its top).
func DecodeFile(f string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(filepath.Join(RepoRoot(), f))
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
