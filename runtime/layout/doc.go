// Package layout derives every path, cgroup name and unit name unitlet
// uses on a node from (state root, run root, namespace, name, role,
// generation). Nothing else in unitlet builds such a name by hand, so a
// rename happens in one place and two packages can never disagree about
// where a thing lives.
package layout
