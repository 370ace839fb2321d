package capacity

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestParseReserve(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    corev1.ResourceList
		wantErr string
	}{
		"empty reserves nothing":  {in: "", want: corev1.ResourceList{}},
		"all three":               {in: "memory=512Mi,cpu=500m,pids=1000", want: list("512Mi", "500m", "1000")},
		"one, with spaces":        {in: " cpu = 1 ", want: list("", "1", "")},
		"pids as a quantity":      {in: "pids=2k", want: list("", "", "2000")},
		"unknown resource":        {in: "memory=1Gi,disk=1Gi", wantErr: `unknown resource "disk": want memory, cpu or pids`},
		"no value":                {in: "memory", wantErr: `"memory": want NAME=QUANTITY`},
		"no name":                 {in: "=1Gi", wantErr: `"=1Gi": want NAME=QUANTITY`},
		"bad quantity":            {in: "memory=lots", wantErr: `"memory=lots": memory: quantities must match`},
		"negative":                {in: "cpu=-1", wantErr: "a reserve cannot be negative"},
		"twice":                   {in: "cpu=1,cpu=2", wantErr: "cpu is reserved twice"},
		"a fraction of a task":    {in: "pids=1500m", wantErr: "pids is a whole number of tasks"},
		"a trailing comma is bad": {in: "cpu=1,", wantErr: `"": want NAME=QUANTITY`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseReserve(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error with %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, milli); diff != "" {
				t.Errorf("reserve (-want,+got):\n%s", diff)
			}
		})
	}
}

// container requests mem and cpu.
func container(mem, cpu string) corev1.Container {
	return corev1.Container{Resources: corev1.ResourceRequirements{Requests: list(mem, cpu, "")}}
}

func sidecar(mem, cpu string) corev1.Container {
	c := container(mem, cpu)
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return c
}

func TestPodsRequests(t *testing.T) {
	pod := func(phase corev1.PodPhase, spec corev1.PodSpec) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: spec, Status: corev1.PodStatus{Phase: phase}}
	}
	tests := map[string]struct {
		pods []corev1.Pod
		want corev1.ResourceList
	}{
		"no pods": {want: corev1.ResourceList{}},
		"containers add up": {
			pods: []corev1.Pod{pod(corev1.PodRunning, corev1.PodSpec{Containers: []corev1.Container{container("100Mi", "100m"), container("50Mi", "")}})},
			want: list("150Mi", "100m", ""),
		},
		"pods add up, pending ones too": {
			pods: []corev1.Pod{
				pod(corev1.PodRunning, corev1.PodSpec{Containers: []corev1.Container{container("100Mi", "100m")}}),
				pod(corev1.PodPending, corev1.PodSpec{Containers: []corev1.Container{container("200Mi", "200m")}}),
			},
			want: list("300Mi", "300m", ""),
		},
		"ended pods take nothing": {
			pods: []corev1.Pod{
				pod(corev1.PodSucceeded, corev1.PodSpec{Containers: []corev1.Container{container("100Mi", "100m")}}),
				pod(corev1.PodFailed, corev1.PodSpec{Containers: []corev1.Container{container("200Mi", "200m")}}),
			},
			want: corev1.ResourceList{},
		},
		"an init container above the containers sets the peak": {
			pods: []corev1.Pod{pod(corev1.PodRunning, corev1.PodSpec{
				InitContainers: []corev1.Container{container("1Gi", "50m")},
				Containers:     []corev1.Container{container("100Mi", "100m")}})},
			want: list("1Gi", "100m", ""),
		},
		"a sidecar runs beside the containers": {
			pods: []corev1.Pod{pod(corev1.PodRunning, corev1.PodSpec{
				InitContainers: []corev1.Container{sidecar("64Mi", "50m"), container("128Mi", "10m")},
				Containers:     []corev1.Container{container("100Mi", "100m")}})},
			want: list("192Mi", "150m", ""),
		},
		"pod-level requests and overhead": {
			pods: []corev1.Pod{pod(corev1.PodRunning, corev1.PodSpec{
				Resources:  &corev1.ResourceRequirements{Requests: list("1Gi", "", "")},
				Containers: []corev1.Container{container("100Mi", "100m")},
				Overhead:   list("10Mi", "10m", "")})},
			want: list("1034Mi", "110m", ""),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := PodsRequests(tc.pods)
			if diff := cmp.Diff(tc.want, got, milli); diff != "" {
				t.Errorf("requests (-want,+got):\n%s", diff)
			}
		})
	}
}
