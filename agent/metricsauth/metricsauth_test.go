package metricsauth

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/unitlet/unitlet/internal/testkit/testenv"
)

// env is the control plane the package's tests share.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// reviews counts the TokenReviews and SubjectAccessReviews a Guard sends.
type reviews struct{ tokens, access atomic.Int32 }

func (r *reviews) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		switch {
		case strings.HasSuffix(req.URL.Path, "/tokenreviews"):
			r.tokens.Add(1)
		case strings.HasSuffix(req.URL.Path, "/subjectaccessreviews"):
			r.access.Add(1)
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// guarded serves "metrics" behind a Guard asking the test's API server
// with cfg (the agent's own credentials).
func guarded(t *testing.T, cfg *rest.Config) *httptest.Server {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	filter, err := Provider(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	h, err := filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") }))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// scrape is one request's status and body.
func scrape(t *testing.T, srv *httptest.Server, method, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// tokenOf makes service account name in default and returns a token of it.
func tokenOf(t *testing.T, kc kubernetes.Interface, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	if _, err := kc.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kc.CoreV1().ServiceAccounts("default").CreateToken(ctx, name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// TestGuard: only a token the API server accepts, of a user allowed to
// GET /metrics, reads them; the API server is asked once per token and
// decision while its answer is kept.
func TestGuard(t *testing.T) {
	ctx := context.Background()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := kc.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "scraper"}}}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scraper, other := tokenOf(t, kc, "scraper"), tokenOf(t, kc, "other")

	var sent reviews
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(sent.wrap)
	srv := guarded(t, cfg)
	for name, tc := range map[string]struct {
		method, token string
		wantCode      int
		wantBody      string
	}{
		"no token":                  {method: http.MethodGet, wantCode: http.StatusUnauthorized, wantBody: "Unauthorized"},
		"a token the API refuses":   {method: http.MethodGet, token: "not-a-token", wantCode: http.StatusUnauthorized, wantBody: "Unauthorized"},
		"a user without the role":   {method: http.MethodGet, token: other, wantCode: http.StatusForbidden, wantBody: "Authorization denied for user system:serviceaccount:default:other"},
		"the scraper":               {method: http.MethodGet, token: scraper, wantCode: http.StatusOK, wantBody: "metrics"},
		"the scraper, another verb": {method: http.MethodPost, token: scraper, wantCode: http.StatusForbidden, wantBody: "Authorization denied for user system:serviceaccount:default:scraper"},
	} {
		t.Run(name, func(t *testing.T) {
			for i := range 2 {
				code, body := scrape(t, srv, tc.method, tc.token)
				if code != tc.wantCode || body != tc.wantBody {
					t.Errorf("request %d: %d %q, want %d %q", i+1, code, body, tc.wantCode, tc.wantBody)
				}
			}
		})
	}
	// Three tokens (the scraper's, other's, the refused one), each
	// reviewed once; three decisions (other's GET, the scraper's GET and
	// POST), each asked once: the second of each request was answered
	// from what was kept.
	if got, want := [2]int32{sent.tokens.Load(), sent.access.Load()}, [2]int32{3, 3}; got != want {
		t.Errorf("reviews sent (tokens, access): %v, want %v", got, want)
	}
}

// TestGuardWithoutTheAPI: when the API server cannot be asked, nothing
// is served and the caller is told the check failed, not that it is
// refused.
func TestGuardWithoutTheAPI(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	srv := guarded(t, &rest.Config{Host: gone.URL})
	if code, body := scrape(t, srv, http.MethodGet, "some-token"); code != http.StatusInternalServerError || body != "Authentication failed" {
		t.Errorf("%d %q, want 500 \"Authentication failed\"", code, body)
	}
}
