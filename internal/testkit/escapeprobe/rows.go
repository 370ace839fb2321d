package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// probe runs every row.
func probe(marker, metadata string) []Row {
	rows := []Row{processes(), argv(marker), sysvIPC(marker), devShm(marker), devices(),
		tunables(), sysfs(), namespaces(), personality(), kernelLog(), modules(), setID(), homes()}
	if metadata != "" {
		rows = append(rows, metadataRow(metadata))
	}
	return rows
}

func errText(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// foreign lists the pids in /proc owned by another uid than ours; for
// uid 0, every pid but our own (the node's root daemons are uid 0 too).
func foreign() []int {
	self := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if pid == self || unix.Stat(filepath.Join("/proc", e.Name()), &st) != nil {
			continue
		}
		if int(st.Uid) != os.Getuid() || os.Getuid() == 0 {
			out = append(out, pid)
		}
	}
	return out
}

func processes() Row {
	r := Row{Name: "processes", Tried: "list /proc for processes of other users (the node's, other tenants')"}
	if f := foreign(); len(f) > 0 {
		r.Got, r.Escaped = fmt.Sprintf("%d visible (pid %d first)", len(f), f[0]), true
	} else {
		r.Got = "none visible"
	}
	return r
}

func argv(marker string) Row {
	r := Row{Name: "argv", Tried: "read another tenant's argv (/proc/PID/cmdline, where $(VAR) puts Secret values)", Got: "not found"}
	for _, pid := range foreign() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(b, []byte("hold")) && bytes.Contains(b, []byte("escapeprobe")) {
			r.Got, r.Escaped = fmt.Sprintf("read pid %d's argv", pid), true
			break
		}
	}
	_ = marker
	return r
}

func sysvIPC(marker string) Row {
	r := Row{Name: "sysv-ipc", Tried: "shmget another tenant's System V segment by its key"}
	id, err := unix.SysvShmGet(ipcKey(marker), 0, 0)
	if err != nil {
		r.Got = errText(err)
		return r
	}
	r.Got, r.Escaped = fmt.Sprintf("found segment %d", id), true
	return r
}

func devShm(marker string) Row {
	r := Row{Name: "dev-shm", Tried: "stat another tenant's file in /dev/shm"}
	if _, err := os.Stat(shmFile(marker)); err != nil {
		r.Got = errText(err)
		return r
	}
	r.Got, r.Escaped = "found", true
	return r
}

// nodeDevices are device nodes no tenant should see.
var nodeDevices = []string{"/dev/kmsg", "/dev/kvm", "/dev/loop-control", "/dev/loop0", "/dev/fuse", "/dev/mem", "/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/net/tun"}

func devices() Row {
	r := Row{Name: "devices", Tried: "find the node's device nodes (" + strings.Join(nodeDevices, " ") + ")"}
	var seen []string
	for _, d := range nodeDevices {
		if _, err := os.Stat(d); err == nil {
			seen = append(seen, d)
		}
	}
	if len(seen) == 0 {
		r.Got = "none present"
		return r
	}
	r.Got, r.Escaped = "present: "+strings.Join(seen, " "), true
	return r
}

// openWrite opens path for writing and closes it unwritten.
func openWrite(name, what, path string) Row {
	r := Row{Name: name, Tried: "open " + path + " for writing (" + what + ")"}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.Got = errText(err)
		return r
	}
	unix.Close(fd)
	r.Got, r.Escaped = "opened (closed unwritten)", true
	return r
}

func tunables() Row {
	return openWrite("kernel-tunables", "a kernel tunable", "/proc/sys/vm/drop_caches")
}

func sysfs() Row {
	return openWrite("sysfs", "a kernel setting in /sys", "/sys/kernel/mm/transparent_hugepage/enabled")
}

func namespaces() Row {
	r := Row{Name: "namespaces", Tried: "create a user namespace (clone CLONE_NEWUSER, then /bin/true)"}
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	if err := cmd.Run(); err != nil {
		r.Got = errText(err)
		return r
	}
	r.Got, r.Escaped = "created", true
	return r
}

