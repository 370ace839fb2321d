package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/agent/endpoint"
	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/node"
)

// noNode fails the test if a request ever reaches it.
type noNode struct{ t *testing.T }

func (n noNode) Run(context.Context, node.RunRequest) node.RunResult {
	n.t.Error("a run reached the node")
	return node.RunResult{}
}

func (n noNode) LogFile(node.InstanceRef) (string, int, error) {
	n.t.Error("a log read reached the node")
	return "", 0, nil
}

// TestEndpointRefusesUserToken: a token the API server accepts (a real
// TokenRequest token, checked with SelfSubjectReview), presented to the
// agent directly, fails the TLS handshake ("certificate required"): the
// agent answers no HTTP status, reads no request and sends the token
// nowhere.
func TestEndpointRefusesUserToken(t *testing.T) {
	ctx := testCtx(t)
	const nodeName = "token-node"
	kc := kubernetes.NewForConfigOrDie(env.Config)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "some-user"}}
	if err := env.Client.Create(ctx, sa); err != nil && !isAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sa) })
	cfg, who := tokenFor(t, kc, "default", "some-user", nil)
	if who.Username != "system:serviceaccount:default:some-user" {
		t.Fatalf("the API server does not accept the token: %+v", who)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	srv := &endpoint.Server{Addr: "127.0.0.1:0", NodeName: nodeName, Client: env.Client,
		RelayCA: env.Client, RelayCANamespace: "unitlet-system", Node: noNode{t},
		Recorder: events.NewFakeRecorder(1), Log: logr.Discard()}
	go func() { done <- srv.Start(sctx) }()
	t.Cleanup(func() {
		stop()
		<-done
		deleteForce(t, &v1.Enrollment{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	})
	var ep v1.AgentEndpoint
	testutil.Eventually(t, "the endpoint published", waitLimit, pollEvery, testutil.Succeeds(func() error {
		var enr v1.Enrollment
		if err := env.Client.Get(ctx, client.ObjectKey{Name: nodeName}, &enr); err != nil {
			return err
		}
		if enr.Status.Endpoint == nil {
			return errorf("no endpoint yet")
		}
		ep = *enr.Status.Endpoint
		return nil
	}))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ep.CABundle)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: ep.ServerName, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	for _, path := range []string{agentapi.LogPath("default", "x"), agentapi.RunPath("default", "x")} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ep.Address+path, nil)
		req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s with a user's token: HTTP %d, want the handshake refused", path, resp.StatusCode)
			continue
		}
		if !strings.Contains(err.Error(), "tls: certificate required") {
			t.Errorf("%s with a user's token: %v, want tls: certificate required", path, err)
		}
	}
}
