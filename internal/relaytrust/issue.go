package relaytrust

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/unitlet/unitlet/internal/agentapi"
)

const (
	// ClientCertLife is how long a relay client certificate is valid; it
	// is re-issued at two thirds of that.
	ClientCertLife = 24 * time.Hour
	// ServingLife is the life of the relay's own serving certificate,
	// made anew at each start.
	ServingLife = 365 * 24 * time.Hour
	// skew backdates a certificate so a peer whose clock is a little
	// behind already takes it.
	skew = 5 * time.Minute
)

// newCA makes a self-signed CA.
func newCA(now time.Time, cn string, life time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-skew),
		NotAfter:              now.Add(life),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	}
	der, cert, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// keyPEM is the CA's key in PKCS #8 PEM.
func (ca *CA) keyPEM() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		panic(err) // only keys this package generated reach here
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// issue signs a new key's certificate from tmpl (subject, usages, names).
func (ca *CA) issue(tmpl *x509.Certificate, now time.Time, life time.Duration) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certificate key: %w", err)
	}
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-skew), now.Add(life)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, leaf, err := sign(tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, *x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return der, cert, err
}

// issueClient is a relay client certificate.
func (ca *CA) issueClient(now time.Time) (*tls.Certificate, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: agentapi.RelayClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now, ClientCertLife)
}

// ClientCertificate is the relay's client certificate, issued on first
// use and re-issued once two thirds of its life have passed.
func (ca *CA) ClientCertificate() *Rotating {
	return &Rotating{issue: ca.issueClient, now: time.Now}
}

// Rotating holds a certificate and replaces it before it expires. Its
// GetClientCertificate fits tls.Config.
type Rotating struct {
	issue func(now time.Time) (*tls.Certificate, error)
	now   func() time.Time

	mu      sync.Mutex
	cur     *tls.Certificate
	renewAt time.Time
}

// GetClientCertificate returns the current certificate, whatever the
// server asks for: it has only the one.
func (r *Rotating) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.Current()
}

// Current is the certificate to present now, issuing a new one when due.
// A failed re-issue keeps presenting the old one while it is valid.
func (r *Rotating) Current() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if r.cur != nil && now.Before(r.renewAt) {
		return r.cur, nil
	}
	c, err := r.issue(now)
	if err != nil {
		if r.cur != nil && now.Before(r.cur.Leaf.NotAfter) {
			return r.cur, nil
		}
		return nil, fmt.Errorf("relay client certificate: %w", err)
	}
	r.cur, r.renewAt = c, renewAt(c.Leaf)
	return c, nil
}

// renewAt is two thirds into a certificate's life.
func renewAt(leaf *x509.Certificate) time.Time {
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotBefore.Add(life * 2 / 3)
}

// SelfSignedServing makes a serving certificate for dnsName, signed by a
// CA made for it alone, and returns it with that CA's certificate (PEM)
// for the callers' caBundle. A new pair at each start: nothing to rotate
// or store.
func SelfSignedServing(dnsName string) (tls.Certificate, []byte, error) {
	now := time.Now()
	ca, err := newCA(now, dnsName+"-ca", ServingLife)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	c, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsName},
		DNSNames:    []string{dnsName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now, ServingLife)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return *c, ca.certPEM, nil
}
