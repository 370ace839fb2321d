package relay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
)

// Where the API server publishes how it vouches for the users it proxies
// to an aggregated API: the CA of its front-proxy client certificate, the
// names that certificate may carry, and the headers it sets.
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
)

// reviewBackoff retries a review the API server could not answer.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Auth is who a request comes from and what they may do.
type Auth struct {
	// Authn takes the user from the front-proxy headers, and only from a
	// request with a client certificate of the front-proxy CA.
	Authn authenticator.Request
	// Authz asks the API server (SubjectAccessReview), with its answers
	// cached for a while: a burst of runs costs one review.
	Authz authorizer.Authorizer
}

// NewAuth builds the front-proxy authenticator, following the
// extension-apiserver-authentication ConfigMap until ctx ends, and the
// SubjectAccessReview authorizer. No TokenReview: every request reaches
// the relay through the API server, which authenticated the user.
func NewAuth(ctx context.Context, kc kubernetes.Interface) (*Auth, error) {
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("requestheader-client-ca",
		authConfigMapNamespace, authConfigMapName, "requestheader-client-ca-file", kc)
	if err != nil {
		return nil, fmt.Errorf("front-proxy CA: %w", err)
	}
	headers := headerrequest.NewRequestHeaderAuthRequestController(authConfigMapName, authConfigMapNamespace, kc,
		"requestheader-username-headers", "requestheader-uid-headers", "requestheader-group-headers",
		"requestheader-extra-headers-prefix", "requestheader-allowed-names")
	if err := utilerrors.NewAggregate([]error{ca.RunOnce(ctx), headers.RunOnce(ctx)}); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s (does the API server run with --requestheader-client-ca-file, and may the relay read it?): %w",
			authConfigMapNamespace, authConfigMapName, err)
	}
	go ca.Run(ctx, 1)
	go headers.Run(ctx, 1)
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous: &apiserver.AnonymousAuthConfig{Enabled: false},
		RequestHeaderConfig: &authenticatorfactory.RequestHeaderConfig{
			CAContentProvider:   ca,
			AllowedClientNames:  headerrequest.StringSliceProviderFunc(headers.AllowedClientNames),
			UsernameHeaders:     headerrequest.StringSliceProviderFunc(headers.UsernameHeaders),
			UIDHeaders:          headerrequest.StringSliceProviderFunc(headers.UIDHeaders),
			GroupHeaders:        headerrequest.StringSliceProviderFunc(headers.GroupHeaders),
			ExtraHeaderPrefixes: headerrequest.StringSliceProviderFunc(headers.ExtraHeaderPrefixes),
		},
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kc.AuthorizationV1(),
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       &reviewBackoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	return &Auth{Authn: authn, Authz: authz}, nil
}

// authenticate is the request's user, or the error to answer with (401).
func (a *Auth) authenticate(r *http.Request) (user.Info, error) {
	res, ok, err := a.Authn.AuthenticateRequest(r)
	if !ok {
		msg := "the relay serves only requests the API server proxies (a front-proxy client certificate of its requestheader CA)"
		if err != nil {
			msg += ": " + err.Error()
		}
		return nil, apierrors.NewUnauthorized(msg)
	}
	return res.User, nil
}

// authorize returns nil when u may verb the Instance's subresource, else
// the error to answer with (403, or 500 when nobody could say).
func (a *Auth) authorize(ctx context.Context, u user.Info, verb, sub, ns, name string) error {
	attrs := authorizer.AttributesRecord{
		User: u, Verb: verb, Namespace: ns, Name: name, ResourceRequest: true,
		APIGroup: Group, APIVersion: Version, Resource: resourceInstances, Subresource: sub,
	}
	// A review asked for a stream is not cut short when its caller goes.
	decision, reason, err := a.Authz.Authorize(context.WithoutCancel(ctx), attrs)
	if decision == authorizer.DecisionAllow {
		return nil
	}
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("authorization of %s: %w", u.GetName(), err))
	}
	msg := fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q",
		u.GetName(), verb, resourceInstances+"/"+sub, Group, ns)
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: Group, Resource: resourceInstances + "/" + sub}, name, errors.New(msg))
}
