// Package frontproxy makes the API server's front-proxy trust for a test
// control plane: the CA its aggregator's client certificate chains to
// (--requestheader-client-ca-file) and that certificate
// (--proxy-client-cert-file), so an aggregated API such as the relay
// can tell the API server's proxied requests from anyone else's.
package frontproxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// ClientName is the CommonName of the API server's proxy client
// certificate, the one name --requestheader-allowed-names admits.
const ClientName = "front-proxy-client"

// FrontProxy is the trust as files for the API server and as a pair for
// a test's own direct requests.
type FrontProxy struct {
	CAFile, CertFile, KeyFile string
	Client                    tls.Certificate
}

// Write makes a CA and the proxy client certificate (a day long) in dir.
func Write(dir string) (*FrontProxy, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "front-proxy-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ClientName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, key.Public(), caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	fp := &FrontProxy{CAFile: filepath.Join(dir, "front-proxy-ca.crt"),
		CertFile: filepath.Join(dir, "front-proxy-client.crt"), KeyFile: filepath.Join(dir, "front-proxy-client.key")}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	for file, data := range map[string][]byte{
		fp.CAFile:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		fp.CertFile: certPEM, fp.KeyFile: keyPEM,
	} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			return nil, fmt.Errorf("frontproxy: %w", err)
		}
	}
	if fp.Client, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("frontproxy: %w", err)
	}
	return fp, nil
}

// APIServerFlags are the kube-apiserver flags that make it proxy to
// aggregated APIs with this trust, by flag name without dashes.
// Aggregator routing stays off: it reaches a Service as a Service
// resolves (ClusterIP, or ExternalName, which a host-run test API
// server uses to reach a forwarded port).
func (fp *FrontProxy) APIServerFlags() map[string]string {
	return map[string]string{
		"requestheader-client-ca-file":       fp.CAFile,
		"requestheader-allowed-names":        ClientName,
		"requestheader-username-headers":     "X-Remote-User",
		"requestheader-uid-headers":          "X-Remote-Uid",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"proxy-client-cert-file":             fp.CertFile,
		"proxy-client-key-file":              fp.KeyFile,
		"enable-aggregator-routing":          "false",
	}
}
