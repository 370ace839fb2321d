package relay

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/internal/relaytrust"
)

// Agents finds the agent serving an Instance and holds one HTTPS client
// per node: mutual TLS, the relay's client certificate on one side, the
// certificate the agent published in its Enrollment on the other.
type Agents struct {
	reader     client.Reader
	clientCert func(*tls.CertificateRequestInfo) (*tls.Certificate, error)

	mu      sync.Mutex
	clients map[string]*agentClient // by node
}

// ClientCertificate is what the relay presents to agents.
type ClientCertificate interface {
	GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error)
}

// NewAgents reads Instances and Enrollments from reader.
func NewAgents(reader client.Reader, cert ClientCertificate) *Agents {
	return &Agents{reader: reader, clientCert: cert.GetClientCertificate, clients: map[string]*agentClient{}}
}

// agentClient reaches one node's agent at the endpoint it published.
type agentClient struct {
	node     string
	endpoint v1.AgentEndpoint
	http     *http.Client
}

// For is the client of the agent hosting Instance ns/name, or the error
// to answer with: 404 no such Instance, 400 not placed yet, 503 no agent
// endpoint published.
func (a *Agents) For(ctx context.Context, ns, name string) (*agentClient, error) {
	var inst v1.Instance
	if err := a.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &inst); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(v1.GroupVersion.WithResource(resourceInstances).GroupResource(), name)
		}
		return nil, apierrors.NewInternalError(fmt.Errorf("Instance %s/%s: %w", ns, name, err))
	}
	node := inst.Spec.NodeName
	if node == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Instance %s/%s is not placed on a node (spec.nodeName)", ns, name))
	}
	var enr v1.Enrollment
	err := a.reader.Get(ctx, client.ObjectKey{Name: node}, &enr)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, apierrors.NewInternalError(fmt.Errorf("Enrollment %s: %w", node, err))
	}
	if err != nil || enr.Status.Endpoint == nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf(
			"the agent of node %s has published no endpoint (status.endpoint of Enrollment %s): is it running and hosting?", node, node))
	}
	return a.client(node, *enr.Status.Endpoint)
}

// client is the node's client, made anew when the agent published a new
// endpoint (a restarted agent serves with a new certificate).
func (a *Agents) client(node string, ep v1.AgentEndpoint) (*agentClient, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[node]; ok && sameEndpoint(c.endpoint, ep) {
		return c, nil
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ep.CABundle) {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("the agent of node %s published no usable CA (status.endpoint.caBundle of Enrollment %s)", node, node))
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		// The name is the node's, whatever the agent wrote: an endpoint
		// cannot make the relay take another node's agent for this one.
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: agentapi.ServerName(node), GetClientCertificate: a.clientCert, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
		IdleConnTimeout:   90 * time.Second,
	}
	if old, ok := a.clients[node]; ok {
		old.http.CloseIdleConnections()
	}
	c := &agentClient{node: node, endpoint: *ep.DeepCopy(), http: &http.Client{Transport: tr}}
	a.clients[node] = c
	return c, nil
}

func sameEndpoint(a, b v1.AgentEndpoint) bool {
	return a.Address == b.Address && a.ServerName == b.ServerName && bytes.Equal(a.CABundle, b.CABundle)
}

// do sends a request to the agent; an answer other than 200 becomes the
// error to answer the user with.
func (c *agentClient) do(ctx context.Context, method, path, query string, body io.Reader, sub, name string) (*http.Response, error) {
	u := url.URL{Scheme: "https", Host: c.endpoint.Address, Path: path, RawQuery: query}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("the agent of node %s (%s): %v", c.node, c.endpoint.Address, err))
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, agentError(c.node, resp.StatusCode, strings.TrimSpace(string(msg)), sub, name)
	}
	return resp, nil
}

// agentError is an agent's refusal as the user sees it: the agent's code
// and message, except that the agent refusing the relay itself is the
// relay's fault, not the user's (401/403 would say the user's).
func agentError(node string, code int, msg, sub, name string) error {
	reason := map[int]metav1.StatusReason{
		http.StatusBadRequest:         metav1.StatusReasonBadRequest,
		http.StatusNotFound:           metav1.StatusReasonNotFound,
		http.StatusMethodNotAllowed:   metav1.StatusReasonMethodNotAllowed,
		http.StatusConflict:           metav1.StatusReasonConflict,
		http.StatusTooManyRequests:    metav1.StatusReasonTooManyRequests,
		http.StatusServiceUnavailable: metav1.StatusReasonServiceUnavailable,
	}[code]
	text := fmt.Sprintf("the agent of node %s: %s", node, msg)
	if code == http.StatusUnauthorized || code == http.StatusForbidden {
		text = fmt.Sprintf("the agent of node %s refused the relay (%d: %s): does it trust the relay CA (ConfigMap %s)?", node, code, msg, relaytrust.CAName)
		code = http.StatusInternalServerError
	}
	if reason == "" {
		reason = metav1.StatusReasonInternalError
		if code < 500 {
			code = http.StatusInternalServerError
		}
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: text,
		Details: &metav1.StatusDetails{Group: Group, Kind: resourceInstances + "/" + sub, Name: name},
	}}
}
