package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/cgroups"
)

// systemdOOMResult is systemd's Result for a unit the kernel OOM-killed
// in: the unit's cgroup goes with it, so the count cannot be read after.
const systemdOOMResult = "oom-kill"

// exitReason is the reason and the words for an exit observed now (v.exit
// set): OOMKilled when the kernel's OOM killer killed in the generation's
// cgroup, as the node counted it once the cgroup was empty or as systemd
// reports the unit's end; Exited otherwise.
func exitReason(v genView) (reason, how string) {
	how = describeExit(v.exit)
	if o := v.observed; o != nil && o.OOM != nil && o.OOM.Kills > 0 {
		return v1.ReasonOOMKilled, fmt.Sprintf("%s: the kernel OOM-killed %s in its cgroup at its memory limit of %s",
			how, kills(o.OOM.Kills), memoryLimit(o.OOM.MemoryLimitBytes))
	}
	if v.exit.Result == systemdOOMResult {
		return v1.ReasonOOMKilled, how + ": the kernel OOM-killed in its unit (its memory limit reached)"
	}
	return v1.ReasonExited, how
}

func kills(n uint64) string {
	if n == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", n)
}

// memoryLimit says a limit as a quantity ("16Mi"), or that none was set.
func memoryLimit(b int64) string {
	if b == cgroups.Unlimited || b == cgroups.Absent {
		return "none (the node's memory ran out)"
	}
	return resource.NewQuantity(b, resource.BinarySI).String()
}
