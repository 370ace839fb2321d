// Package capacity is the arithmetic of an Enrollment's capacity,
// allocatable and allocated lists: pure functions of what the agent read
// from the machine, its flags and the API.
package capacity

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/machine"
)

// Names are the resources an Enrollment reports: the three a tier limits.
var Names = []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceCPU, v1.ResourcePids}

// FromMachine is the machine's capacity as a resource list.
func FromMachine(m machine.Capacity) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceMemory: *resource.NewQuantity(m.MemoryBytes, resource.BinarySI),
		corev1.ResourceCPU:    *resource.NewMilliQuantity(m.CPUMillis, resource.DecimalSI),
		v1.ResourcePids:       *resource.NewQuantity(m.Pids, resource.DecimalSI),
	}
}

// Allocatable is what Instances may take of capacity: each resource
// lowered to the Node's allocatable where the node has a Node object
// saying so (nil: none), minus the administrator's reserve and the pods'
// requests, never below zero.
func Allocatable(capacity, nodeAllocatable, reserve, pods corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, name := range Names {
		q, ok := capacity[name]
		if !ok {
			continue
		}
		q = q.DeepCopy()
		if n, ok := nodeAllocatable[name]; ok && n.Cmp(q) < 0 {
			q = n.DeepCopy()
		}
		if r, ok := reserve[name]; ok {
			q.Sub(r)
		}
		if p, ok := pods[name]; ok {
			q.Sub(p)
		}
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		out[name] = q
	}
	return out
}

// HoldsResources says whether gen still takes its tier on the node: until
// it is proven gone (Terminated=True, or Retired).
func HoldsResources(gen *v1.Generation) bool {
	return gen.Status.Phase != v1.PhaseRetired &&
		!meta.IsStatusConditionTrue(gen.Status.Conditions, v1.ConditionTerminated)
}

// Allocated is what gens' tiers take now: each generation that holds
// resources counts its tier; while two or more of one Instance do (an
// Overlap swap), their memory is the Instance's overlap.memory where
// overlapMemory has one (the parent's raised limit), else the sum of
// their tiers. Every name is present, zero when nothing is allocated.
func Allocated(gens []v1.Generation, overlapMemory func(instance types.NamespacedName) *resource.Quantity) corev1.ResourceList {
	byInstance := map[types.NamespacedName][]*v1.Generation{}
	for i := range gens {
		if g := &gens[i]; HoldsResources(g) {
			key := types.NamespacedName{Namespace: g.Namespace, Name: g.Spec.Instance}
			byInstance[key] = append(byInstance[key], g)
		}
	}
	mem := resource.NewQuantity(0, resource.BinarySI)
	cpu := resource.NewMilliQuantity(0, resource.DecimalSI)
	pids := resource.NewQuantity(0, resource.DecimalSI)
	for key, held := range byInstance {
		instMem := resource.NewQuantity(0, resource.BinarySI)
		for _, g := range held {
			instMem.Add(g.Spec.Template.Tier.Memory)
			cpu.Add(g.Spec.Template.Tier.CPU)
			pids.Add(*resource.NewQuantity(g.Spec.Template.Tier.Pids, resource.DecimalSI))
		}
		if len(held) > 1 && overlapMemory != nil {
			if o := overlapMemory(key); o != nil {
				instMem = o
			}
		}
		mem.Add(*instMem)
	}
	return corev1.ResourceList{corev1.ResourceMemory: *mem, corev1.ResourceCPU: *cpu, v1.ResourcePids: *pids}
}

// Overlapping are the Instances with more than one generation holding
// resources in gens: the ones whose overlap.memory Allocated asks for.
func Overlapping(gens []v1.Generation) []types.NamespacedName {
	count := map[types.NamespacedName]int{}
	var out []types.NamespacedName
	for i := range gens {
		g := &gens[i]
		if !HoldsResources(g) {
			continue
		}
		key := types.NamespacedName{Namespace: g.Namespace, Name: g.Spec.Instance}
		if count[key]++; count[key] == 2 {
			out = append(out, key)
		}
	}
	return out
}
