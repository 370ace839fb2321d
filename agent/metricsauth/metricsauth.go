// Package metricsauth guards the agent's metrics endpoint as the kubelet
// guards its own: the caller's bearer token is reviewed by the API server
// (TokenReview), and the request's verb on its path is authorized for
// that user (SubjectAccessReview, as for a non-resource URL).
//
// It does what controller-runtime's metrics/filters does, through
// client-go alone. That filter builds k8s.io/apiserver's delegating
// authenticator and authorizer, which link cel-go, gRPC and
// OpenTelemetry into every node's binary for this one check: about 44 MB
// of the binary and 14 MiB of its resident pages (docs/reports/benchmarks.md).
package metricsauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long an answer of the API server is kept, as controller-runtime's
// filter keeps them: a scraper asks every few seconds, and a revoked
// token or role stops working within these.
const (
	tokenTTL       = time.Minute
	tokenRefuseTTL = 10 * time.Second
	allowTTL       = 5 * time.Minute
	denyTTL        = 30 * time.Second
	// cached bounds each cache: a few scrapers are expected, not many.
	cached = 1024
	// reviewTimeout bounds one review, its retries included.
	reviewTimeout = 10 * time.Second
)

// retryBackoff spaces the retries of a review the API server could not
// answer (an overload, a restart), as the apiserver's webhooks do.
var retryBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Guard authenticates and authorizes each request through the API server.
type Guard struct {
	tokens    authnclient.TokenReviewInterface
	access    authzclient.SubjectAccessReviewInterface
	reviewed  *cache.LRUExpireCache // token's digest → *authnv1.UserInfo, or nil: refused
	decisions *cache.LRUExpireCache // decisionKey → bool
}

// New is a Guard asking the API server of cfg.
func New(cfg *rest.Config, hc *http.Client) (*Guard, error) {
	authn, err := authnclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication client: %w", err)
	}
	authz, err := authzclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization client: %w", err)
	}
	return &Guard{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(),
		reviewed: cache.NewLRUExpireCache(cached), decisions: cache.NewLRUExpireCache(cached)}, nil
}

// Provider is a metrics server's FilterProvider: every request to it is
// guarded.
func Provider(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	g, err := New(cfg, hc)
	if err != nil {
		return nil, err
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return g.Wrap(log, next), nil
	}, nil
}

// Wrap serves next to the requests the API server authenticates and
// authorizes: 401 without a token it accepts, 403 when the user may not
// do this verb on this path, 500 when the API server could not answer.
func (g *Guard) Wrap(log logr.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
		defer cancel()
		user, err := g.authenticate(ctx, req)
		if err != nil {
			log.Error(err, "metrics: the token could not be reviewed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if user == nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		allowed, err := g.authorize(ctx, user, verb, req.URL.Path)
		if err != nil {
			log.Error(err, "metrics: the access could not be reviewed", "user", user.Username)
			http.Error(w, fmt.Sprintf("Authorization for user %s failed", user.Username), http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(4).Info("metrics: access denied", "user", user.Username, "verb", verb, "path", req.URL.Path)
			http.Error(w, fmt.Sprintf("Authorization denied for user %s", user.Username), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// authenticate is the user of the request's bearer token; nil when it
// has none or the API server refuses it.
func (g *Guard) authenticate(ctx context.Context, req *http.Request) (*authnv1.UserInfo, error) {
	token, ok := bearer(req)
	if !ok {
		return nil, nil
	}
	// Keyed by a digest: the cache never holds a caller's credential.
	key := sha256.Sum256([]byte(token))
	if v, ok := g.reviewed.Get(key); ok {
		return v.(*authnv1.UserInfo), nil
	}
	var review *authnv1.TokenReview
	err := retry.OnError(retryBackoff, transientIn(ctx), func() (err error) {
		review, err = g.tokens.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err)
	}
	if !review.Status.Authenticated {
		g.reviewed.Add(key, (*authnv1.UserInfo)(nil), tokenRefuseTTL)
		return nil, nil
	}
	user := review.Status.User
	g.reviewed.Add(key, &user, tokenTTL)
	return &user, nil
}

// authorize says whether user may do verb on the non-resource path.
func (g *Guard) authorize(ctx context.Context, user *authnv1.UserInfo, verb, path string) (bool, error) {
	key := decisionKey(user, verb, path)
	if v, ok := g.decisions.Get(key); ok {
		return v.(bool), nil
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extraOf(user.Extra),
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
	}}
	var review *authzv1.SubjectAccessReview
	err := retry.OnError(retryBackoff, transientIn(ctx), func() (err error) {
		review, err = g.access.Create(ctx, sar, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	ttl := denyTTL
	if allowed {
		ttl = allowTTL
	}
	g.decisions.Add(key, allowed, ttl)
	return allowed, nil
}

// bearer is the request's "Authorization: Bearer" token.
func bearer(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "bearer") && token != ""
}

// decisionKey names one question to the authorizer: who, with which
// groups and extra, does what where.
func decisionKey(user *authnv1.UserInfo, verb, path string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %q %q %q %q", user.Username, user.UID, strings.Join(user.Groups, "\x00"), verb, path)
	for _, k := range slices.Sorted(maps.Keys(user.Extra)) {
		fmt.Fprintf(&b, " %q=%q", k, strings.Join(user.Extra[k], "\x00"))
	}
	return b.String()
}

func extraOf(in map[string]authnv1.ExtraValue) map[string]authzv1.ExtraValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]authzv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = authzv1.ExtraValue(v)
	}
	return out
}

// transientIn says whether a review may succeed when tried again while
// ctx lasts: the API server overloaded, restarting or not reached, not a
// refusal.
func transientIn(ctx context.Context) func(error) bool {
	return func(err error) bool {
		var netErr net.Error
		return ctx.Err() == nil && (apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
			apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || errors.As(err, &netErr))
	}
}
