package netguard

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Kernel constants (uapi/linux/bpf.h).
const (
	cmdProgLoad   = 5
	cmdProgAttach = 8

	progTypeCgroupSockAddr = 18

	attachInet4Connect = 10
	attachInet6Connect = 11
	attachUDP4Sendmsg  = 14
	attachUDP6Sendmsg  = 15

	// flagAllowOverride: one program per hook on the cgroup (a second
	// attach replaces the first, so a restarted process never piles them
	// up), which a child cgroup may override with its own.
	flagAllowOverride = 1
)

// MetadataAddrs are the cloud metadata services' addresses: every major
// cloud's IPv4 one and AWS's IPv6 one.
var MetadataAddrs = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254")}

// MetadataStrings is MetadataAddrs as text, for a launch file.
func MetadataStrings() []string {
	out := make([]string, len(MetadataAddrs))
	for i, a := range MetadataAddrs {
		out[i] = a.String()
	}
	return out
}

// DenyOwnCgroup attaches the programs that refuse connects and datagrams
// to deny to the cgroup v2 the calling process is in; they hold while the
// cgroup exists, for every process in it and below. The root cgroup is
// refused: that would be the whole node.
func DenyOwnCgroup(deny []netip.Addr) error {
	if len(deny) == 0 {
		return nil
	}
	dir, err := ownCgroup2()
	if err != nil {
		return err
	}
	return DenyCgroup(dir, deny)
}

// DenyCgroup attaches the programs to the cgroup v2 directory dir.
func DenyCgroup(dir string, deny []netip.Addr) error {
	cg, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	defer unix.Close(cg)
	v4, v6 := split(deny)
	hooks := []struct {
		attach uint32
		prog   []insn
	}{
		{attachInet4Connect, program4(v4)}, {attachUDP4Sendmsg, program4(v4)},
		{attachInet6Connect, program6(v6)}, {attachUDP6Sendmsg, program6(v6)},
	}
	for _, h := range hooks {
		if err := loadAndAttach(cg, h.attach, h.prog); err != nil {
			return fmt.Errorf("guard cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// loadAndAttach loads prog for the hook and attaches it to the cgroup fd.
// The attachment keeps the program; the fd is closed here.
func loadAndAttach(cgroup int, attachType uint32, prog []insn) error {
	code := encode(prog)
	license := []byte("Apache-2.0\x00")
	logBuf := make([]byte, 4096)
	var load struct {
		progType, insnCnt  uint32
		insns, license     uint64
		logLevel, logSize  uint32
		logBuf             uint64
		kernVersion, flags uint32
		name               [16]byte
		ifindex, expected  uint32
		_                  [64]byte // later fields, zero
	}
	load.progType = progTypeCgroupSockAddr
	load.insnCnt = uint32(len(prog))
	load.insns = uint64(uintptr(unsafe.Pointer(&code[0])))
	load.license = uint64(uintptr(unsafe.Pointer(&license[0])))
	load.logLevel, load.logSize = 1, uint32(len(logBuf))
	load.logBuf = uint64(uintptr(unsafe.Pointer(&logBuf[0])))
	copy(load.name[:], "unitlet_netgrd")
	load.expected = attachType
	fd, errno := progLoad(&load)
	runtime.KeepAlive(code)
	runtime.KeepAlive(license)
	if errno != 0 {
		return fmt.Errorf("load program for hook %d: %w (verifier: %s)", attachType, errno, verifierLog(logBuf))
	}
	defer unix.Close(int(fd))
	var attach struct {
		target, prog, attachType, flags, replace uint32
		_                                        [44]byte
	}
	attach.target, attach.prog, attach.attachType, attach.flags = uint32(cgroup), uint32(fd), attachType, flagAllowOverride
	if _, _, errno := unix.Syscall(unix.SYS_BPF, cmdProgAttach, uintptr(unsafe.Pointer(&attach)), unsafe.Sizeof(attach)); errno != 0 {
		return fmt.Errorf("attach program for hook %d: %w", attachType, errno)
	}
	return nil
}

// loadTries bounds the retries of an interrupted load.
const loadTries = 100

// progLoad is BPF_PROG_LOAD, tried again while it answers EAGAIN or EINTR:
// a signal interrupts the verifier (Go's runtime signals its threads to
// preempt goroutines), which is no verdict on the program.
func progLoad[T any](attr *T) (uintptr, unix.Errno) {
	var errno unix.Errno
	for i := 0; i < loadTries; i++ {
		var fd uintptr
		fd, _, errno = unix.Syscall(unix.SYS_BPF, cmdProgLoad, uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr))
		if errno != unix.EAGAIN && errno != unix.EINTR {
			return fd, errno
		}
	}
	return 0, errno
}

func verifierLog(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.TrimSpace(string(b))
}

// ownCgroup2 is the directory of the calling process's cgroup v2: its
// "0::" line in /proc/self/cgroup below where cgroup2 is mounted (the
// root of a pure v2 host, "unified" on a hybrid one).
func ownCgroup2() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	rel := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			rel = p
		}
	}
	if rel == "" || rel == "/" {
		return "", errors.New("the process is in no cgroup v2 of its own (a guard on the root cgroup would hold the whole node)")
	}
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup2"))
	if err != nil {
		return "", fmt.Errorf("read mounts: %w", err)
	}
	for _, m := range mounts {
		if m.Root == "/" {
			return filepath.Join(m.Mountpoint, rel), nil
		}
	}
	return "", errors.New("no cgroup2 hierarchy is mounted")
}
