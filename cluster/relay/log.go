package relay

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/unitlet/unitlet/internal/agentapi"
)

// serveLog streams the agent's log of the Instance, flushed as it comes.
func (s *Server) serveLog(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	u, ok := s.admit(w, r, "get", subLog, http.MethodGet)
	if !ok {
		return
	}
	q, err := logQuery(r.URL.Query())
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	agent, err := s.Agents.For(r.Context(), ns, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	resp, err := agent.do(r.Context(), http.MethodGet, agentapi.LogPath(ns, name), q.Encode(), nil, subLog, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if err := flushCopy(w, resp.Body); err != nil && r.Context().Err() == nil {
		s.Log.Info("log stream cut", "namespace", ns, "name", name, "user", u.GetName(), "node", agent.node, "error", err.Error())
	}
}

// flushCopy copies the agent's answer to the user, flushing each read: a
// follow shows each line as the agent sends it.
func flushCopy(w http.ResponseWriter, r io.Reader) error {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if ferr := rc.Flush(); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// logQuery maps pods/log's query (sinceSeconds, sinceTime, tailLines,
// limitBytes, follow) and the Instance's own (generation, role) onto the
// agent's. What the agent cannot do is refused, not ignored.
func logQuery(v url.Values) (agentapi.LogQuery, error) {
	var q agentapi.LogQuery
	for _, key := range []string{"previous", "timestamps"} {
		if b, _ := strconv.ParseBool(v.Get(key)); b {
			return q, fmt.Errorf("%s=true: an Instance's log has no such view (generation= picks a generation's lines)", key)
		}
	}
	var err error
	if q.Follow, err = boolParam(v, "follow"); err != nil {
		return q, err
	}
	switch ss, st := v.Get("sinceSeconds"), v.Get("sinceTime"); {
	case ss != "" && st != "":
		return q, errors.New("at most one of sinceTime or sinceSeconds may be given")
	case ss != "":
		n, err := strconv.ParseInt(ss, 10, 64)
		if err != nil || n <= 0 {
			return q, fmt.Errorf("sinceSeconds=%q: want a positive number of seconds", ss)
		}
		q.Since = (time.Duration(n) * time.Second).String()
	case st != "":
		t, err := time.Parse(time.RFC3339, st)
		if err != nil {
			return q, fmt.Errorf("sinceTime=%q: want an RFC 3339 time: %w", st, err)
		}
		q.Since = t.UTC().Format(time.RFC3339Nano)
	}
	for key, dst := range map[string]*int64{"tailLines": &q.TailLines, "limitBytes": &q.LimitBytes, "generation": &q.Generation} {
		s := v.Get(key)
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return q, fmt.Errorf("%s=%q: want a positive number (leave it out for all)", key, s)
		}
		*dst = n
	}
	q.Role = v.Get("role")
	return q, nil
}

// boolParam reads a true/false parameter ("" is false).
func boolParam(v url.Values, key string) (bool, error) {
	s := v.Get(key)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", key, s)
	}
	return b, nil
}
