// Package join decides whether a node may host: the guard checks that
// must all pass before it does (Guard), the node's identity it reports
// (ReadIdentity), and the mode decision from the administrator's approval
// and the checks (Decide). It speaks the node only: the agent carries the
// facts to and from the API.
package join
