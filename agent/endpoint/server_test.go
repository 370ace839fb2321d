package endpoint

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/runtime/node"
)

const testNode = "node-a"

// issuer is a certificate and its key.
type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// issue makes a certificate named cn with the extended key usages eku,
// signed by parent, or a CA of its own when parent is nil.
func issue(t *testing.T, cn string, eku []x509.ExtKeyUsage, parent *issuer) *issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: eku, BasicConstraintsValid: true,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	} else {
		tmpl.IsCA, tmpl.KeyUsage = true, tmpl.KeyUsage|x509.KeyUsageCertSign
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &issuer{cert: c, key: key}
}

func (i *issuer) tls() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{i.cert.Raw}, PrivateKey: i.key, Leaf: i.cert}
}

func (i *issuer) pem() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.cert.Raw}))
}

// logOnly is a node whose Instances' log is one file; it counts the
// requests that reached it.
type logOnly struct {
	path  string
	calls atomic.Int32
}

func (n *logOnly) LogFile(node.InstanceRef) (string, int, error) {
	n.calls.Add(1)
	return n.path, 1, nil
}

func (n *logOnly) Run(context.Context, node.RunRequest) node.RunResult {
	n.calls.Add(1)
	return node.RunResult{}
}

// startServer runs a Server for testNode with the relay CA ca, and
// returns the endpoint it published in its Enrollment.
func startServer(t *testing.T, ca *issuer, n Node) (v1.AgentEndpoint, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.Enrollment{}).WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "unitlet-system", Name: "unitlet-relay-ca"},
			Data: map[string]string{"ca.crt": ca.pem()}},
		&v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "here"}, Spec: v1.InstanceSpec{NodeName: testNode}},
		&v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "there"}, Spec: v1.InstanceSpec{NodeName: "node-b"}},
		&v1.Instance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "active"}, Spec: v1.InstanceSpec{NodeName: testNode},
			Status: v1.InstanceStatus{ActiveGeneration: 1}},
	).Build()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	s := &Server{Addr: "127.0.0.1:0", NodeName: testNode, Client: c, RelayCA: c, RelayCANamespace: "unitlet-system",
		Node: n, Recorder: events.NewFakeRecorder(10), Log: logr.Discard()}
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var enr v1.Enrollment
		if err := c.Get(ctx, client.ObjectKey{Name: testNode}, &enr); err == nil && enr.Status.Endpoint != nil {
			return *enr.Status.Endpoint, c
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no endpoint published in 10s")
	return v1.AgentEndpoint{}, nil
}

// TestServesOnlyTheRelay: the endpoint serves the relay's client
// certificate and fails the TLS handshake of every other caller, before
// any request is read: no certificate (with or without a user's bearer
// token), another CA's relay certificate, the relay CA's certificate of
// another name. A refused caller gets no HTTP status at all (no 401):
// the alert is "certificate required" or "bad certificate".
func TestServesOnlyTheRelay(t *testing.T) {
	ca := issue(t, "unitlet-relay-ca", nil, nil)
	clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	relay := issue(t, agentapi.RelayClientName, clientAuth, ca)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "log")
	const line = "2026-12-01T10:00:00Z g1 hello"
	if err := os.WriteFile(logPath, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &logOnly{path: logPath}
	ep, _ := startServer(t, ca, n)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ep.CABundle) {
		t.Fatal("published CA bundle holds no certificate")
	}
	type result struct {
		Code int
		Body string
		Err  string // the TLS alert, when the handshake fails
	}
	tests := map[string]struct {
		cert     *issuer
		token    string
		instance string
		want     result
	}{
		"the relay": {cert: relay, instance: "here", want: result{Code: 200, Body: line + "\n"}},
		"the relay, an Instance on another node": {cert: relay, instance: "there",
			want: result{Code: 404, Body: "Instance default/there is not on node node-a\n"}},
		"no client certificate": {instance: "here", want: result{Err: "tls: certificate required"}},
		"a user's bearer token, directly": {token: "eyJhbGciOiJSUzI1NiJ9.a-valid-user-token.sig", instance: "here",
			want: result{Err: "tls: certificate required"}},
		"another CA's relay certificate": {cert: issue(t, agentapi.RelayClientName, clientAuth, issue(t, "other-ca", nil, nil)),
			instance: "here", want: result{Err: "tls: bad certificate"}},
		"the relay CA's certificate of another name": {cert: issue(t, "system:admin", clientAuth, ca),
			instance: "here", want: result{Err: "tls: bad certificate"}},
		"the relay CA's certificate of another name, with a token": {cert: issue(t, "admin", clientAuth, ca),
			token: "eyJhbGciOiJSUzI1NiJ9.a-valid-user-token.sig", instance: "here", want: result{Err: "tls: bad certificate"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: roots, ServerName: ep.ServerName, MinVersion: tls.VersionTLS12}
			if tc.cert != nil {
				cfg.Certificates = []tls.Certificate{tc.cert.tls()}
			}
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
			defer hc.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodGet, "https://"+ep.Address+agentapi.LogPath("default", tc.instance), nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			before := n.calls.Load()
			var got result
			resp, err := hc.Do(req)
			if err != nil {
				got.Err = err.Error()
				if i := strings.Index(got.Err, "tls: "); i >= 0 {
					got.Err = got.Err[i:]
				}
			} else {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got.Code, got.Body = resp.StatusCode, string(b)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
			if tc.want.Err != "" && n.calls.Load() != before {
				t.Errorf("a refused caller reached the node")
			}
		})
	}
}

// TestLogTailAndLimit: the relay's tailLines and limitBytes reach the
// reader: the last lines, cut after the bytes asked for.
func TestLogTailAndLimit(t *testing.T) {
	ca := issue(t, "unitlet-relay-ca", nil, nil)
	relay := issue(t, agentapi.RelayClientName, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, ca)
	lines := []string{"2026-12-01T10:00:01Z g1 one", "2026-12-01T10:00:02Z seed seeded", "2026-12-01T10:00:03Z g2 two", "2026-12-01T10:00:04Z g2 three"}
	logPath := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(logPath, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ep, _ := startServer(t, ca, &logOnly{path: logPath})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ep.CABundle)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: ep.ServerName, Certificates: []tls.Certificate{relay.tls()}, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	tests := map[string]struct {
		q    agentapi.LogQuery
		want string
	}{
		"all":                  {agentapi.LogQuery{}, lines[0] + "\n" + lines[2] + "\n" + lines[3] + "\n"},
		"tail 2":               {agentapi.LogQuery{TailLines: 2}, lines[2] + "\n" + lines[3] + "\n"},
		"tail of a generation": {agentapi.LogQuery{TailLines: 5, Generation: 1}, lines[0] + "\n"},
		"limit 10 bytes":       {agentapi.LogQuery{LimitBytes: 10}, lines[0][:10]},
		"tail 1, limit":        {agentapi.LogQuery{TailLines: 1, LimitBytes: 25}, lines[3][:25]},
		"follow, limit":        {agentapi.LogQuery{Follow: true, LimitBytes: 5}, lines[0][:5]},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp, err := hc.Get("https://" + ep.Address + agentapi.LogPath("default", "here") + "?" + tc.q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, string(b)); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}
