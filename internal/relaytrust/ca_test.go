package relaytrust

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/unitlet/unitlet/internal/scheme"
)

const ns = "unitlet-system"

func caSecret(t *testing.T, ca *CA) *corev1.Secret {
	t.Helper()
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CAName},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: ca.certPEM, corev1.TLSPrivateKeyKey: ca.keyPEM()},
	}
}

func mustCA(t *testing.T, now time.Time, life time.Duration) *CA {
	t.Helper()
	ca, err := newCA(now, "test-ca", life)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// outcome is what EnsureCA leaves: which CA it returned, the Secret's
// certificate and the ConfigMap's data.
type outcome struct {
	Err         bool
	Returned    string
	SecretCert  string
	ConfigMap   map[string]string
	CAIsPresent bool
}

func TestEnsureCA(t *testing.T) {
	now := time.Now()
	existing := mustCA(t, now, time.Hour)
	raced := mustCA(t, now, time.Hour)
	expired := mustCA(t, now.Add(-2*time.Hour), time.Hour)
	broken := caSecret(t, existing)
	broken.Data[corev1.TLSPrivateKeyKey] = []byte("not a key")
	// "" in a want stands for the CA EnsureCA made itself.
	tests := map[string]struct {
		objects     []client.Object
		createFirst client.Object // made by "another relay" when the Secret is created
		want        outcome
	}{
		"nothing yet: a new CA, published": {
			want: outcome{Returned: "", SecretCert: "", ConfigMap: map[string]string{CAConfigMapKey: ""}, CAIsPresent: true},
		},
		"the Secret exists: kept and published": {
			objects: []client.Object{caSecret(t, existing)},
			want: outcome{Returned: string(existing.certPEM), SecretCert: string(existing.certPEM),
				ConfigMap: map[string]string{CAConfigMapKey: string(existing.certPEM)}, CAIsPresent: true},
		},
		"a stale ConfigMap: its certificate replaced, its other keys kept": {
			objects: []client.Object{caSecret(t, existing), &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CAName},
				Data:       map[string]string{CAConfigMapKey: "old", "note": "mine"},
			}},
			want: outcome{Returned: string(existing.certPEM), SecretCert: string(existing.certPEM),
				ConfigMap: map[string]string{CAConfigMapKey: string(existing.certPEM), "note": "mine"}, CAIsPresent: true},
		},
		"another relay creates it first: its CA is used": {
			createFirst: caSecret(t, raced),
			want: outcome{Returned: string(raced.certPEM), SecretCert: string(raced.certPEM),
				ConfigMap: map[string]string{CAConfigMapKey: string(raced.certPEM)}, CAIsPresent: true},
		},
		"a broken Secret: an error, nothing overwritten": {
			objects: []client.Object{broken},
			want:    outcome{Err: true, SecretCert: string(existing.certPEM), CAIsPresent: true},
		},
		"an expired CA: an error, nothing overwritten": {
			objects: []client.Object{caSecret(t, expired)},
			want:    outcome{Err: true, SecretCert: string(expired.certPEM), CAIsPresent: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.objects...)
			if tc.createFirst != nil {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if _, ok := obj.(*corev1.Secret); ok {
						if err := c.Create(ctx, tc.createFirst.DeepCopyObject().(client.Object)); err != nil {
							return err
						}
						return apierrors.NewAlreadyExists(corev1.Resource("secrets"), obj.GetName())
					}
					return c.Create(ctx, obj, opts...)
				}})
			}
			c := b.Build()
			ca, err := EnsureCA(context.Background(), c, ns)
			got := outcome{Err: err != nil}
			var s corev1.Secret
			got.CAIsPresent = c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: CAName}, &s) == nil
			got.SecretCert = string(s.Data[corev1.TLSCertKey])
			var cm corev1.ConfigMap
			if c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: CAName}, &cm) == nil {
				got.ConfigMap = cm.Data
			}
			want := tc.want
			if ca != nil {
				got.Returned = string(ca.CertPEM())
				made := string(ca.CertPEM())
				// The CA this call made itself stands where want says "".
				if want.SecretCert == "" && !want.Err {
					want.Returned, want.SecretCert = made, made
					want.ConfigMap = map[string]string{CAConfigMapKey: made}
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("EnsureCA (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestEnsureCAReturnsTheStoredKey: a CA read back signs with the stored
// key, so certificates it issues verify against the published one.
func TestEnsureCAReturnsTheStoredKey(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	first, err := EnsureCA(context.Background(), c, ns)
	if err != nil {
		t.Fatal(err)
	}
	second, err := EnsureCA(context.Background(), c, ns)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := second.issueClient(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyClient(first.certPEM, cert); err != nil {
		t.Errorf("a certificate of the CA read back does not verify against the one published first: %v", err)
	}
}
