package plugin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/unitlet/unitlet/api/subresources"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// The aggregated API the relay serves, and its subresources of instances.
const (
	Group       = subresources.Group
	Version     = subresources.Version
	resource    = subresources.Resource
	subLog      = subresources.Log
	subRun      = subresources.Exec
	apiService  = subresources.APIServiceName
	viewRBAC    = "the view role grants get on instances/log"
	editRBAC    = "the edit role grants create on instances/run"
	relayAbsent = "is the unitlet relay installed and its APIService " + apiService + " Available?"
)

// GroupVersion is the aggregated API's group and version.
var GroupVersion = subresources.GroupVersion

// InstanceGVR is where Instances are listed (the CRD, not the relay).
var InstanceGVR = schema.GroupVersionResource{Group: "hosting.unitlet.dev", Version: "v1alpha1", Resource: resource}

// enrollmentGVR is where nodes' Enrollments are listed (cluster-scoped,
// each named after its node).
var enrollmentGVR = InstanceGVR.GroupVersion().WithResource("enrollments")

// target is one Instance the command addresses.
type target struct{ namespace, name string }

func (t target) String() string { return "Instance " + t.name + " in " + t.namespace }

// subresourcePath is the API server's path of an Instance's subresource.
func subresourcePath(t target, sub string) string {
	return "/apis/" + Group + "/" + Version + "/namespaces/" + t.namespace + "/" + resource + "/" + t.name + "/" + sub
}

// restConfig is the user's kubeconfig, as kubectl reads it with flags.
func restConfig(flags *genericclioptions.ConfigFlags) (*rest.Config, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// relayClient is a REST client of the aggregated API on the API server
// of cfg: every request goes to cfg.Host with the user's credentials.
func relayClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &GroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", GroupVersion, err)
	}
	return rc, nil
}

// namespace is the -n flag or the kubeconfig context's namespace.
func namespace(flags *genericclioptions.ConfigFlags) (string, error) {
	ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	return ns, nil
}

// action is what the user asked of an Instance, for messages.
type action struct {
	verb string // "read logs of", "run commands in"
	rbac string // which role grants it
}

var (
	readLogs = action{verb: "read logs of", rbac: viewRBAC}
	runIn    = action{verb: "run commands in", rbac: editRBAC}
)

// describe turns an error from the API server (a metav1.Status) into
// what the user should read; other errors pass as they are.
func describe(err error, a action, t target) error {
	var se apierrors.APIStatus
	if err == nil || !errors.As(err, &se) {
		return err
	}
	st := se.Status()
	return describedError{msg: statusMessage(st, a, t), cause: err}
}

func statusMessage(st metav1.Status, a action, t target) string {
	msg := st.Message
	switch st.Code {
	case http.StatusUnauthorized:
		return fmt.Sprintf("the API server did not accept your credentials (check --context, --user, --token): %s", msg)
	case http.StatusForbidden:
		return fmt.Sprintf("you may not %s %s: %s (403 Forbidden; RBAC: %s)", a.verb, t, msg, a.rbac)
	case http.StatusNotFound:
		if aboutInstance(st.Details, t.name) {
			return fmt.Sprintf("%s not found", t)
		}
		return fmt.Sprintf("the API server does not serve %s for %s (%s): %s", GroupVersion, t, relayAbsent, msg)
	case http.StatusServiceUnavailable:
		return fmt.Sprintf("could not %s %s: the relay or the node's agent is unavailable: %s", a.verb, t, msg)
	}
	return fmt.Sprintf("could not %s %s: %s (%d %s)", a.verb, t, msg, st.Code, st.Reason)
}

// describedError is the server's error as the user should read it; the
// status stays reachable with errors.As.
type describedError struct {
	msg   string
	cause error
}

func (e describedError) Error() string { return e.msg }
func (e describedError) Unwrap() error { return e.cause }

// aboutInstance says whether a NotFound status is about the Instance itself (the
// relay found no such Instance) rather than about the path (no relay).
func aboutInstance(d *metav1.StatusDetails, name string) bool {
	return d != nil && d.Name == name && (d.Kind == resource || d.Kind == "Instance")
}

// retriable says whether a follow should try again after err: the relay
// or the agent was away (5xx, a cut stream), not the request wrong.
func retriable(err error) bool {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Code >= 500 || se.Status().Code == http.StatusTooManyRequests
	}
	return true
}
