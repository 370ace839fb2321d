package relay_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/unitlet/unitlet/internal/agentapi"
	"github.com/unitlet/unitlet/internal/relaytrust"
)

// testAgent is the smallest agent speaking agentapi over mutual TLS: it
// takes only a client certificate of the relay CA named
// agentapi.RelayClientName, fails any request carrying a user's
// credential, and answers with what it was asked.
type testAgent struct {
	addr    string
	caPEM   []byte
	release chan struct{} // a follow's second line waits for it
}

func startTestAgent(t *testing.T, node string, relayCAPEM []byte) *testAgent {
	t.Helper()
	cert, caPEM, err := relaytrust.SelfSignedServing(agentapi.ServerName(node))
	if err != nil {
		t.Fatal(err)
	}
	relayCA := x509.NewCertPool()
	if !relayCA.AppendCertsFromPEM(relayCAPEM) {
		t.Fatal("no relay CA certificate")
	}
	a := &testAgent{caPEM: caPEM, release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/namespaces/{ns}/instances/{name}/log", a.serveLog)
	mux.HandleFunc("POST /v1/namespaces/{ns}/instances/{name}/run", a.serveRun)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: noUserCredentials(mux), TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: relayCA, ClientAuth: tls.RequireAndVerifyClientCert,
		VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
			if cn := chains[0][0].Subject.CommonName; cn != agentapi.RelayClientName {
				return fmt.Errorf("client %q is not the relay", cn)
			}
			return nil
		},
	}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	a.addr = ln.Addr().String()
	return a
}

// noUserCredentials fails a request that carries anything of the user:
// the relay must not pass it on.
func noUserCredentials(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range []string{"Authorization", "X-Remote-User", "X-Remote-Group", "Impersonate-User"} {
			if r.Header.Get(h) != "" {
				http.Error(w, "a user credential reached the agent: "+h, http.StatusTeapot)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// serveLog answers with the query it got; a follow sends a second line
// once released.
func (a *testAgent) serveLog(w http.ResponseWriter, r *http.Request) {
	q, err := agentapi.ParseLogQuery(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.PathValue("name") != "web" {
		http.Error(w, "no such Instance on this node", http.StatusNotFound)
		return
	}
	fmt.Fprintf(w, "log of %s/%s since=%s tail=%d limit=%d generation=%d role=%s\n",
		r.PathValue("ns"), r.PathValue("name"), q.Since, q.TailLines, q.LimitBytes, q.Generation, q.Role)
	if !q.Follow {
		return
	}
	_ = http.NewResponseController(w).Flush()
	select {
	case <-a.release:
		fmt.Fprintln(w, "second line")
	case <-r.Context().Done():
	}
}

// serveRun: "greet" writes to both streams and exits 3; "cat" echoes its
// stdin and exits 0; "tty" is serveTerminal.
func (a *testAgent) serveRun(w http.ResponseWriter, r *http.Request) {
	body := bufio.NewReader(r.Body)
	req, err := agentapi.ReadRunRequest(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_ = http.NewResponseController(w).EnableFullDuplex()
	w.Header().Set("Content-Type", agentapi.RunContentType)
	w.WriteHeader(http.StatusOK)
	exit := agentapi.RunExit{Name: "run-test", Generation: 1}
	switch req.Command[0] {
	case "greet":
		_ = agentapi.WriteFrame(w, agentapi.FrameStdout, []byte("hello "+req.Command[1]+"\n"))
		_ = agentapi.WriteFrame(w, agentapi.FrameStderr, []byte("oops\n"))
		exit.ExitCode = 3
	case "cat":
		in, _ := io.ReadAll(body)
		_ = agentapi.WriteFrame(w, agentapi.FrameStdout, in)
	case "tty":
		if exit.ExitCode = serveTerminal(w, r, body, req); exit.ExitCode < 0 {
			return
		}
	default:
		_ = agentapi.WriteFrame(w, agentapi.FrameError, []byte("no such command"))
		return
	}
	b, _ := json.Marshal(exit)
	_ = agentapi.WriteFrame(w, agentapi.FrameExit, b)
}

// serveTerminal, for a TTY run, says its first size, then the first
// resize it gets, and exits 4 (-1: no terminal asked for, or the caller
// went away first).
func serveTerminal(w http.ResponseWriter, r *http.Request, body io.Reader, req agentapi.RunRequest) int {
	rc := http.NewResponseController(w)
	say := func(format string, a ...any) {
		_ = agentapi.WriteFrame(w, agentapi.FrameStdout, []byte(fmt.Sprintf(format, a...)))
		_ = rc.Flush()
	}
	if !req.TTY || req.Size == nil {
		_ = agentapi.WriteFrame(w, agentapi.FrameError, []byte(fmt.Sprintf("no terminal, or no size: %+v", req)))
		return -1
	}
	say("size %dx%d\r\n", req.Size.Width, req.Size.Height)
	resized := make(chan agentapi.TerminalSize, 1)
	go func() {
		_ = agentapi.ReadTerminalInput(body, io.Discard, func(s agentapi.TerminalSize) {
			select {
			case resized <- s:
			default:
			}
		})
	}()
	select {
	case s := <-resized:
		say("resized %dx%d\r\n", s.Width, s.Height)
		return 4
	case <-r.Context().Done():
		return -1
	}
}
