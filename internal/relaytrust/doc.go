// Package relaytrust is the trust between the relay (the cluster side's
// aggregated API behind `kubectl unitlet logs/run`) and the node agents.
//
// The cluster side keeps a CA of its own (EnsureCA: Secret
// unitlet-relay-ca, its certificate published in ConfigMap
// unitlet-relay-ca for every agent to read) and issues the relay a
// short-lived client certificate from it (CA.ClientCertificate), named
// agentapi.RelayClientName. The node side verifies that certificate
// against the published CA (WatchCA) and serves nobody else. No user
// credential crosses this channel: the relay has authenticated and
// authorized the user before it dials an agent.
//
// It is a leaf both sides share: it imports the agent's wire names, and
// nothing of either side.
package relaytrust
