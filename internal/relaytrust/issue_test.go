package relaytrust

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/internal/agentapi"
)

func verifyClient(caPEM []byte, c *tls.Certificate) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("no CA certificate")
	}
	_, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}

func TestClientCertificate(t *testing.T) {
	ca := mustCA(t, time.Now(), time.Hour)
	c, err := ca.ClientCertificate().GetClientCertificate(&tls.CertificateRequestInfo{})
	if err != nil {
		t.Fatal(err)
	}
	type props struct {
		CN       string
		Usages   []x509.ExtKeyUsage
		Life     time.Duration
		Verifies bool
	}
	got := props{CN: c.Leaf.Subject.CommonName, Usages: c.Leaf.ExtKeyUsage,
		Life: c.Leaf.NotAfter.Sub(c.Leaf.NotBefore), Verifies: verifyClient(ca.certPEM, c) == nil}
	want := props{CN: agentapi.RelayClientName, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		Life: ClientCertLife + skew, Verifies: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("client certificate (-want,+got):\n%s", diff)
	}
	other := mustCA(t, time.Now(), time.Hour)
	if verifyClient(other.certPEM, c) == nil {
		t.Error("the client certificate verifies against another CA")
	}
}

// TestRotating walks a clock through a certificate's life: the same one
// until two thirds of it, then a new one; a failed re-issue keeps the
// old one only while it is valid.
func TestRotating(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Issued at t0: valid from t0-skew to t0+24h, renewed from
	// t0-skew + 2/3*(24h+skew).
	due := t0.Add(-skew).Add((ClientCertLife + skew) * 2 / 3)
	type step struct {
		at       time.Time
		failing  bool
		wantCert int // which issued certificate (1, 2...), 0: an error
	}
	tests := map[string][]step{
		"kept until due, then re-issued": {
			{at: t0, wantCert: 1},
			{at: due.Add(-time.Second), wantCert: 1},
			{at: due, wantCert: 2},
			{at: due.Add(time.Hour), wantCert: 2},
		},
		"a failed re-issue keeps the valid one, then fails once it expired": {
			{at: t0, wantCert: 1},
			{at: due, failing: true, wantCert: 1},
			{at: t0.Add(ClientCertLife + time.Second), failing: true, wantCert: 0},
			{at: t0.Add(ClientCertLife + time.Minute), wantCert: 2},
		},
		"no certificate and a failed issue: an error": {
			{at: t0, failing: true, wantCert: 0},
			{at: t0.Add(time.Second), wantCert: 1},
		},
	}
	ca := mustCA(t, t0, 10*365*24*time.Hour)
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			var now time.Time
			var failing bool
			issued := map[*tls.Certificate]int{}
			r := &Rotating{now: func() time.Time { return now }, issue: func(at time.Time) (*tls.Certificate, error) {
				if failing {
					return nil, errors.New("no entropy today")
				}
				c, err := ca.issueClient(at)
				issued[c] = len(issued) + 1
				return c, err
			}}
			var got, want []int
			for _, s := range steps {
				now, failing = s.at, s.failing
				c, err := r.Current()
				n := issued[c]
				if err != nil {
					n = 0
				}
				got, want = append(got, n), append(want, s.wantCert)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("certificate presented at each step (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSelfSignedServing(t *testing.T) {
	const name = "unitlet-relay.unitlet-system.svc"
	cert, caPEM, err := SelfSignedServing(name)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tests := map[string]struct {
		dnsName string
		wantErr bool
	}{
		"its name":     {dnsName: name},
		"another name": {dnsName: "unitlet-relay.other.svc", wantErr: true},
	}
	for tn, tc := range tests {
		t.Run(tn, func(t *testing.T) {
			_, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: tc.dnsName})
			if diff := cmp.Diff(tc.wantErr, err != nil); diff != "" {
				t.Errorf("verify %s: error %v (-want,+got):\n%s", tc.dnsName, err, diff)
			}
		})
	}
}
