package relaytrust

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/unitlet/unitlet/internal/agentapi"
)

// vtIssuer is a certificate and its key, for signing others.
type vtIssuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

type vtSpec struct {
	cn        string
	eku       []x509.ExtKeyUsage
	ca        bool
	notBefore time.Time
	notAfter  time.Time
}

var vtSerial = big.NewInt(1)

// vtMake issues spec by parent (self-signed when parent is nil).
func vtMake(t *testing.T, spec vtSpec, parent *vtIssuer) *vtIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	vtSerial.Add(vtSerial, big.NewInt(1))
	if spec.notBefore.IsZero() {
		spec.notBefore = time.Now().Add(-time.Hour)
	}
	if spec.notAfter.IsZero() {
		spec.notAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: new(big.Int).Set(vtSerial), Subject: pkix.Name{CommonName: spec.cn},
		NotBefore: spec.notBefore, NotAfter: spec.notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: spec.eku,
		BasicConstraintsValid: true, IsCA: spec.ca,
	}
	if spec.ca {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &vtIssuer{cert: c, key: key}
}

func vtPEM(certs ...*vtIssuer) string {
	var b strings.Builder
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})
	}
	return b.String()
}

func vtRaw(certs ...*vtIssuer) [][]byte {
	raw := make([][]byte, 0, len(certs))
	for _, c := range certs {
		raw = append(raw, c.cert.Raw)
	}
	return raw
}

var clientAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}

func TestVerifyRelay(t *testing.T) {
	ca := vtMake(t, vtSpec{cn: "unitlet-relay-ca", ca: true}, nil)
	other := vtMake(t, vtSpec{cn: "unitlet-relay-ca", ca: true}, nil)
	inter := vtMake(t, vtSpec{cn: "intermediate", ca: true}, ca)
	relay := vtMake(t, vtSpec{cn: agentapi.RelayClientName, eku: clientAuth}, ca)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	tests := map[string]struct {
		raw  [][]byte
		pool *x509.CertPool
		want string // "" : accepted; else a part of the refusal
	}{
		"the relay": {raw: vtRaw(relay), pool: pool},
		"the relay through an intermediate": {
			raw: vtRaw(vtMake(t, vtSpec{cn: agentapi.RelayClientName, eku: clientAuth}, inter), inter), pool: pool},
		"no certificate": {raw: nil, pool: pool, want: "no client certificate"},
		"another CA's relay": {
			raw: vtRaw(vtMake(t, vtSpec{cn: agentapi.RelayClientName, eku: clientAuth}, other)), pool: pool,
			want: "is not the relay CA's"},
		"self-signed relay": {
			raw: vtRaw(vtMake(t, vtSpec{cn: agentapi.RelayClientName, eku: clientAuth}, nil)), pool: pool,
			want: "is not the relay CA's"},
		"the relay CA's certificate of another name": {
			raw: vtRaw(vtMake(t, vtSpec{cn: "system:admin", eku: clientAuth}, ca)), pool: pool,
			want: `"system:admin" of the relay CA is not the relay's`},
		"a serving certificate": {
			raw:  vtRaw(vtMake(t, vtSpec{cn: agentapi.RelayClientName, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca)),
			pool: pool, want: "is not the relay CA's"},
		"no extended key usage": {
			raw: vtRaw(vtMake(t, vtSpec{cn: agentapi.RelayClientName}, ca)), pool: pool,
			want: "not for client authentication"},
		"expired": {
			raw: vtRaw(vtMake(t, vtSpec{cn: agentapi.RelayClientName, eku: clientAuth,
				notBefore: time.Now().Add(-48 * time.Hour), notAfter: time.Now().Add(-time.Hour)}, ca)),
			pool: pool, want: "is not the relay CA's"},
		"not a certificate":   {raw: [][]byte{[]byte("garbage")}, pool: pool, want: "client certificate 0"},
		"the CA not read yet": {raw: vtRaw(relay), pool: nil, want: "relay CA not known yet"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := verifyRelay(tc.raw, tc.pool, errNotRead, time.Now())
			got := ""
			if err != nil {
				got = err.Error()
			}
			if (tc.want == "") != (err == nil) || !strings.Contains(got, tc.want) {
				t.Errorf("verifyRelay = %v, want %q", err, tc.want)
			}
		})
	}
}

