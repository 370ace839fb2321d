// Package cgroups contains an instance's processes and proves their end.
//
// Every instance gets a parent cgroup (layout.InstanceCgroup) that holds
// no process itself; below it g<n> per generation with the tier's limits,
// and role-seed / role-sidecar-<name> (one per sidecar) that share the
// parent's limit. The parent's floor is the tier; a swap raises it for the
// overlap and restores it once the retiring generation's child is empty.
//
// The same Manager works on a pure cgroup v2 host and on v1 or hybrid
// hosts (v1 controllers, plus the unified hierarchy where it is mounted).
// KillAndEmpty kills one child and returns a Proof: the child was seen
// empty, or why that could not be seen. Nothing here pretends: with no
// delegated hierarchy, operations refuse with ErrNoDelegation.
//
// The package sits on github.com/opencontainers/cgroups (fs and fs2
// managers); it writes files itself only where that library has no call
// (cgroup.kill, cgroup.events, enabling controllers below a mount root
// that is not /sys/fs/cgroup).
package cgroups
