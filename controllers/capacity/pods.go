package capacity

import (
	corev1 "k8s.io/api/core/v1"
)

// PodsRequests is what the pods bound to the node request together, as
// the scheduler counts it: pods that ended (Succeeded, Failed) take
// nothing.
func PodsRequests(pods []corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		add(out, PodRequests(p))
	}
	return out
}

// PodRequests is one pod's effective request: its pod-level requests
// where set, else the larger of its containers' sum (with restartable
// init containers, the sidecars, which run beside them) and the peak of
// its init containers; plus the runtime's overhead.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	reqs := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		add(reqs, c.Resources.Requests)
	}
	sidecars, initPeak := corev1.ResourceList{}, corev1.ResourceList{}
	for _, c := range p.Spec.InitContainers {
		step := copyList(sidecars)
		add(step, c.Resources.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(sidecars, c.Resources.Requests)
		}
		raise(initPeak, step)
	}
	add(reqs, sidecars)
	raise(reqs, initPeak)
	if p.Spec.Resources != nil {
		for name, q := range p.Spec.Resources.Requests {
			reqs[name] = q.DeepCopy()
		}
	}
	add(reqs, p.Spec.Overhead)
	return reqs
}

func add(to, l corev1.ResourceList) {
	for name, q := range l {
		sum := to[name]
		sum.Add(q)
		to[name] = sum
	}
}

// raise sets each of to's resources to at least l's.
func raise(to, l corev1.ResourceList) {
	for name, q := range l {
		if cur, ok := to[name]; !ok || q.Cmp(cur) > 0 {
			to[name] = q.DeepCopy()
		}
	}
}

func copyList(l corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(l))
	for name, q := range l {
		out[name] = q.DeepCopy()
	}
	return out
}