var errNotRead = context.DeadlineExceeded

// vtClock is a settable now.
type vtClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *vtClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *vtClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func vtConfigMap(ns, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unitlet-relay-ca"},
		Data: map[string]string{"ca.crt": data}}
}

// TestVerifierRereads: the CA is read from the ConfigMap in the given
// namespace; a relay certificate of a new CA is refused until the
// verifier re-reads, which a failure does at most every 10 s.
func TestVerifierRereads(t *testing.T) {
	const ns = "relay-ns"
	ca1 := vtMake(t, vtSpec{cn: "ca-1", ca: true}, nil)
	ca2 := vtMake(t, vtSpec{cn: "ca-2", ca: true}, nil)
	relay1 := vtRaw(vtMake(t, vtSpec{cn: agentapi.RelayClientName, eku: clientAuth}, ca1))
	relay2 := vtRaw(vtMake(t, vtSpec{cn: agentapi.RelayClientName, eku: clientAuth}, ca2))
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(vtConfigMap("other-ns", vtPEM(ca2))).Build()
	clock := &vtClock{t: time.Now()}
	v := newVerifier(context.Background(), c, ns, clock.now)
	v.reread()

	type step struct {
		do       func()
		raw      [][]byte
		accepted bool
	}
	ctx := context.Background()
	steps := []step{
		// No ConfigMap in its namespace yet (another namespace's does not count).
		{raw: relay2},
		{do: func() { clock.add(rereadAfterFailure) }, raw: relay2},
		{do: func() {
			if err := c.Create(ctx, vtConfigMap(ns, vtPEM(ca1))); err != nil {
				t.Fatal(err)
			}
		}, raw: relay1},
		// Rate-limited: the failure above read it moments ago; now it is
		// due, and reads ca1.
		{do: func() { clock.add(rereadAfterFailure) }, raw: relay1, accepted: true},
		{raw: relay2},
		{do: func() {
			if err := c.Update(ctx, vtConfigMap(ns, vtPEM(ca2, ca1))); err != nil {
				t.Fatal(err)
			}
		}, raw: relay2},
		{do: func() { clock.add(rereadAfterFailure) }, raw: relay2, accepted: true},
		{raw: relay1, accepted: true},
		// A read that fails keeps the last good CA.
		{do: func() {
			if err := c.Delete(ctx, vtConfigMap(ns, "")); err != nil {
				t.Fatal(err)
			}
			clock.add(rereadEvery)
			v.reread()
		}, raw: relay1, accepted: true},
		// Garbage in ca.crt is a failed read too.
		{do: func() {
			if err := c.Create(ctx, vtConfigMap(ns, "not PEM")); err != nil {
				t.Fatal(err)
			}
			clock.add(rereadEvery)
			v.reread()
		}, raw: relay2, accepted: true},
	}
	var want, got []bool
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		want = append(want, s.accepted)
		got = append(got, v.VerifyPeerCertificate(s.raw, nil) == nil)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("accepted per step (-want,+got):\n%s", d)
	}
}

// TestWatchCAReadsAtOnce: WatchCA returns with the CA read.
func TestWatchCAReadsAtOnce(t *testing.T) {
	ca := vtMake(t, vtSpec{cn: "ca", ca: true}, nil)
	relay := vtRaw(vtMake(t, vtSpec{cn: agentapi.RelayClientName, eku: clientAuth}, ca))
	var c client.Reader = fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(vtConfigMap("unitlet-system", vtPEM(ca))).Build()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := WatchCA(ctx, c, "unitlet-system")
	if err := v.VerifyPeerCertificate(relay, nil); err != nil {
		t.Errorf("the relay refused: %v", err)
	}
}
