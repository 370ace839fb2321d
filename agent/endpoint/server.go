// Package endpoint is the agent's own HTTPS endpoint for `kubectl
// unitlet`: an Instance's logs and one-off runs in its environment. Like
// the kubelet's behind the API server, it serves one caller: the relay
// (the aggregated API that authenticates and authorizes users), proven
// by its client certificate of the relay CA. No user credential reaches
// it. It publishes where it listens, with the certificate it made for
// itself, in the node's Enrollment.
package endpoint

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/internal/relaytrust"
	"github.com/unitlet/unitlet/runtime/node"
)

// Node is what the server asks of the node runtime.
type Node interface {
	Run(ctx context.Context, req node.RunRequest) node.RunResult
	LogFile(inst node.InstanceRef) (path string, keep int, err error)
}

// Server serves one node's Instances.
type Server struct {
	// Addr is where it listens (host:port; port 0 picks one).
	Addr string
	// Advertise is the host callers dial ("" : Addr's host when it names
	// one, else the node's first global address).
	Advertise string
	NodeName  string
	// Client reads Instances (the agent's cache) and writes the endpoint.
	Client client.Client
	// RelayCA reads ConfigMap unitlet-relay-ca in RelayCANamespace, the
	// CA of the relay's client certificate (a direct reader: see
	// relaytrust.WatchCA).
	RelayCA          client.Reader
	RelayCANamespace string
	Node             Node
	Recorder         events.EventRecorder
	// Grace is a run's SIGTERM-to-kill time when its caller goes away.
	Grace time.Duration
	Log   logr.Logger
}

// Start serves until ctx ends (manager.Runnable).
func (s *Server) Start(ctx context.Context) error {
	relay := relaytrust.WatchCA(ctx, s.RelayCA, s.RelayCANamespace)
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("agent server: listen %s: %w", s.Addr, err)
	}
	cert, caPEM, err := selfSigned(agentapi.ServerName(s.NodeName))
	if err != nil {
		ln.Close()
		return fmt.Errorf("agent server: %w", err)
	}
	addr, err := advertised(s.Advertise, ln.Addr().(*net.TCPAddr))
	if err != nil {
		ln.Close()
		return fmt.Errorf("agent server: %w", err)
	}
	srv := &http.Server{
		Handler:           s.routes(),
		TLSConfig:         serverTLS(cert, relay.VerifyPeerCertificate),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		// Streams end with their requests' contexts (BaseContext); runs
		// prove their end before the handler returns.
		sctx, cancel := context.WithTimeout(context.Background(), s.Grace+35*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go s.publishUntilDone(ctx, addr, caPEM)
	s.Log.Info("serving logs and runs", "address", ln.Addr().String(), "advertised", addr)
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("agent server: %w", err)
	}
	return nil
}

// serverTLS requires a client certificate and lets verify alone judge it:
// the relay's, of the relay CA (not the system roots, not the cluster's
// client CA). Anyone else fails the handshake and sends no request.
func serverTLS(cert tls.Certificate, verify func([][]byte, [][]*x509.Certificate) error) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAnyClientCert, VerifyPeerCertificate: verify,
	}
}

// NeedLeaderElection: every agent serves its own node.
func (s *Server) NeedLeaderElection() bool { return false }

func (s *Server) routes() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns, name, sub, err := agentapi.ParsePath(r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		switch {
		case sub == agentapi.SubresourceLog && r.Method == http.MethodGet:
			s.serveLog(w, r, ns, name)
		case sub == agentapi.SubresourceRun && r.Method == http.MethodPost:
			s.serveRun(w, r, ns, name)
		case sub == agentapi.SubresourceLog || sub == agentapi.SubresourceRun:
			http.Error(w, fmt.Sprintf("%s is not allowed on %s", r.Method, sub), http.StatusMethodNotAllowed)
		default:
			http.Error(w, fmt.Sprintf("no such endpoint %q (log, run)", sub), http.StatusNotFound)
		}
	})
}

// advertised is host:port for callers: the advertised host, or the
// listener's own when it names one, else the node's first global unicast
// address.
func advertised(host string, l *net.TCPAddr) (string, error) {
	port := fmt.Sprint(l.Port)
	if host != "" {
		return net.JoinHostPort(host, port), nil
	}
	if !l.IP.IsUnspecified() {
		return net.JoinHostPort(l.IP.String(), port), nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("the node's addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			return net.JoinHostPort(n.IP.String(), port), nil
		}
	}
	return "", errors.New("no address to advertise: set --advertise-address")
}
