package capacity

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
)

// ParseReserve reads the agent's --reserved flag, as the kubelet's
// --system-reserved: "memory=512Mi,cpu=500m,pids=1000", any of the three,
// each once; "" reserves nothing.
func ParseReserve(s string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		name := corev1.ResourceName(strings.TrimSpace(k))
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want NAME=QUANTITY, like memory=512Mi", part)
		}
		if !slices.Contains(Names, name) {
			return nil, fmt.Errorf("%q: unknown resource %q: want memory, cpu or pids", part, name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%q: %s is reserved twice", part, name)
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q: %s: %w", part, name, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%q: a reserve cannot be negative", part)
		}
		if name == v1.ResourcePids && q.MilliValue()%1000 != 0 {
			return nil, fmt.Errorf("%q: pids is a whole number of tasks", part)
		}
		out[name] = q
	}
	return out, nil
}
