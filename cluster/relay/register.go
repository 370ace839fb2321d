package relay

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var apiServiceGVK = schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}

// setCABundle makes the API server trust the relay's fresh serving
// certificate: a merge patch of the APIService's spec.caBundle (patch by
// name, so the relay needs no more than patch on its own APIService).
func setCABundle(ctx context.Context, c client.Client, apiService string, caPEM []byte) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"caBundle": caPEM}})
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(apiServiceGVK)
	obj.SetName(apiService)
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("set the caBundle of APIService %s to the relay's serving CA: %w", apiService, err)
	}
	return nil
}
