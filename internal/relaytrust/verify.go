package relaytrust

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/internal/agentapi"
)

// Where the cluster side publishes the relay CA's certificate, readable by
// every agent (the node side's own copy of the names, so it needs nothing
// of the cluster side's code).
const (
	nodeCAConfigMap = "unitlet-relay-ca"
	nodeCAKey       = "ca.crt"
)

// How often a node re-reads the relay CA: every rereadEvery, and after a
// failed verification at most once per rereadAfterFailure, so a caller
// presenting a bad certificate cannot make the agent hammer the API server.
const (
	rereadEvery        = time.Minute
	rereadAfterFailure = 10 * time.Second
	readTimeout        = 5 * time.Second
)

// ClientVerifier accepts only the relay's client certificate: one chained
// to the relay CA, for client authentication, with CommonName
// agentapi.RelayClientName.
type ClientVerifier struct {
	ctx       context.Context
	c         client.Reader
	namespace string
	now       func() time.Time

	mu       sync.Mutex
	pool     *x509.CertPool
	readErr  error
	lastRead time.Time
}

// WatchCA reads the relay CA from the ConfigMap in namespace now and again
// every minute until ctx ends, and at once (rate-limited) when a
// verification fails, so a re-made CA is taken without a restart. c is a
// direct reader (an API reader, not a cache that would watch every
// ConfigMap). Until the first read succeeds, every caller is refused.
func WatchCA(ctx context.Context, c client.Reader, namespace string) *ClientVerifier {
	v := newVerifier(ctx, c, namespace, time.Now)
	v.reread()
	go func() {
		t := time.NewTicker(rereadEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				v.reread()
			}
		}
	}()
	return v
}

func newVerifier(ctx context.Context, c client.Reader, namespace string, now func() time.Time) *ClientVerifier {
	return &ClientVerifier{ctx: ctx, c: c, namespace: namespace, now: now}
}

// VerifyPeerCertificate is a tls.Config.VerifyPeerCertificate for a server
// whose ClientAuth is tls.RequireAnyClientCert: the chain is checked here,
// against the relay CA alone.
func (v *ClientVerifier) VerifyPeerCertificate(rawCerts [][]byte, _ [][]*x509.Certificate) error {
	pool, readErr := v.current()
	err := verifyRelay(rawCerts, pool, readErr, v.now())
	if err == nil || !v.rereadDue() {
		return err
	}
	// The CA may have been re-made since the last read.
	v.reread()
	pool, readErr = v.current()
	return verifyRelay(rawCerts, pool, readErr, v.now())
}

func (v *ClientVerifier) current() (*x509.CertPool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.pool, v.readErr
}

// rereadDue says whether a failed verification may read the CA again.
func (v *ClientVerifier) rereadDue() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now().Sub(v.lastRead) >= rereadAfterFailure
}

// reread replaces the pool with the ConfigMap's; a failed read keeps the
// last good pool (a passing API server outage does not lock the relay
// out) and is remembered for the refusal's message.
func (v *ClientVerifier) reread() {
	ctx, cancel := context.WithTimeout(v.ctx, readTimeout)
	defer cancel()
	pool, err := readCA(ctx, v.c, v.namespace)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lastRead = v.now()
	v.readErr = err
	if err == nil {
		v.pool = pool
	}
}

// readCA is the pool of the certificates in the ConfigMap's ca.crt.
func readCA(ctx context.Context, c client.Reader, namespace string) (*x509.CertPool, error) {
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: nodeCAConfigMap}, &cm); err != nil {
		return nil, fmt.Errorf("relay CA %s/%s: %w", namespace, nodeCAConfigMap, err)
	}
	pem := cm.Data[nodeCAKey]
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(pem)) {
		return nil, fmt.Errorf("relay CA %s/%s: no PEM certificate in %s", namespace, nodeCAConfigMap, nodeCAKey)
	}
	return pool, nil
}

// verifyRelay is the decision: the leaf (rawCerts[0], the rest
// intermediates) chains to pool for client authentication and names the
// relay.
func verifyRelay(rawCerts [][]byte, pool *x509.CertPool, readErr error, now time.Time) error {
	if len(rawCerts) == 0 {
		return errors.New("no client certificate: the agent serves only the relay")
	}
	if pool == nil {
		return fmt.Errorf("relay CA not known yet: %w", readErr)
	}
	certs := make([]*x509.Certificate, 0, len(rawCerts))
	for i, raw := range rawCerts {
		c, err := x509.ParseCertificate(raw)
		if err != nil {
			return fmt.Errorf("client certificate %d: %w", i, err)
		}
		certs = append(certs, c)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	leaf := certs[0]
	opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := leaf.Verify(opts); err != nil {
		return fmt.Errorf("client certificate %q is not the relay CA's: %w", leaf.Subject.CommonName, err)
	}
	// Verify takes a certificate without extended key usages as good for
	// any; the relay's says client authentication, so nothing less passes.
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return fmt.Errorf("client certificate %q is not for client authentication", leaf.Subject.CommonName)
	}
	if leaf.Subject.CommonName != agentapi.RelayClientName {
		return fmt.Errorf("client certificate %q of the relay CA is not the relay's (%q)", leaf.Subject.CommonName, agentapi.RelayClientName)
	}
	return nil
}
