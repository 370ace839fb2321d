package trampoline

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_AARCH64

// archPrelude: arm64 has one system call ABI.
func archPrelude() []unix.SockFilter { return nil }

// deniedCalls fail with EPERM.
var deniedCalls = commonDenied

// modeArgCalls are checked for set-id bits.
var modeArgCalls = commonModeCalls
