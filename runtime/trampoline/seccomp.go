package trampoline

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The system call filter every app runs under: a deny list in the spirit
// of systemd's SystemCallFilter=@system-service with RestrictNamespaces,
// LockPersonality and ProtectKernelModules/Logs. An app has no capability
// left, so most of these would fail anyway; the filter closes what needs
// no capability (new user namespaces, a personality that weakens address
// randomisation, the kernel log where dmesg_restrict is off) and keeps the
// node's kernel surface the same whatever a later kernel allows. Denied
// calls fail with EPERM, as a program expects of a call it may not make;
// clone3 fails with ENOSYS so that libc falls back to clone, whose flags a
// classic filter can read.

// cloneNamespaces are the CLONE_NEW* flags clone(2) takes.
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// personalityQuery and personalityLinux are the two personality(2)
// arguments allowed: reading it, and setting the default.
const (
	personalityQuery = 0xffffffff
	personalityLinux = 0
)

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits on a little-endian machine
)

const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// filterProgram builds the classic BPF program: a foreign architecture is
// refused whole, every denied call fails with EPERM, clone with a
// namespace flag fails, clone3 fails with ENOSYS, personality allows only
// its query and the default.
func filterProgram() []unix.SockFilter {
	ld := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	ret := func(v uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: v} }
	// jeq skips t instructions when A == k, f otherwise.
	jeq := func(k uint32, t, f uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: t, Jf: f}
	}
	prog := []unix.SockFilter{
		ld(offArch),
		jeq(auditArch, 1, 0),
		ret(retEPERM),
		ld(offNr),
	}
	prog = append(prog, archPrelude()...)
	for _, nr := range deniedCalls {
		prog = append(prog, jeq(uint32(nr), 0, 1), ret(retEPERM))
	}
	// RestrictSUIDSGID: no mode with a set-id bit (a tenant's set-uid
	// file would lend its uid to whoever runs it outside a sandbox).
	for _, c := range modeArgCalls {
		prog = append(prog,
			jeq(uint32(c.nr), 0, 4),
			ld(offArg0+8*c.arg),
			unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: unix.S_ISUID | unix.S_ISGID, Jt: 0, Jf: 1},
			ret(retEPERM),
			ret(retAllow),
		)
	}
	prog = append(prog,
		jeq(uint32(unix.SYS_CLONE3), 0, 1), ret(retENOSYS),
		// clone: look at its flags.
		jeq(uint32(unix.SYS_CLONE), 0, 4),
		ld(offArg0),
		unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: cloneNamespaces, Jt: 0, Jf: 1},
		ret(retEPERM),
		ret(retAllow),
		// personality: only the query and the default.
		jeq(uint32(unix.SYS_PERSONALITY), 0, 5),
		ld(offArg0),
		jeq(personalityQuery, 2, 0),
		jeq(personalityLinux, 1, 0),
		ret(retEPERM),
		ret(retAllow),
		ret(retAllow),
	)
	return prog
}

// installFilter loads the filter on the calling thread, which exec keeps.
// No-new-privileges must already be set (drop does).
func installFilter() error {
	prog := filterProgram()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("install the system call filter: %w", err)
	}
	return nil
}
