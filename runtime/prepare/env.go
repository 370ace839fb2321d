package prepare

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/unitlet/unitlet/runtime/layout"
)

// Layer is where an env key's value came from.
type Layer string

const (
	LayerSpec     Layer = "spec"     // the Instance's own env
	LayerRefs     Layer = "refs"     // referenced Secret/ConfigMap data
	LayerPlatform Layer = "platform" // set by unitlet; wins over both
	LayerLaunch   Layer = "launch"   // cmd: its generation's launch file
)

// Platform variables. Every key under UNITLET_ belongs to the platform.
const (
	EnvAdminToken    = "UNITLET_ADMIN_TOKEN"
	EnvAppSocket     = "UNITLET_APP_SOCKET"
	EnvControlSocket = "UNITLET_CONTROL_SOCKET"
	EnvGeneration    = "UNITLET_GENERATION"
	EnvNamespace     = "UNITLET_NAMESPACE"
	EnvName          = "UNITLET_NAME"
	EnvHost          = "UNITLET_HOST"
	EnvRole          = "UNITLET_ROLE"
	EnvDataDir       = "UNITLET_DATA_DIR"
	// EnvInstanceKey is the Instance's key (the API's v1.EnvInstanceKey):
	// the same in every generation, seed and sidecar.
	EnvInstanceKey = "UNITLET_INSTANCE_KEY"
)

// PlatformPrefix starts every key that belongs to the platform.
const PlatformPrefix = "UNITLET_"

// memoryEnvKeys are the env keys never written to the node's disk: the
// launch file names a file of them in the run root (memory) instead.
var memoryEnvKeys = []string{EnvInstanceKey}

// splitMemoryEnv is env without memoryEnvKeys, and those as KEY=VALUE.
func splitMemoryEnv(env map[string]string) (map[string]string, []string) {
	rest := maps.Clone(env)
	var memory []string
	for _, k := range memoryEnvKeys {
		if v, ok := rest[k]; ok {
			memory = append(memory, k+"="+v)
			delete(rest, k)
		}
	}
	return rest, memory
}

// mergeEnv layers spec < refs < platform and records each key's layer. A
// spec or refs key under PlatformPrefix is dropped, with a warning: a
// process must be able to trust what these say.
func mergeEnv(spec, refs, platform map[string]string) (map[string]string, map[string]Layer, []error, error) {
	env := map[string]string{}
	layers := map[string]Layer{}
	var warnings []error
	for _, l := range []struct {
		layer Layer
		m     map[string]string
	}{{LayerSpec, spec}, {LayerRefs, refs}, {LayerPlatform, platform}} {
		for _, k := range slices.Sorted(maps.Keys(l.m)) {
			v := l.m[k]
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
				return nil, nil, nil, fmt.Errorf("env key %q from layer %s cannot be passed to exec", k, l.layer)
			}
			if l.layer != LayerPlatform && strings.HasPrefix(k, PlatformPrefix) {
				warnings = append(warnings, fmt.Errorf("env key %s from layer %s ignored: %s keys are the platform's", k, l.layer, PlatformPrefix))
				continue
			}
			env[k] = v
			layers[k] = l.layer
		}
	}
	return env, layers, warnings, nil
}

// platformEnv is what unitlet tells every process of the instance.
func platformEnv(req Request, p layout.Slot, token, appSocket string) map[string]string {
	inst := p.Instance()
	m := map[string]string{
		EnvAdminToken: token,
		EnvNamespace:  inst.Namespace(),
		EnvName:       inst.Name(),
		EnvHost:       req.Host,
		EnvRole:       string(p.Role()),
		EnvDataDir:    inst.DataDir(),
	}
	if req.InstanceKey != "" {
		m[EnvInstanceKey] = req.InstanceKey
	}
	if p.Role() == layout.RoleSidecar {
		// A sidecar is a helper beside the app (a log shipper, a proxy),
		// not its administrator: it does not get the control socket's key.
		delete(m, EnvAdminToken)
	}
	if p.Generation() != 0 {
		m[EnvGeneration] = strconv.FormatInt(p.Generation(), 10)
		m[EnvAppSocket] = appSocket
		m[EnvControlSocket] = layout.ControlSocket(appSocket)
	}
	return m
}

// envList is env as sorted KEY=VALUE entries, the form exec takes.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// Expand replaces $(NAME) in s with env[NAME], as Kubernetes does for a
// container's command and args: $$ is a literal $, and a reference to an
// unknown name is left as written.
func Expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := env[name]; ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[i : i+3+end])
				}
				i += 2 + end
				continue
			}
		}
		b.WriteByte('$')
	}
	return b.String()
}
