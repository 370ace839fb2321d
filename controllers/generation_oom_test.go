package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/node"
	"github.com/unitlet/unitlet/runtime/outcome"
)

func TestExitReason(t *testing.T) {
	killed := &outcome.Exit{Result: "signal", Signal: 9}
	tests := map[string]struct {
		exit *outcome.Exit
		oom  *node.OOM
		want []string // reason, message
	}{
		"an exit with no OOM kill": {
			exit: exit3, oom: &node.OOM{MemoryLimitBytes: 16 << 20},
			want: []string{v1.ReasonExited, "exit code 3 (exit-code)"},
		},
		"the count not read (the cgroup gone)": {
			exit: killed,
			want: []string{v1.ReasonExited, "killed by SIGKILL (signal)"},
		},
		"two kills at the tier's limit": {
			exit: killed, oom: &node.OOM{Kills: 2, MemoryLimitBytes: 64 << 20},
			want: []string{v1.ReasonOOMKilled, "killed by SIGKILL (signal): the kernel OOM-killed 2 processes in its cgroup at its memory limit of 64Mi"},
		},
		"a child OOM-killed, the app exited with a code": {
			exit: exit3, oom: &node.OOM{Kills: 1, MemoryLimitBytes: 16 << 20},
			want: []string{v1.ReasonOOMKilled, "exit code 3 (exit-code): the kernel OOM-killed 1 process in its cgroup at its memory limit of 16Mi"},
		},
		"no limit: the node ran out": {
			exit: killed, oom: &node.OOM{Kills: 1, MemoryLimitBytes: cgroups.Unlimited},
			want: []string{v1.ReasonOOMKilled, "killed by SIGKILL (signal): the kernel OOM-killed 1 process in its cgroup at its memory limit of none (the node's memory ran out)"},
		},
		"systemd's word for the unit": {
			exit: &outcome.Exit{Result: "oom-kill", Signal: 9},
			want: []string{v1.ReasonOOMKilled, "killed by SIGKILL (oom-kill): the kernel OOM-killed in its unit (its memory limit reached)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := &node.State{OOM: tc.oom}
			st.Exit = tc.exit
			v := genView{genFacts: genFacts{observed: st}, exit: tc.exit}
			reason, msg := exitReason(v)
			if diff := cmp.Diff(tc.want, []string{reason, msg}); diff != "" {
				t.Errorf("exitReason (-want,+got):\n%s", diff)
			}
		})
	}
}
