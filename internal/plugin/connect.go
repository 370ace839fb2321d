package plugin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
)

// agent is the HTTPS client of the node agent serving one Instance.
type agent struct {
	base      *url.URL
	http      *http.Client
	namespace string
	node      string
}

// connect finds the Instance's node and the address and certificate its
// agent published, and returns a client presenting the user's own
// credentials to it.
func connect(ctx context.Context, c common, name string) (*agent, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.context}
	overrides.Context.Namespace = c.namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if cfg.BearerToken == "" && cfg.BearerTokenFile == "" && cfg.ExecProvider == nil && cfg.AuthProvider == nil &&
		len(cfg.CertData) == 0 && cfg.CertFile == "" {
		return nil, fmt.Errorf("the kubeconfig user has no credentials the agent takes: a bearer token (TokenReview) or a client certificate of the cluster's CA")
	}
	kc, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	var inst v1.Instance
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &inst); err != nil {
		return nil, fmt.Errorf("Instance %s/%s: %w", ns, name, err)
	}
	var enr v1.Enrollment
	if err := kc.Get(ctx, client.ObjectKey{Name: inst.Spec.NodeName}, &enr); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("the agent of node %s publishes its address in Enrollment %s, which you may not read (ClusterRole unitlet-agent-endpoint-reader grants it): %w", inst.Spec.NodeName, inst.Spec.NodeName, err)
		}
		return nil, fmt.Errorf("Enrollment %s: %w", inst.Spec.NodeName, err)
	}
	ep := enr.Status.Endpoint
	if ep == nil {
		return nil, fmt.Errorf("the agent of node %s has published no endpoint yet (status.endpoint of Enrollment %s): is it running and hosting?", inst.Spec.NodeName, inst.Spec.NodeName)
	}
	return newAgent(cfg, ep, ns, inst.Spec.NodeName)
}

// newAgent is a client of the endpoint with the user's credentials and
// the agent's own CA and server name in place of the API server's.
func newAgent(user *rest.Config, ep *v1.AgentEndpoint, ns, node string) (*agent, error) {
	cfg := rest.AnonymousClientConfig(user)
	cfg.BearerToken, cfg.BearerTokenFile = user.BearerToken, user.BearerTokenFile
	cfg.ExecProvider, cfg.AuthProvider, cfg.AuthConfigPersister = user.ExecProvider, user.AuthProvider, user.AuthConfigPersister
	cfg.Host = "https://" + ep.Address
	// The agent's own CA and name in place of the API server's; the
	// user's client certificate, if any, as it is.
	cfg.TLSClientConfig = rest.TLSClientConfig{CAData: ep.CABundle, ServerName: ep.ServerName,
		CertData: user.CertData, CertFile: user.CertFile, KeyData: user.KeyData, KeyFile: user.KeyFile}
	cfg.Timeout = 0 // streams last as long as they last
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent client: %w", err)
	}
	base, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	return &agent{base: base, http: &http.Client{Transport: rt}, namespace: ns, node: node}, nil
}

// url is the endpoint's URL for path and query.
func (a *agent) url(path, query string) string {
	u := *a.base
	u.Path, u.RawQuery = path, query
	return u.String()
}
