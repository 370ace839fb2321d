// Package instancekey mints each Instance's key into a Secret of the key
// namespace, rotates it when an administrator asks (v1.AnnotationRotateKey),
// writes its fingerprint to the Instance's status, and deletes the Secrets
// of Instances that are gone. internal/instancekey says what the Secret
// records and how the agent's start gate reads it.
package instancekey

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/unitlet/unitlet/internal/instancekey"
)

// plan is what one reconcile does for an Instance's key.
type plan struct {
	// mint: a new key goes into the Secret, recorded as minted for
	// rotatedFor, with previous as AnnotationPrevious.
	mint       bool
	rotatedFor string
	previous   string
	// fingerprint is what status.keyFingerprint should say ("" with
	// mint: the new key's).
	fingerprint string
	// lost: the key Secret is gone after a key was minted, and nobody
	// asked for a new one: nothing is minted behind the administrator's
	// back (the agents refuse to start generations meanwhile).
	lost bool
}

// decide is the key's next step from the Secret (nil: none), the
// Instance's status fingerprint and its rotate-key annotation.
func decide(secret *corev1.Secret, statusFP, rotate string) plan {
	if secret == nil {
		switch {
		case statusFP == "":
			return plan{mint: true, rotatedFor: rotate}
		case rotate != "":
			// A lost key replaced on the administrator's word: a rotation
			// from the key the Instance last had.
			return plan{mint: true, rotatedFor: rotate, previous: instancekey.WithPrevious(nil, statusFP)}
		default:
			return plan{lost: true, fingerprint: statusFP}
		}
	}
	current := secretFingerprint(secret)
	if rotate != "" && rotate != secret.Annotations[instancekey.AnnotationRotatedFor] {
		return plan{mint: true, rotatedFor: rotate,
			previous: instancekey.WithPrevious(instancekey.Previous(secret.Annotations), current)}
	}
	return plan{fingerprint: current}
}

// secretFingerprint is the fingerprint the cluster side recorded when it
// minted the Secret's key (a changed key does not change it: the agent
// refuses that key), or, on a Secret without one, its data's.
func secretFingerprint(s *corev1.Secret) string {
	if fp := s.Annotations[instancekey.AnnotationFingerprint]; fp != "" {
		return fp
	}
	return instancekey.Fingerprint(s.Data[instancekey.DataKey])
}

// DefaultNamespace is where the key Secrets live unless --key-namespace
// says otherwise.
const DefaultNamespace = instancekey.DefaultNamespace
