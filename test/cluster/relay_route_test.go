package cluster

import (
	"fmt"
	"strconv"
	"testing"
)

// relayPort is the relay's port in the guest, taken on the node as a
// hostPort so QEMU can forward it to this machine's loopback.
const relayPort = 8443

// routeRelay makes the relay in the node VM reachable from the API
// server, which runs on this machine outside the cluster network: the
// relay's pod takes relayPort on the node (hostPort), QEMU forwards it
// to a loopback port here, and the relay's Service becomes an
// ExternalName of localhost with the APIService naming that port (the
// aggregator dials an ExternalName Service at host:APIService port, and
// verifies the relay's certificate for unitlet-relay.unitlet-system.svc
// whatever it dialled). A real cluster needs none of it: its API server
// reaches the Service's ClusterIP (kube-proxy on the control plane, or
// its provider's tunnel).
func routeRelay(t *testing.T) {
	kubectl(t, "patch", "deployment", "-n", "unitlet-system", "unitlet-relay", "--type=json", "-p",
		fmt.Sprintf(`[{"op":"add","path":"/spec/template/spec/containers/0/ports/0/hostPort","value":%d}]`, relayPort))
	kubectl(t, "delete", "service", "-n", "unitlet-system", "unitlet-relay")
	kubectlIn(t, []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"unitlet-relay","namespace":"unitlet-system"},
"spec":{"type":"ExternalName","externalName":"localhost","ports":[{"name":"https","port":`+strconv.Itoa(c.VM.HostPort(relayPort))+`}]}}`),
		"apply", "-f", "-")
	kubectl(t, "patch", "apiservice", "v1.subresources.hosting.unitlet.dev", "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"service":{"port":%d}}}`, c.VM.HostPort(relayPort)))
	kubectl(t, "rollout", "status", "-n", "unitlet-system", "deployment/unitlet-relay", "--timeout=5m")
	kubectl(t, "wait", "--for=condition=Available", "--timeout=3m", "apiservice/v1.subresources.hosting.unitlet.dev")
}
