package endpoint

import (
	"crypto/tls"
	"fmt"

	"k8s.io/client-go/util/cert"
)

// selfSigned makes a serving certificate for name, signed by a CA made
// with it, and returns the CA and certificate PEM a caller trusts once it
// has read them from the API server. A new one at each start: nothing to
// rotate, nothing on disk to steal.
func selfSigned(name string) (tls.Certificate, []byte, error) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(name, nil, []string{name})
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("serving certificate: %w", err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("serving certificate: %w", err)
	}
	return c, certPEM, nil
}
