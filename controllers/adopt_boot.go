package controllers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/boot"
)

// rebootBackoff spaces the retries of what a reboot's proof needs
// written: they are retried until written, as hosting waits for them.
var rebootBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: math.MaxInt32, Cap: 30 * time.Second}

// checkBoot compares the boot the agent last ran under with the node's.
// After a reboot every Generation of this node is of the old boot (none
// starts before adoption is over) and is written gone with it; only then
// is the new boot recorded, so an agent that dies half-way finds the
// reboot again, and a record of this boot never precedes the proof's
// last write. It reports false when ctx ended first.
func (a *Adopter) checkBoot(ctx context.Context) (boot.Verdict, bool) {
	if a.Boot == nil {
		return boot.Verdict{}, true
	}
	v, err := a.Boot.Check()
	log := a.Log.WithValues("verdict", v.Reason, "recorded", v.Previous, "bootID", v.Current)
	if err != nil {
		log.Error(err, "no reboot can be told at this start")
	}
	switch v.Reason {
	case boot.Unchanged, boot.SourceUnusable:
		log.Info("boot checked")
		return v, true
	case boot.Changed:
		log.Info("the node rebooted: every generation of the old boot is gone")
		if !a.settleReboot(ctx, v) {
			return v, false
		}
		return v, a.retry(ctx, "recording the boot", func() error { return a.Boot.Save(v.Current) })
	}
	// No usable record: nothing to prove now; a later start can.
	if err := a.Boot.Save(v.Current); err != nil {
		log.Error(err, "boot not recorded: a reboot before the next start cannot be told")
	}
	log.Info("boot recorded")
	return v, true
}

// settleReboot writes each of this node's Generations not yet proven
// gone as gone with the old boot, and says so once on the Enrollment.
func (a *Adopter) settleReboot(ctx context.Context, v boot.Verdict) bool {
	var marked int
	ok := a.retry(ctx, "writing the old boot's generations gone", func() (err error) {
		marked, err = a.markGoneWithBoot(ctx, v)
		return err
	})
	if ok {
		a.event(corev1.EventTypeNormal, v1.ReasonNodeRebooted,
			"the node rebooted (boot ID %s, now %s): %d generations of the old boot proven gone", v.Previous, v.Current, marked)
	}
	return ok
}

// markGoneWithBoot patches every Generation of this node that is not
// proven gone, and counts them.
func (a *Adopter) markGoneWithBoot(ctx context.Context, v boot.Verdict) (int, error) {
	var list v1.GenerationList
	if err := a.Client.List(ctx, &list); err != nil {
		return 0, fmt.Errorf("list generations: %w", err)
	}
	var errs []error
	marked := 0
	for i := range list.Items {
		gen := &list.Items[i]
		if gen.Spec.NodeName != a.NodeName || terminated(gen) {
			continue
		}
		before := gen.DeepCopy()
		generationStatus(gen, genFacts{rebooted: &v})
		if err := patchStatus(ctx, a.Client, gen, before, true); err != nil {
			errs = append(errs, fmt.Errorf("generation %s/%s: %w", gen.Namespace, gen.Name, err))
			continue
		}
		marked++
	}
	return marked, errors.Join(errs...)
}

// retry runs f until it succeeds or ctx ends (false).
func (a *Adopter) retry(ctx context.Context, what string, f func() error) bool {
	err := wait.ExponentialBackoffWithContext(ctx, rebootBackoff, func(context.Context) (bool, error) {
		if err := f(); err != nil {
			a.Log.Info(what+" failed; retrying", "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	return err == nil
}
