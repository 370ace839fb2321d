// Package subresources names the aggregated API the relay serves and
// `kubectl unitlet` calls: an Instance's log and its one-off runs, as
// subresources of instances in a group of their own (the Instance's own
// group is served by the CRD, which cannot have streaming subresources).
// Both sides import it, so neither spells the group or a path alone.
package subresources

import "k8s.io/apimachinery/pkg/runtime/schema"

const (
	// Group and Version of the aggregated API.
	Group   = "subresources.hosting.unitlet.dev"
	Version = "v1"
	// APIServiceName is the APIService registering Group/Version.
	APIServiceName = Version + "." + Group

	// Resource is the Instances the subresources hang from.
	Resource = "instances"
	// Log streams an Instance's log (verb get).
	Log = "log"
	// Run runs a command in an Instance's environment (verb create).
	Run = "run"
	// Exec is Run under kubectl's word. The plugin calls it: the API
	// server lets exec, attach, log, portforward and proxy outlive its
	// request timeout, and no other subresource name.
	Exec = "exec"
)

// GroupVersion is Group/Version.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
