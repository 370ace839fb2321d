// Package outcome holds what is known after a start or a kill, as values a
// caller can branch on, not only as errors.
//
// A start is one of five kinds: NotStarted (proven: a gate refused it or
// nothing was handed off), MayHaveRun (handed off, the answer lost or an
// error came back), QueuedJobMayRun (a systemd start job may still launch
// it later), Running and ExitedBeforeObserved (it ran and was already gone
// when first looked at). A kill is Proven or Unproven with a reason.
//
// The markers that carry these kinds through error chains change neither
// an error's text nor what errors.Is finds, so wrapping a cause with one
// never alters what a user or a classifier reads. "May it have run?" is
// the one question callers ask (MightHaveRun); it is false only when a
// backend explicitly proved that nothing ran. An unmarked error is never
// read as such a proof.
package outcome
