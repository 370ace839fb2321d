package relaytrust

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// CAName names both the Secret holding the relay CA (tls.crt,
	// tls.key) and the ConfigMap publishing its certificate to the agents.
	CAName = "unitlet-relay-ca"
	// CAConfigMapKey is the ConfigMap's key of the CA certificate (PEM).
	CAConfigMapKey = "ca.crt"
	// caLife is long: agents trust the CA for as long as it lives, and a
	// new one means a window where they trust the old one only.
	caLife = 10 * 365 * 24 * time.Hour
)

// CA is the relay CA: it signs the relay's client certificates.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// CertPEM is the CA certificate, as the ConfigMap publishes it.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// EnsureCA returns the relay CA of namespace, making it on first use, and
// publishes its certificate in the ConfigMap. Several relays starting at
// once agree on one CA: a create that finds another's reads it back. A
// Secret that holds no usable CA is an error and is left as it is.
func EnsureCA(ctx context.Context, c client.Client, namespace string) (*CA, error) {
	ca, err := ensureSecret(ctx, c, namespace, time.Now())
	if err != nil {
		return nil, err
	}
	if err := publish(ctx, c, namespace, ca.certPEM); err != nil {
		return nil, err
	}
	return ca, nil
}

func ensureSecret(ctx context.Context, c client.Client, namespace string, now time.Time) (*CA, error) {
	key := client.ObjectKey{Namespace: namespace, Name: CAName}
	var s corev1.Secret
	err := c.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		var fresh *CA
		fresh, err = newCA(now, CAName, caLife)
		if err != nil {
			return nil, err
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: CAName},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: fresh.certPEM, corev1.TLSPrivateKeyKey: fresh.keyPEM()},
		}
		err = c.Create(ctx, &s)
		if apierrors.IsAlreadyExists(err) {
			// Another relay made one first: use that one.
			err = c.Get(ctx, key, &s)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("relay CA Secret %s: %w", key, err)
	}
	ca, err := parseCA(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], now)
	if err != nil {
		return nil, fmt.Errorf("relay CA Secret %s holds no usable CA (delete it to have a new one made; agents follow the ConfigMap): %w", key, err)
	}
	return ca, nil
}

// parseCA reads a CA key pair and checks it can sign now.
func parseCA(certPEM, keyPEM []byte, now time.Time) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	cert := pair.Leaf
	signer, ok := pair.PrivateKey.(crypto.Signer)
	switch {
	case !ok:
		return nil, fmt.Errorf("its key (%T) cannot sign", pair.PrivateKey)
	case !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return nil, errors.New("its certificate is not a CA's")
	case now.After(cert.NotAfter):
		return nil, fmt.Errorf("its certificate expired at %s", cert.NotAfter.Format(time.RFC3339))
	}
	return &CA{cert: cert, key: signer, certPEM: certPEM}, nil
}

// publish writes the CA certificate into the ConfigMap, keeping any other
// key it holds; concurrent writers retry.
func publish(ctx context.Context, c client.Client, namespace string, certPEM []byte) error {
	key := client.ObjectKey{Namespace: namespace, Name: CAName}
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err := retry.OnError(retry.DefaultBackoff, retriable, func() error {
		var cm corev1.ConfigMap
		err := c.Get(ctx, key, &cm)
		if apierrors.IsNotFound(err) {
			cm = corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: CAName},
				Data:       map[string]string{CAConfigMapKey: string(certPEM)},
			}
			return c.Create(ctx, &cm)
		}
		if err != nil || cm.Data[CAConfigMapKey] == string(certPEM) {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[CAConfigMapKey] = string(certPEM)
		return c.Update(ctx, &cm)
	})
	if err != nil {
		return fmt.Errorf("publish the relay CA in ConfigMap %s: %w", key, err)
	}
	return nil
}
