package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/node"
)

// Annotations the agent keeps on the objects it makes.
const (
	// AnnotationTemplateHash is the hash of the template a Generation
	// froze; a different hash on the Instance means a new Generation.
	AnnotationTemplateHash = "hosting.unitlet.dev/template-hash"
	// AnnotationRetiredBecause says why a Generation was retired.
	AnnotationRetiredBecause = v1.AnnotationRetiredBecause
	// AnnotationSeeded records when the Instance's seed role succeeded.
	AnnotationSeeded = "hosting.unitlet.dev/seeded"
)

// Why a Generation was retired.
const (
	RetiredSuperseded  = "Superseded"
	RetiredSuspended   = v1.RetiredSuspended
	RetiredSwapAborted = "SwapAborted"
	// RetiredExited: it ended on its own while it served (or while it
	// was to replace one that had), and a successor with the same
	// template takes its place.
	RetiredExited = "Exited"
	// RetiredIdle: no connection reached its socket for idleAfter; the
	// next one starts a generation with the same template.
	RetiredIdle = "Idle"
	// RetiredRebooted: the node rebooted under it; a successor with the
	// same template takes its place at once (a reboot is no crash).
	RetiredRebooted = "NodeRebooted"
)

// templateHash is a stable digest of a template: encoding/json sorts map
// keys and keeps list order, which is all a template holds.
func templateHash(t *v1.Template) string {
	raw, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("template cannot be encoded: %v", err)) // plain data: cannot happen
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// generationName is the name of an Instance's Generation n.
func generationName(instance string, n int64) string {
	return instance + "-g" + strconv.FormatInt(n, 10)
}

// generationFromName parses generationName back, for runtime events.
func generationFromName(name string) (instance string, n int64, ok bool) {
	i := strings.LastIndex(name, "-g")
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(name[i+2:], 10, 64)
	if err != nil || n < 1 {
		return "", 0, false
	}
	return name[:i], n, true
}

// tierOf converts an API tier to the runtime's. The pids limit is the
// app's own plus the platform's (node.PlatformTasks: the supervisor and
// the trampoline share the app's cgroup), so a tier of pids: 8 lets the
// app itself run 8 tasks.
func tierOf(t v1.Tier) cgroups.Tier {
	pids := t.Pids
	if pids > 0 {
		pids += node.PlatformTasks
	}
	return cgroups.Tier{MemoryBytes: t.Memory.Value(), CPUMillis: t.CPU.MilliValue(), Pids: pids}
}

// overlapTier is the parent limit during an Overlap swap: spec.overlap or
// twice the tier.
func overlapTier(inst *v1.Instance, t v1.Tier) cgroups.Tier {
	o := tierOf(t)
	o.MemoryBytes *= 2
	o.CPUMillis *= 2
	o.Pids *= 2
	if inst.Spec.Overlap != nil && inst.Spec.Overlap.Memory != nil {
		o.MemoryBytes = inst.Spec.Overlap.Memory.Value()
	}
	return o
}

// specEnv is the Instance's own env layer.
func specEnv(t *v1.Template) map[string]string {
	env := make(map[string]string, len(t.Env))
	for _, e := range t.Env {
		env[e.Name] = e.Value
	}
	return env
}

// refEnv reads the Secrets and ConfigMaps a template names, in order, a
// later one winning. It reads through r (uncached), so the agent never
// caches every Secret of the cluster. The agent may read them only in
// namespaces an administrator opted in; a refusal says how.
func refEnv(ctx context.Context, r client.Reader, namespace string, t *v1.Template) (map[string]string, error) {
	env := map[string]string{}
	for _, from := range t.EnvFrom {
		switch {
		case from.SecretRef != nil:
			var s corev1.Secret
			if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: from.SecretRef.Name}, &s); err != nil {
				return nil, refError("secret", namespace, from.SecretRef.Name, err)
			}
			for k, v := range s.Data {
				env[k] = string(v)
			}
		case from.ConfigMapRef != nil:
			var cm corev1.ConfigMap
			if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: from.ConfigMapRef.Name}, &cm); err != nil {
				return nil, refError("configmap", namespace, from.ConfigMapRef.Name, err)
			}
			for k, v := range cm.Data {
				env[k] = v
			}
		}
	}
	return env, nil
}

// EnvReaderRole is the ClusterRole (config/rbac) an administrator binds in
// a namespace to let the agents read its Secrets and ConfigMaps.
const EnvReaderRole = "unitlet-agent-env-reader"

func refError(kind, namespace, name string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s %s: namespace %s is not opted in to the agents' reads (kubectl create rolebinding unitlet-agent-env -n %s --clusterrole=%s --serviceaccount=unitlet-system:unitlet-agent): %w",
			kind, name, namespace, namespace, EnvReaderRole, err)
	}
	return fmt.Errorf("%s %s: %w", kind, name, err)
}

// startRequest is what every slot of inst starts with from template t
// (the Instance's, or the one a Generation froze): its host, env with the
// envFrom data read through reader, working dir, identity and parent
// limit, with g, the grant of its user (ReadGrant). The caller adds the
// command and what is its own (tier, grace).
func startRequest(ctx context.Context, reader client.Reader, inst *v1.Instance, ref node.Ref, t *v1.Template, g identity.Grant) (node.StartRequest, error) {
	refs, err := refEnv(ctx, reader, inst.Namespace, t)
	if err != nil {
		return node.StartRequest{}, err
	}
	return node.StartRequest{
		Ref: ref, Host: inst.Spec.Host, SpecEnv: specEnv(t), RefEnv: refs,
		WorkingDir: t.WorkingDir, User: t.User, Grant: g, Parent: tierOf(t.Tier),
		AllowMetadata: t.AllowsCloudMetadata(),
		Activated:     inst.Spec.SocketActivation != nil,
	}, nil
}
