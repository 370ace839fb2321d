// Package relay is the cluster side's aggregated API behind `kubectl
// unitlet logs/run` (`unitlet relay`, its own Deployment): the API server
// authenticates the user and proxies instances/log and instances/run (and
// /exec) of group subresources.hosting.unitlet.dev here; the relay takes
// the user from the front-proxy headers, asks the API server whether they
// may (SubjectAccessReview), and reaches the Instance's node agent over
// mutual TLS with a client certificate of its own (internal/relaytrust).
// No user credential ever reaches a node, as with `kubectl logs/exec`
// and the kubelet.
package relay

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/unitlet/unitlet/api/subresources"
	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/logflags"
	"github.com/unitlet/unitlet/internal/relaytrust"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/version"
)

// The aggregated API's names (api/subresources holds the group's).
const (
	Group          = subresources.Group
	Version        = subresources.Version
	APIServiceName = subresources.APIServiceName
	// ServiceName is the relay's Service in its namespace.
	ServiceName = "unitlet-relay"

	resourceInstances = subresources.Resource
)

// ServingName is the DNS name the API server verifies the relay's
// serving certificate against: its Service's.
func ServingName(service, namespace string) string { return service + "." + namespace + ".svc" }

// Options is what the relay needs to run.
type Options struct {
	Config *rest.Config
	// Listener is where it serves; nil: Listen.
	Listener net.Listener
	Listen   string
	// Namespace holds the relay CA and the Service.
	Namespace  string
	Service    string
	APIService string
	Log        logr.Logger
}

// Main runs `unitlet relay` until SIGTERM and returns the exit code.
func Main(args []string) int {
	o, kubeconfig, zo, err := parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "unitlet relay: %v\n", err)
		return 2
	}
	o.Log = zap.New(zap.UseFlagOptions(&zo))
	ctrl.SetLogger(o.Log)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if kubeconfig == "" {
		cfg, err = ctrl.GetConfig()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "unitlet relay: kubernetes client configuration: %v\n", err)
		return 1
	}
	o.Config = cfg
	if err := Run(ctrl.SetupSignalHandler(), o); err != nil {
		fmt.Fprintf(os.Stderr, "unitlet relay: %v\n", err)
		return 1
	}
	return 0
}

// parse reads the relay's flags: its Options, the kubeconfig and
// controller-runtime's --zap-* logging flags.
func parse(args []string) (o Options, kubeconfig string, zo zap.Options, err error) {
	fs := flag.NewFlagSet("unitlet relay", flag.ContinueOnError)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster configuration or $KUBECONFIG")
	fs.StringVar(&o.Listen, "listen", ":8443", "address of the HTTPS server the API server proxies to")
	fs.StringVar(&o.Namespace, "namespace", "unitlet-system", "namespace of the relay's Service and of the relay CA (Secret and ConfigMap "+relaytrust.CAName+")")
	fs.StringVar(&o.Service, "service", ServiceName, "the relay's Service, whose DNS name the serving certificate is for")
	fs.StringVar(&o.APIService, "apiservice", APIServiceName, "the APIService whose caBundle the relay sets to its serving CA at start")
	logflags.Bind(fs, &zo)
	if err = fs.Parse(args); err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return o, kubeconfig, zo, err
}

// Run serves until ctx ends: it sets up the front-proxy authentication,
// the relay CA, a fresh serving certificate (written into the
// APIService's caBundle) and the cache of Instances and Enrollments.
func Run(ctx context.Context, o Options) error {
	direct, err := client.New(o.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(o.Config)
	if err != nil {
		return err
	}
	auth, err := NewAuth(ctx, kc)
	if err != nil {
		return err
	}
	ca, err := relaytrust.EnsureCA(ctx, direct, o.Namespace)
	if err != nil {
		return err
	}
	reader, err := startCache(ctx, o.Config)
	if err != nil {
		return err
	}
	ln := o.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", o.Listen); err != nil {
			return fmt.Errorf("listen %s: %w", o.Listen, err)
		}
	}
	name := ServingName(o.Service, o.Namespace)
	cert, caPEM, err := relaytrust.SelfSignedServing(name)
	if err != nil {
		ln.Close()
		return err
	}
	if err := setCABundle(ctx, direct, o.APIService, caPEM); err != nil {
		ln.Close()
		return err
	}
	s := &Server{Auth: auth, Agents: NewAgents(reader, ca.ClientCertificate()), Log: o.Log}
	o.Log.Info("relay serving", "version", version.Get(), "address", ln.Addr().String(), "servingName", name, "apiService", o.APIService)
	return s.Serve(ctx, ln, cert)
}

// startCache follows Instances and Enrollments, the two the relay reads
// on every request, and waits for its first lists.
func startCache(ctx context.Context, cfg *rest.Config) (client.Reader, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	for _, obj := range []client.Object{&v1.Instance{}, &v1.Enrollment{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if !c.WaitForCacheSync(sctx) {
		return nil, errors.New("cache: Instances and Enrollments not listed in time (may the relay list them?)")
	}
	return c, nil
}
