package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

// sidecarRef is the slot of the Instance's sidecar called name.
func (s *instanceScope) sidecarRef(name string) node.Ref {
	return node.SidecarRef(s.inst.Namespace, s.inst.Name, name)
}

// slotName names a role slot in messages: the role, and a sidecar's name.
func slotName(ref node.Ref) string {
	switch {
	case ref.Sidecar != "":
		return fmt.Sprintf("%s %s", ref.Role, ref.Sidecar)
	case ref.Command != "":
		return fmt.Sprintf("run %s", ref.Command)
	}
	return string(ref.Role)
}

// ensureSidecars keeps each sidecar of the template running beside the
// serving generation, restarting one that died (after proving it gone,
// and no sooner than its restart backoff allows), and retires the
// sidecars the template no longer names. wait is when to look again for
// a sidecar that waits out its backoff (0: none waits).
func (s *instanceScope) ensureSidecars(ctx context.Context) (wait time.Duration, err error) {
	for _, sc := range s.inst.Spec.Template.Sidecars {
		w, err := s.ensureSidecar(ctx, sc)
		if err != nil {
			return 0, err
		}
		if w > 0 && (wait == 0 || w < wait) {
			wait = w
		}
	}
	return wait, s.retireRemovedSidecars(ctx)
}

// restartKeyPrefix starts every restart backoff key of the Instance
// namespace/name: its app's and each sidecar's.
func restartKeyPrefix(namespace, name string) string { return namespace + "/" + name + "/" }

// ensureSidecar starts sc unless it runs; a dead run is proven gone first.
func (s *instanceScope) ensureSidecar(ctx context.Context, sc v1.Sidecar) (time.Duration, error) {
	ref := s.sidecarRef(sc.Name)
	st, err := s.r.Runtime.Observe(ctx, ref)
	if err != nil {
		return 0, fmt.Errorf("observe sidecar %s: %w", sc.Name, err)
	}
	if st.Populated || st.ActiveState == "active" || st.ActiveState == "activating" {
		return 0, nil
	}
	key := restartKeyPrefix(s.inst.Namespace, s.inst.Name) + "sidecar/" + sc.Name
	if st.Exit != nil || st.Loaded {
		if wait := s.r.restarts.wait(key); wait > 0 {
			s.r.event(s.inst, corev1.EventTypeWarning, "SidecarBackOff", "Sidecar", "sidecar %s died again (%s); starting it again in %s",
				sc.Name, exitText(st.Exit), wait.Round(time.Second))
			return wait, nil
		}
		if kill := s.r.Runtime.Retire(ctx, ref, time.Second); !kill.Proven {
			return 0, fmt.Errorf("sidecar %s: %w", sc.Name, kill.Err())
		}
		s.r.event(s.inst, corev1.EventTypeWarning, "SidecarRestarted", "Sidecar", "sidecar %s died (%s); starting it again",
			sc.Name, exitText(st.Exit))
		s.r.restarts.restarted(key)
	}
	req, err := s.roleRequest(ctx, ref, sc.Role)
	if err != nil {
		return 0, fmt.Errorf("sidecar %s not started: %w", sc.Name, err)
	}
	res := s.r.Runtime.Start(ctx, req)
	if res.Start.Kind == outcome.NotStarted {
		return 0, fmt.Errorf("sidecar %s not started: %w", sc.Name, res.Start.Err())
	}
	return 0, nil
}

// retireRemovedSidecars proves gone every sidecar slot of this Instance
// on the node that the template does not name. It asks the runtime only
// when the template's set of names differs from the last one settled
// (and once after an agent start).
func (s *instanceScope) retireRemovedSidecars(ctx context.Context) error {
	want := sidecarNames(s.inst)
	key := s.ref()
	if s.r.sidecars.settled(key, want) {
		return nil
	}
	refs, err := s.sidecarSlots(ctx)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if slices.Contains(want, ref.Sidecar) {
			continue
		}
		if kill := s.r.Runtime.Retire(ctx, ref, time.Second); !kill.Proven {
			return fmt.Errorf("sidecar %s (no longer in the template): %w", ref.Sidecar, kill.Err())
		}
		s.r.event(s.inst, corev1.EventTypeNormal, "SidecarRetired", "Sidecar", "sidecar %s is no longer in the template; stopped and proven gone", ref.Sidecar)
	}
	s.r.sidecars.settle(key, want)
	return nil
}

// sidecarSlots is every sidecar of this Instance: those the template
// names and those the node holds (a sidecar removed from the template
// still runs until retired).
func (s *instanceScope) sidecarSlots(ctx context.Context) ([]node.Ref, error) {
	sidecars, _, err := s.roleSlots(ctx)
	return sidecars, err
}

// roleSlots is sidecarSlots, and every command the node holds.
func (s *instanceScope) roleSlots(ctx context.Context) (sidecars, runs []node.Ref, err error) {
	names := sidecarNames(s.inst)
	held, err := s.r.Runtime.ListInstance(ctx, s.ref())
	if err != nil {
		return nil, nil, fmt.Errorf("list the Instance's sidecars and runs: %w", err)
	}
	for _, ref := range held {
		switch {
		case ref.Role == layout.RoleSidecar && !slices.Contains(names, ref.Sidecar):
			names = append(names, ref.Sidecar)
		case ref.Role == layout.RoleCommand:
			runs = append(runs, ref)
		}
	}
	sidecars = make([]node.Ref, 0, len(names))
	for _, n := range names {
		sidecars = append(sidecars, s.sidecarRef(n))
	}
	return sidecars, runs, nil
}

func sidecarNames(inst *v1.Instance) []string {
	var names []string
	for _, sc := range inst.Spec.Template.Sidecars {
		names = append(names, sc.Name)
	}
	slices.Sort(names)
	return names
}

// sidecarSets remembers, per Instance, the set of sidecar names whose
// removed siblings were last proven gone. It lives in the agent's memory
// only: after a restart every Instance is listed once again.
type sidecarSets struct {
	mu  sync.Mutex
	set map[node.InstanceRef]string
}

func (m *sidecarSets) settled(inst node.InstanceRef, names []string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	got, ok := m.set[inst]
	return ok && got == strings.Join(names, ",")
}

func (m *sidecarSets) settle(inst node.InstanceRef, names []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.set == nil {
		m.set = map[node.InstanceRef]string{}
	}
	m.set[inst] = strings.Join(names, ",")
}

// forget drops an Instance that is suspended or gone: whatever it runs
// next is listed again.
func (m *sidecarSets) forget(inst node.InstanceRef) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.set, inst)
}
