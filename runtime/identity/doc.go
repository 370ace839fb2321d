// Package identity decides who an Instance's processes run as. By
// default every Instance gets a uid and gid of its own, allocated from a
// reserved range and recorded on the node, so no two Instances can read
// each other's files and none is root. A template's user is honoured only
// under a Grant (the administrator's, read by the caller): that user,
// with only the supplementary groups the grant lists, uid 0 only under a
// grant of root; gid 0, the socket group and the reserved range are never
// given. Seed, sidecars, generations and one-off commands of an
// Instance all resolve to the same Credential.
package identity
