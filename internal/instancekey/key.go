// Package instancekey is what both sides know of an Instance's key: where
// its Secret lives and what the Secret records, the fingerprint, and the
// gate a start passes. The cluster side (cluster/instancekey) mints and
// rotates keys; the agent (controllers/) reads one, uncached, at each
// start. It imports nothing of either side.
//
// Rotation versus tampering: only the cluster side writes the key
// Secrets (the agents may only get them). When it rotates a key it
// appends the old key's fingerprint to the Secret's
// AnnotationPrevious, so a generation whose fingerprint differs from
// its predecessor's starts only if the Secret records that predecessor's
// key as one it replaced. Key data changed by anyone else no longer hashes
// to the fingerprint the generation was made with; a Secret made anew
// records no history. Both refuse the start.
package instancekey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

const (
	// DefaultNamespace holds the key Secrets (--key-namespace).
	DefaultNamespace = "unitlet-keys"
	// DataKey is the Secret's data key holding the key.
	DataKey = "key"
	// LabelInstanceNamespace names the Instance's namespace on its key
	// Secret; v1.LabelInstance names the Instance.
	LabelInstanceNamespace = "hosting.unitlet.dev/instance-namespace"
	// AnnotationFingerprint is the fingerprint of the key the cluster side
	// minted into the Secret (what it writes to the Instance's status).
	AnnotationFingerprint = "hosting.unitlet.dev/key-fingerprint"
	// AnnotationRotatedFor is the Instance's rotate-key value the key was
	// last minted for.
	AnnotationRotatedFor = "hosting.unitlet.dev/rotated-for"
	// AnnotationPrevious lists the fingerprints of the keys this Secret's
	// key replaced, oldest first, comma-separated.
	AnnotationPrevious = "hosting.unitlet.dev/previous-fingerprints"
	// MaxPrevious bounds AnnotationPrevious: a generation older than that
	// many rotations is not a predecessor that starts anything.
	MaxPrevious = 16
	// keyBytes is the key's entropy.
	keyBytes = 32
)

// ErrMismatch: the key read is not the one the generation was made with,
// or changed outside a recorded rotation.
var ErrMismatch = errors.New("instance key mismatch")

// SecretName is the key Secret of the Instance with uid.
func SecretName(uid types.UID) string { return "ik-" + string(uid) }

// New mints a key: 32 bytes from crypto/rand, hex (text an app can pass
// on as it is).
func New() ([]byte, error) {
	var b [keyBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("mint instance key: %w", err)
	}
	return []byte(hex.EncodeToString(b[:])), nil
}

// Fingerprint is key's SHA-256, hex.
func Fingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:])
}

// Previous reads AnnotationPrevious from a Secret's annotations.
func Previous(annotations map[string]string) []string {
	v := annotations[AnnotationPrevious]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// WithPrevious is prev with fp appended (once), the oldest dropped past
// MaxPrevious, as AnnotationPrevious's value.
func WithPrevious(prev []string, fp string) string {
	out := slices.DeleteFunc(slices.Clone(prev), func(p string) bool { return p == "" || p == fp })
	if fp != "" {
		out = append(out, fp)
	}
	if len(out) > MaxPrevious {
		out = out[len(out)-MaxPrevious:]
	}
	return strings.Join(out, ",")
}

// Check is the start gate: key (read from the Secret with annotations)
// must hash to want, the fingerprint the generation was made with, and
// want must be its predecessor's (none: "") or a rotation the Secret
// records from it.
func Check(key []byte, annotations map[string]string, want, predecessor string) error {
	if got := Fingerprint(key); got != want {
		return fmt.Errorf("%w: the key read has fingerprint %s, the generation was made with %s", ErrMismatch, short(got), short(want))
	}
	if predecessor == "" || predecessor == want || slices.Contains(Previous(annotations), predecessor) {
		return nil
	}
	return fmt.Errorf("%w: fingerprint %s is neither the previous generation's (%s) nor a recorded rotation from it",
		ErrMismatch, short(want), short(predecessor))
}

// short is a fingerprint's first 12 characters, enough to tell keys apart
// in a message.
func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	if fp == "" {
		return "(none)"
	}
	return fp
}
