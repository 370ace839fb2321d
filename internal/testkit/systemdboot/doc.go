// Package systemdboot boots a real systemd (/lib/systemd/systemd) as PID 1
// of private namespaces for tests that need a service manager on a machine
// whose own PID 1 is not systemd, and connects to it over its D-Bus.
//
// The steps follow the test machine's notes ("A real systemd inside a
// test"): cgroups of its own in every mounted hierarchy, unshare of the
// cgroup, pid, mount, uts and ipc namespaces, read-only /proc/sys, /sys and
// /, cgroupfs mounted again inside, a tmpfs /run with stub targets and
// dbus, and a connection from outside through the namespace's bus socket.
//
// The code that must run inside the namespaces before systemd is exec'd is
// a short shell script run through unshare(1) (util-linux, always present
// on Debian), not a re-exec of the test binary. A re-exec would need a
// TestMain hook in every package that boots a systemd, and Go cannot
// unshare a pid namespace for itself; unshare(1) already does the clone,
// the parent-death kill and the private /proc, so the script only mounts.
//
// Nothing here touches the machine's own process manager or its cgroups:
// the launching shell moves itself into the cgroups this package created,
// and everything systemd makes lives beneath them.
package systemdboot
