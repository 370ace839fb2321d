package relay

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Server is the relay's HTTPS server.
type Server struct {
	Auth   *Auth
	Agents *Agents
	Log    logr.Logger
}

// instancePrefix is where an Instance's subresources are served.
const instancePrefix = "/apis/" + Group + "/" + Version + "/namespaces/{namespace}/instances/{name}/"

// Handler routes the relay's paths; everything but health needs a user
// the API server vouched for.
func (s *Server) Handler() http.Handler {
	api := http.NewServeMux()
	api.HandleFunc("/apis", s.serveGroupList)
	api.HandleFunc("/apis/"+Group, s.serveGroup)
	api.HandleFunc("/apis/"+Group+"/"+Version, s.serveResources)
	api.HandleFunc(instancePrefix+subLog, s.serveLog)
	api.HandleFunc(instancePrefix+subRun, s.serveRun)
	api.HandleFunc(instancePrefix+subExec, s.serveRun)
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, apierrors.NewNotFound(metav1.SchemeGroupVersion.WithResource("path").GroupResource(), r.URL.Path))
	})
	mux := http.NewServeMux()
	for _, p := range []string{"/healthz", "/readyz", "/livez"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	}
	mux.Handle("/", s.authenticated(api))
	return mux
}

// Serve serves on ln with cert until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cert tls.Certificate) error {
	srv := &http.Server{
		Handler: s.Handler(),
		// A client certificate is asked for, not required: health probes
		// come without one; the authenticator verifies it against the
		// front-proxy CA on every other request.
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("relay server: %w", err)
	}
	return nil
}

type userKey struct{}

// authenticated answers 401 unless the request carries a user the API
// server vouched for, and hands that user on.
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := s.Auth.authenticate(r)
		if err != nil {
			writeStatus(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

func userOf(r *http.Request) user.Info { return r.Context().Value(userKey{}).(user.Info) }

// writeStatus answers with err as a metav1.Status, the way the API server
// answers: its code, its reason, its message.
func writeStatus(w http.ResponseWriter, err error) {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		se = apierrors.NewInternalError(err)
	}
	st := se.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	writeJSON(w, int(st.Code), st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// methodNotAllowed is the Status for a method a path does not take.
// admit is what every subresource asks first: a method it serves, and
// the user's right to verb on it; false once it has answered the refusal.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, verb, sub string, methods ...string) (user.Info, bool) {
	if !slices.Contains(methods, r.Method) {
		writeStatus(w, methodNotAllowed(sub, r.Method))
		return nil, false
	}
	u := userOf(r)
	if err := s.Auth.authorize(r.Context(), u, verb, sub, r.PathValue("namespace"), r.PathValue("name")); err != nil {
		writeStatus(w, err)
		return nil, false
	}
	return u, true
}

func methodNotAllowed(sub, method string) error {
	return apierrors.NewMethodNotSupported(instancesResource(sub), method)
}

// instancesResource names an Instance subresource in errors.
func instancesResource(sub string) schema.GroupResource {
	return schema.GroupResource{Group: Group, Resource: resourceInstances + "/" + sub}
}
