// Package netguard keeps a process tree from connecting to a few
// addresses, the cloud's metadata service first among them (it hands out
// the node's credentials to whoever asks). It attaches cgroup socket-
// address programs to the caller's own cgroup v2 (connect and sendmsg,
// IPv4 and IPv6, IPv4-mapped included), so a denied connect fails with
// EPERM before any packet is built: nothing leaves the node. The programs
// are a handful of instructions, assembled here rather than through an
// eBPF library that every node would carry for them.
package netguard
