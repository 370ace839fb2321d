package join

import (
	"fmt"
	"strings"
)

// Check names, one per precondition for hosting. They are the names an
// Enrollment lists, so an administrator can tell which one failed.
const (
	CheckCgroupRoot  = "CgroupRootWritable"
	CheckSystemdBus  = "SystemdBusReachable"
	CheckStateRoot   = "StateRoot"
	CheckRunRoot     = "RunRoot"
	CheckSocketGroup = "SocketGroup"
	CheckOpenat2     = "Openat2"
)

// Check is one guard check's result.
type Check struct {
	Name    string
	Passed  bool
	Message string
}

func pass(name, format string, args ...any) Check {
	return Check{Name: name, Passed: true, Message: fmt.Sprintf(format, args...)}
}

func fail(name string, err error) Check {
	return Check{Name: name, Message: err.Error()}
}

// Armed reports whether every check passed; failing names those that did
// not, each with its message ("Name: message"), in the checks' order.
func Armed(checks []Check) (armed bool, failing string) {
	var bad []string
	for _, c := range checks {
		if !c.Passed {
			bad = append(bad, c.Name+": "+c.Message)
		}
	}
	if len(checks) == 0 {
		return false, "no guard check ran"
	}
	return len(bad) == 0, strings.Join(bad, "; ")
}