// weakPersonality turns off address randomisation.
const weakPersonality = 0x0040000 // ADDR_NO_RANDOMIZE

func personality() Row {
	r := Row{Name: "personality", Tried: "personality(ADDR_NO_RANDOMIZE)"}
	old, _, errno := unix.Syscall(unix.SYS_PERSONALITY, weakPersonality, 0, 0)
	if errno != 0 {
		r.Got = errText(errno)
		return r
	}
	unix.Syscall(unix.SYS_PERSONALITY, old, 0, 0)
	r.Got, r.Escaped = "set (and set back)", true
	return r
}

func kernelLog() Row {
	r := Row{Name: "kernel-log", Tried: "read the kernel log (syslog(2) SIZE_BUFFER, /dev/kmsg, /proc/kmsg), open /dev/kmsg to write it"}
	var got []string
	if _, _, errno := unix.Syscall(unix.SYS_SYSLOG, 10, 0, 0); errno == 0 {
		got, r.Escaped = append(got, "syslog: ok"), true
	} else {
		got = append(got, "syslog: "+errText(errno))
	}
	for _, p := range []string{"/dev/kmsg", "/proc/kmsg"} {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			got = append(got, p+": "+errText(err))
			continue
		}
		var b [1]byte
		n, err := unix.Read(fd, b[:])
		unix.Close(fd)
		if n > 0 {
			got, r.Escaped = append(got, p+": read"), true
		} else {
			got = append(got, p+": nothing ("+fmt.Sprint(err)+")")
		}
	}
	// Writing forges lines in the node's kernel log; opened and closed
	// unwritten.
	if fd, err := unix.Open("/dev/kmsg", unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Close(fd)
		got, r.Escaped = append(got, "/dev/kmsg: opened for writing"), true
	} else {
		got = append(got, "/dev/kmsg for writing: "+errText(err))
	}
	r.Got = strings.Join(got, "; ")
	return r
}

func modules() Row {
	r := Row{Name: "kernel-modules", Tried: "delete_module(\"unitlet_none\")"}
	name, _ := unix.BytePtrFromString("unitlet_none")
	_, _, errno := unix.Syscall(unix.SYS_DELETE_MODULE, uintptrOf(name), 0, 0)
	switch errno {
	case unix.EPERM:
		r.Got = "EPERM"
	default:
		// ENOENT means the kernel looked the module up: the call was allowed.
		r.Got, r.Escaped = "allowed ("+errText(errno)+")", true
	}
	return r
}

func metadataRow(addr string) Row {
	r := Row{Name: "metadata", Tried: "connect to the cloud metadata service at " + addr}
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		r.Got = errText(err)
		return r
	}
	c.Close()
	r.Got, r.Escaped = "connected", true
	return r
}

func setID() Row {
	r := Row{Name: "set-id file", Tried: "chmod u+s a file of its own (it would lend its uid to whoever runs it unsandboxed)"}
	f, err := os.CreateTemp(os.Getenv("UNITLET_DATA_DIR"), "setid-")
	if err != nil {
		r.Got = "no file to try with: " + err.Error()
		return r
	}
	f.Close()
	defer os.Remove(f.Name())
	if err := unix.Chmod(f.Name(), 0o4755); err != nil {
		r.Got = errText(err)
		return r
	}
	r.Got, r.Escaped = "set", true
	return r
}

func homes() Row {
	r := Row{Name: "homes", Tried: "list the node's users' homes (/home, /root)"}
	var seen []string
	for _, h := range []string{"/home", "/root"} {
		ents, err := os.ReadDir(h)
		if err == nil && len(ents) > 0 {
			seen = append(seen, fmt.Sprintf("%s: %d entries", h, len(ents)))
		}
	}
	if len(seen) == 0 {
		r.Got = "nothing"
		return r
	}
	r.Got, r.Escaped = strings.Join(seen, "; "), true
	return r
}
