// Package identity decides who an Instance's processes run as. By
// default every Instance gets a uid and gid of its own, allocated from a
// reserved range and recorded on the node, so no two Instances can read
// each other's files and none is root. A template's user is honoured when
// the node's user database knows it; uid 0 only where an administrator
// allowed root. Seed, sidecars, generations and one-off commands of an
// Instance all resolve to the same Credential.
package identity
