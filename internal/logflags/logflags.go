// Package logflags binds controller-runtime's --zap-* flags with the
// defaults every unitlet binary shares.
package logflags

import (
	"flag"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Bind adds the --zap-* flags to fs for o. Log times default to RFC 3339
// with nanoseconds (controller-runtime's default drops the fraction, and
// a second is too coarse to order an agent's decisions against what the
// API server recorded); --zap-time-encoding still chooses another.
func Bind(fs *flag.FlagSet, o *zap.Options) {
	o.TimeEncoder = zapcore.RFC3339NanoTimeEncoder
	o.BindFlags(fs)
}
