package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/boot"
)

// goneWithBootStatus says that gen ended with the boot it ran in: the
// boot ID changed, so none of its processes is left, whatever its start
// or its kill had proven before. Its start's outcome is settled (a start
// that may have run is gone either way), and Terminated is True, so
// nothing reads StartUncertain or KillUnproven for the old boot.
func goneWithBootStatus(gen *v1.Generation, v boot.Verdict, set func(typ string, status metav1.ConditionStatus, reason, msg string)) {
	st := &gen.Status
	if meta.IsStatusConditionTrue(st.Conditions, v1.ConditionTerminated) {
		return // proven gone before the reboot: its proof stands
	}
	why := fmt.Sprintf("the node rebooted (boot ID %s, now %s): every process of the old boot is gone", v.Previous, v.Current)
	switch c := meta.FindStatusCondition(st.Conditions, v1.ConditionStarted); {
	case c == nil:
	case c.Status == metav1.ConditionUnknown:
		set(v1.ConditionStarted, metav1.ConditionFalse, v1.ReasonNodeRebooted,
			fmt.Sprintf("its start's outcome was never learnt (%s); %s", c.Reason, why))
	case c.Status == metav1.ConditionTrue:
		set(v1.ConditionStarted, metav1.ConditionTrue, v1.ReasonNodeRebooted,
			fmt.Sprintf("ran as pid %d until %s", st.MainPID, why))
	}
	st.Phase, st.MainPID = v1.PhaseFailed, 0
	if gen.Spec.Retired {
		st.Phase = v1.PhaseRetired
	}
	set(v1.ConditionReady, metav1.ConditionFalse, v1.ReasonNodeRebooted, why)
	set(v1.ConditionTerminated, metav1.ConditionTrue, v1.ReasonNodeRebooted, why)
}

// goneWithBoot: g ended with the node's boot, proven by its boot ID.
func goneWithBoot(g *v1.Generation) bool {
	c := meta.FindStatusCondition(g.Status.Conditions, v1.ConditionTerminated)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1.ReasonNodeRebooted
}

// ended: g served, or was to, and is gone without being asked to stop
// (its app ended, or the node rebooted under it): a successor follows.
func ended(g *v1.Generation) bool { return exited(g) || goneWithBoot(g) }
