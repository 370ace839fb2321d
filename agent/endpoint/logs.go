package endpoint

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/runtime/logs"
	"github.com/unitlet/unitlet/runtime/node"
)

// serveLog streams the Instance's kept output, oldest first, as the log
// file stores it (time, source, text): the last tailLines of it when
// asked, cut after limitBytes; with follow, new lines as they come,
// across rotations and swaps, until the caller goes away or the limit.
func (s *Server) serveLog(w http.ResponseWriter, r *http.Request, ns, name string) {
	q, err := agentapi.ParseLogQuery(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f, err := logFilter(q, time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if _, ok := s.instance(w, r, ns, name); !ok {
		return
	}
	path, keep, err := s.Node.LogFile(node.InstanceRef{Namespace: ns, Name: name})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	out := logs.LimitWriter(bw, q.LimitBytes)
	flusher := http.NewResponseController(w)
	emit := func(rec logs.Record) error {
		if _, err := io.WriteString(out, rec.Line()+"\n"); err != nil {
			return err
		}
		if !q.Follow {
			return nil
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		return flusher.Flush()
	}
	err = logs.Reader{Tail: q.TailLines}.Read(r.Context(), path, keep, f, q.Follow, emit)
	if errors.Is(err, logs.ErrLimit) {
		err = nil // what was asked for was sent
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if err != nil && r.Context().Err() == nil {
		s.Log.Info("log stream ended", "namespace", ns, "name", name, "err", err.Error())
	}
}

// logFilter is the query as the reader's filter; since is a time or a
// duration back from now.
func logFilter(q agentapi.LogQuery, now time.Time) (logs.Filter, error) {
	role, sidecar, err := logs.ParseRole(q.Role)
	if err != nil {
		return logs.Filter{}, err
	}
	f := logs.Filter{Role: role, Sidecar: sidecar, Generation: q.Generation}
	if q.Since != "" {
		if d, err := time.ParseDuration(q.Since); err == nil && d >= 0 {
			f.Since = now.Add(-d)
		} else if t, err := time.Parse(time.RFC3339Nano, q.Since); err == nil {
			f.Since = t
		} else {
			return logs.Filter{}, fmt.Errorf("since=%q: want a duration (10m) or an RFC 3339 time", q.Since)
		}
	}
	if err := f.Validate(); err != nil {
		return logs.Filter{}, err
	}
	return f, nil
}
