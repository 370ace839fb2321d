package controllers

import (
	"context"
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/runtime/boot"
)

// rebootBackoff spaces the retries of what a reboot's proof needs
// written: they are retried until written, as hosting waits for them.
var rebootBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: math.MaxInt32, Cap: 30 * time.Second}

// checkBoot compares the boot the agent last ran under with the node's.
// After a reboot every Generation of this node not proven gone is of the
// old boot (none starts before adoption is over): they are recorded on
// the node as gone with it (boot.Pending) before the new boot is, so an
// agent that dies before the API says so still knows which they were,
// and none started since is ever taken for one. The API is told
// afterwards, by the Generation reconciler (rebootProof): serving never
// waits for it. It reports false when ctx ended first.
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
	case boot.Changed:
		log.Info("the node rebooted: every generation of the old boot is gone")
		if !a.retry(ctx, "recording the old boot's generations", func() error { return a.recordReboot(ctx, v) }) {
			return v, false
		}
		return v, a.retry(ctx, "recording the boot", func() error { return a.Boot.Save(v.Current) })
	case boot.NoRecord, boot.RecordUnusable:
		// Nothing to prove now; a later start can.
		if err := a.Boot.Save(v.Current); err != nil {
			log.Error(err, "boot not recorded: a reboot before the next start cannot be told")
		}
		log.Info("boot recorded")
	default:
		log.Info("boot checked")
	}
	// An earlier agent of this boot may have left a reboot's proof
	// unwritten.
	p, err := a.Boot.LoadPending()
	if err != nil {
		log.Error(err, "an earlier reboot's proof is unreadable: its generations are observed as any other")
	}
	if p != nil {
		a.proof.load(ctx, a.Client, *p)
	}
	return v, true
}

// recordReboot records on the node every Generation of this node that is
// not proven gone as gone with the old boot, and hands them to the proof.
func (a *Adopter) recordReboot(ctx context.Context, v boot.Verdict) error {
	var list v1.GenerationList
	if err := a.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("list generations: %w", err)
	}
	p := boot.Pending{Previous: v.Previous, Current: v.Current, Generations: []string{}}
	for i := range list.Items {
		gen := &list.Items[i]
		if gen.Spec.NodeName == a.NodeName && !terminated(gen) {
			p.Generations = append(p.Generations, proofKey(gen.Namespace, gen.Name, string(gen.UID)))
		}
	}
	if err := a.Boot.SavePending(p); err != nil {
		return err
	}
	a.proof.load(ctx, a.Client, p)
	return nil
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
