package endpoint

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
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/agentapi"
)

// auth asks the API server who a caller is and what they may do, with
// the kubelet's caches: an answer is reused for a while, so a follow or
// a burst of runs costs one review. Like the kubelet's, it also takes a
// client certificate the cluster's client CA signed.
type auth struct {
	authn authenticator.Request
	authz authorizer.Authorizer
}

// reviewBackoff retries a review the API server could not answer.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// The cluster's client CA, as the API server publishes it for servers it
// delegates to: a caller with a client certificate it signed is who the
// certificate names, as at the API server.
const (
	clientCANamespace = "kube-system"
	clientCAConfigMap = "extension-apiserver-authentication"
	clientCAKey       = "client-ca-file"
)

// newAuth builds the authenticator (client certificates of the cluster's
// client CA, then bearer tokens by TokenReview) and the authorizer
// (SubjectAccessReview). The client CA is followed until ctx ends.
func newAuth(ctx context.Context, cfg *rest.Config, hc *http.Client) (*auth, error) {
	authnClient, err := authenticationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	clientCA, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", clientCANamespace, clientCAConfigMap, clientCAKey, kc)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	// An agent that may not read it (no RoleBinding to
	// extension-apiserver-authentication-reader) still takes tokens.
	_ = clientCA.RunOnce(ctx)
	go clientCA.Run(ctx, 1)
	authzClient, err := authorizationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                          &apiserver.AnonymousAuthConfig{Enabled: false},
		ClientCertificateCAContentProvider: clientCA,
		CacheTTL:                           time.Minute,
		TokenAccessReviewClient:            authnClient,
		TokenAccessReviewTimeout:           10 * time.Second,
		WebhookRetryBackoff:                &reviewBackoff,
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

// accepted says what the agent takes as credentials, for a 401.
const accepted = "the agent accepts bearer tokens the API server's TokenReview accepts, and client certificates of the cluster's client CA"

// allowed answers the request itself (401, 403, 500, with a message) and
// returns false unless the caller may verb the Instance's subresource.
func (a *auth) allowed(w http.ResponseWriter, r *http.Request, verb, sub, ns, name string) (user.Info, bool) {
	res, ok, err := a.authn.AuthenticateRequest(r)
	switch {
	case err != nil && !ok:
		http.Error(w, "Unauthorized: "+err.Error()+" ("+accepted+")", http.StatusUnauthorized)
		return nil, false
	case !ok:
		http.Error(w, "Unauthorized: no credentials ("+accepted+")", http.StatusUnauthorized)
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
