package agentserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/agentapi"
)

// auth asks the API server who a caller is and what they may do, with
// the kubelet's caches: an answer is reused for a while, so a follow or
// a burst of runs costs one review.
type auth struct {
	authn authenticator.Request
	authz authorizer.Authorizer
}

// reviewBackoff retries a review the API server could not answer.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

func newAuth(cfg *rest.Config, hc *http.Client) (*auth, error) {
	authnClient, err := authenticationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authzClient, err := authorizationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                 time.Minute,
		TokenAccessReviewClient:  authnClient,
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &reviewBackoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authzClient,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       &reviewBackoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	return &auth{authn: authn, authz: authz}, nil
}

// allowed answers the request itself (401, 403, 500, with a message) and
// returns false unless the caller may verb the Instance's subresource.
func (a *auth) allowed(w http.ResponseWriter, r *http.Request, verb, sub, ns, name string) (user.Info, bool) {
	res, ok, err := a.authn.AuthenticateRequest(r)
	switch {
	case err != nil && !ok:
		http.Error(w, "Unauthorized: "+err.Error()+" (the agent accepts bearer tokens the API server's TokenReview accepts)", http.StatusUnauthorized)
		return nil, false
	case !ok:
		http.Error(w, "Unauthorized: no bearer token (the agent accepts bearer tokens the API server's TokenReview accepts)", http.StatusUnauthorized)
		return nil, false
	}
	attrs := authorizer.AttributesRecord{
		User: res.User, Verb: verb, Namespace: ns, Name: name, ResourceRequest: true,
		APIGroup: v1.GroupVersion.Group, APIVersion: v1.GroupVersion.Version,
		Resource: agentapi.ResourceInstances, Subresource: sub,
	}
	decision, reason, err := a.authz.Authorize(context.WithoutCancel(r.Context()), attrs)
	if err != nil && decision != authorizer.DecisionAllow {
		http.Error(w, fmt.Sprintf("authorization of %s failed: %v", res.User.GetName(), err), http.StatusInternalServerError)
		return nil, false
	}
	if decision != authorizer.DecisionAllow {
		msg := fmt.Sprintf("Forbidden: user %q cannot %s resource \"instances/%s\" in API group %q in the namespace %q",
			res.User.GetName(), verb, sub, v1.GroupVersion.Group, ns)
		if reason != "" {
			msg += ": " + reason
		}
		http.Error(w, msg, http.StatusForbidden)
		return nil, false
	}
	return res.User, true
}
