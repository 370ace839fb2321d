package trampoline

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_X86_64

// x32SyscallBit marks the x32 ABI's calls, which would dodge a filter
// keyed on the 64-bit numbers.
const x32SyscallBit = 0x40000000

// archPrelude refuses the x32 ABI (A holds the call number).
func archPrelude() []unix.SockFilter {
	return []unix.SockFilter{
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, K: x32SyscallBit, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: retEPERM},
	}
}

// deniedCalls fail with EPERM.
var deniedCalls = append(commonDenied,
	unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_USELIB, unix.SYS_USTAT, unix.SYS_SYSFS,
	unix.SYS_CREATE_MODULE, unix.SYS_GET_KERNEL_SYMS, unix.SYS_QUERY_MODULE, unix.SYS_NFSSERVCTL,
)

// modeArgCalls are checked for set-id bits.
var modeArgCalls = append(commonModeCalls, modeCall{unix.SYS_CHMOD, 1})
