// Package control serves an instance's control socket: HTTP over a unix
// socket next to the app socket, for the app to ask who it is and to store
// its own timers. Every request must carry the instance's admin token; it
// is re-read for each request so a rotated token applies at once.
package control

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-logr/logr"

	"github.com/unitlet/unitlet/runtime/evloop"
	"github.com/unitlet/unitlet/runtime/instancefs"
)

// MaxBody bounds a request body; the app's timers are small.
const MaxBody = 1 << 20

// Identity is what GET /v1/instance reports.
type Identity struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Host       string `json:"host"`
	Generation int64  `json:"generation"`
}

// Config is one generation's control server.
type Config struct {
	Identity Identity
	// Token returns the instance's current admin token; called per request.
	Token func() (string, error)
	// Fence guards writes (see Fence); nil refuses every write.
	Fence Fence
	// State reports the generation's state for GET /v1/instance.
	State func() string
	// Dir and SchedulesFile: where PUT /v1/schedules stores the body,
	// beneath the tenant-writable data dir.
	Dir, SchedulesFile string
	Logger             logr.Logger
}

// InstanceReply is the body of GET /v1/instance.
type InstanceReply struct {
	Identity
	State string `json:"state"`
}

type errorReply struct {
	Error string `json:"error"`
}

// Handler is the control API with authentication in front of every route.
// The routes are one ServeMux for every generation, each request carrying
// its generation's Config: a mux per generation cost a node ~2 MiB of
// heap per thousand.
func Handler(cfg Config) http.Handler {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		routes().ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), cfgKey{}, &cfg)))
	})
	return authenticate(cfg, next)
}

type cfgKey struct{}

// routes is the control API's one ServeMux; a route finds its
// generation's Config in the request's context (Handler puts it there).
var routes = sync.OnceValue(func() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/instance", func(w http.ResponseWriter, r *http.Request) {
		cfg := r.Context().Value(cfgKey{}).(*Config)
		state := "unknown"
		if cfg.State != nil {
			state = cfg.State()
		}
		reply(w, http.StatusOK, InstanceReply{Identity: cfg.Identity, State: state})
	})
	mux.HandleFunc("PUT /v1/schedules", func(w http.ResponseWriter, r *http.Request) {
		putSchedules(w, r, r.Context().Value(cfgKey{}).(*Config))
	})
	return mux
})

func putSchedules(w http.ResponseWriter, r *http.Request, cfg *Config) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		reply(w, http.StatusRequestEntityTooLarge, errorReply{"body over 1 MiB"})
		return
	}
	if !json.Valid(body) {
		reply(w, http.StatusBadRequest, errorReply{"body is not JSON"})
		return
	}
	if cfg.Fence == nil {
		reply(w, http.StatusConflict, errorReply{ErrNotServing.Error()})
		return
	}
	err = cfg.Fence(func() error {
		return instancefs.WriteAtomic(cfg.Dir, cfg.SchedulesFile, body, 0o600)
	})
	switch {
	case errors.Is(err, ErrNotServing):
		reply(w, http.StatusConflict, errorReply{err.Error()})
	case err != nil:
		cfg.Logger.Error(err, "storing schedules")
		reply(w, http.StatusInternalServerError, errorReply{"storing schedules failed"})
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// authenticate lets a request through only with the instance's current
// token, compared in constant time. An empty or unreadable token admits
// no one.
func authenticate(cfg Config, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want, err := cfg.Token()
		if err != nil {
			cfg.Logger.Error(err, "reading admin token") // the error names the file, never the token
			reply(w, http.StatusServiceUnavailable, errorReply{"admin token unavailable"})
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="unitlet"`)
			reply(w, http.StatusUnauthorized, errorReply{"missing or wrong admin token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Server is a generation's control socket, served by the process's one
// HTTP server (see mux.go).
type Server struct {
	ln         net.Listener
	path       string
	handler    http.Handler
	reg        *evloop.Reg   // the accept wait in the event loop; nil: acceptDone's goroutine
	acceptDone chan struct{} // closed once the fallback accept goroutine ended

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // handed to the shared server, not yet closed
	closed bool
}

// Listen binds path with owner uid:gid and mode 0660 (owner and socket
// group), and serves Handler(cfg) until Close. path's dir is the app's to
// write: the socket is bound, chowned and chmoded in stage (root's alone,
// on the same file system) and only then renamed to path
// (instancefs.BindStaged), so no file the app swaps in is ever touched.
func Listen(stage, path string, uid, gid int, cfg Config) (*Server, error) {
	f, err := instancefs.BindStaged(stage, filepath.Dir(path), filepath.Base(path), uid, gid, 0o660, 128)
	if err != nil {
		return nil, err
	}
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, path: path, handler: Handler(cfg), conns: map[net.Conn]struct{}{}}
	s.serve()
	return s, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Close stops serving, drops open connections and removes the socket's
// name (never following it: the app may have swapped it).
func (s *Server) Close() error {
	if s.reg != nil {
		s.reg.Remove() // no connection is handed over after this
	}
	err := s.ln.Close()
	if s.acceptDone != nil {
		<-s.acceptDone
	}
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	if d, derr := instancefs.OpenDir(filepath.Dir(s.path)); derr == nil {
		_ = instancefs.RemoveBeneath(d, filepath.Base(s.path))
		d.Close()
	}
	return err
}
