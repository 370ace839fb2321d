// Package layout derives every path, cgroup name and unit name unitlet
// uses on a node from (state root, run root, namespace, name, role,
// generation). Nothing else in unitlet builds such a name by hand, so a
// rename happens in one place and two packages can never disagree about
// where a thing lives.
//
// Layout holds the roots; Layout.Instance validates (namespace, name) and
// gives the instance's directories and sockets; Instance.RoleSlot validates
// (role, generation) and gives that process's launch file, exit-record
// prefix, log sockets and unit name.
package layout
