package plugin

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"
)

// fakeAPI is an API server as the plugin sees it: the Instances' list and
// the relay's subresources, answered in-process. Beside it, an "agent"
// listener that any direct path to a node would reach: the API server
// publishes its address as an Enrollment's endpoint, as the old plugin
// read it.
type fakeAPI struct {
	t     *testing.T
	srv   *httptest.Server
	agent *httptest.Server
	// agentConns counts every connection made to the agent.
	agentConns atomic.Int64

	mu sync.Mutex
	// seen is each request the API server got: method, path, query,
	// Authorization.
	seen []seenRequest
	// logs answers a log request of an Instance; nil: the default.
	logs func(w http.ResponseWriter, r *http.Request, name string, call int)
	// logCalls counts the log requests per Instance.
	logCalls map[string]int
	// started is told the argv of each run the executor starts.
	started chan []string
}

type seenRequest struct {
	Method, Path, Query, Auth string
	WebSocket                 bool
}

const (
	apiNS     = "apps"
	userToken = "token-of-dev"
	logsBase  = "/apis/subresources.hosting.unitlet.dev/v1/namespaces/" + apiNS + "/instances/"
)

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{t: t, logCalls: map[string]int{}, started: make(chan []string, 8)}
	f.agent = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "a node's agent: no one but the relay may come here", http.StatusUnauthorized)
	}))
	f.agent.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.agentConns.Add(1)
		}
	}
	f.agent.StartTLS()
	t.Cleanup(f.agent.Close)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /apis/hosting.unitlet.dev/v1alpha1/namespaces/"+apiNS+"/instances", f.listInstances)
	mux.HandleFunc("GET /apis/hosting.unitlet.dev/v1alpha1/enrollments/{node}", f.enrollment)
	mux.HandleFunc("GET "+logsBase+"{name}/log", f.log)
	mux.HandleFunc(logsBase+"{name}/exec", f.run)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
	})
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), WebSocket: wsstream.IsWebSocketRequest(r)})
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// listInstances answers app=shop with shop-a and shop-b, else nothing.
func (f *fakeAPI) listInstances(w http.ResponseWriter, r *http.Request) {
	list := metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}}
	if r.URL.Query().Get("labelSelector") == "app=shop" {
		for _, n := range []string{"shop-b", "shop-a"} {
			list.Items = append(list.Items, metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
				ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: apiNS, Labels: map[string]string{"app": "shop"}}})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// enrollment publishes the agent's address, as agents do: a plugin that
// went to nodes would find it here.
func (f *fakeAPI) enrollment(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"apiVersion": "hosting.unitlet.dev/v1alpha1", "kind": "Enrollment",
		"metadata": map[string]any{"name": r.PathValue("node")},
		"status":   map[string]any{"endpoint": map[string]any{"address": f.agent.Listener.Addr().String()}},
	})
}

// log answers a log request: 403 for "secret", else f.logs or two records.
func (f *fakeAPI) log(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f.mu.Lock()
	f.logCalls[name]++
	call := f.logCalls[name]
	logs := f.logs
	f.mu.Unlock()
	if name == "secret" {
		writeStatus(w, apierrors.NewForbidden(schema.GroupResource{Group: Group, Resource: "instances/log"}, name,
			errors.New(`User "dev" cannot get resource "instances/log" in API group "subresources.hosting.unitlet.dev" in the namespace "apps"`)))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	if logs != nil {
		logs(w, r, name, call)
		return
	}
	writeRecords(w, name, 0, 2)
	if r.URL.Query().Get("follow") == "true" {
		<-r.Context().Done()
	}
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// writeRecords writes records from..to-1 of name, as the agent's log holds
// them (time, source, text), and flushes them.
func writeRecords(w http.ResponseWriter, name string, from, to int) {
	for i := from; i < to; i++ {
		fmt.Fprintf(w, "%s g1 %s line %d\n", t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano), name, i)
	}
	w.(http.Flusher).Flush()
}

// run serves pods/exec's protocols with cri-streaming's ServeExec, as the
// relay does; 403 for "secret".
func (f *fakeAPI) run(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "secret" {
		writeStatus(w, apierrors.NewForbidden(schema.GroupResource{Group: Group, Resource: "instances/run"}, name,
			errors.New(`User "dev" cannot create resource "instances/run"`)))
		return
	}
	q := r.URL.Query()
	opts := &remotecommand.Options{Stdin: q.Get("stdin") == "true", Stdout: q.Get("stdout") == "true",
		Stderr: q.Get("stderr") == "true", TTY: q.Get("tty") == "true"}
	remotecommand.ServeExec(w, r, executor{started: f.started}, name, "", "", q["command"], opts,
		time.Minute, 10*time.Second, remotecommand.SupportedStreamingProtocols)
}

// executor runs the test's few commands:
//
//	echo-stdin CODE   stdout "got: " and stdin, stderr "to stderr", exit CODE
//	tty-sizes         on a terminal: its first two sizes, exit 7
//	block             write dots until the caller went away
//	refuse            fail as a relay refusing the run would
type executor struct{ started chan []string }

func (e executor) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	e.started <- cmd
	switch cmd[0] {
	case "echo-stdin":
		fmt.Fprint(out, "got: ")
		if in != nil {
			if _, err := io.Copy(out, in); err != nil {
				return err
			}
		}
		fmt.Fprint(errw, "to stderr")
		code, _ := strconv.Atoi(cmd[1])
		if code != 0 {
			return utilexec.CodeExitError{Err: fmt.Errorf("exit %d", code), Code: code}
		}
		return nil
	case "tty-sizes":
		// On a terminal: print the first two sizes, then exit 7.
		if !tty {
			return errors.New("tty-sizes wants a terminal")
		}
		for range 2 {
			size, ok := <-resize
			if !ok {
				return errors.New("no more sizes")
			}
			fmt.Fprintf(out, "size %dx%d\r\n", size.Width, size.Height)
		}
		return utilexec.CodeExitError{Err: errors.New("exit 7"), Code: 7}
	case "block":
		for ctx.Err() == nil {
			if _, err := out.Write([]byte(".")); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
		return ctx.Err()
	}
	return errors.New("a terminal is not supported yet: run without -t")
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

// hostRecorder sees every request the plugin's clients send, at the
// client: the rest client, the metadata client and both streaming
// executors take the config's transport wrappers.
type hostRecorder struct {
	mu    sync.Mutex
	hosts []string
}

func (h *hostRecorder) wrap(cfg *rest.Config) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			h.mu.Lock()
			h.hosts = append(h.hosts, r.URL.Host)
			h.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// pluginResult is one plugin invocation's end.
type pluginResult struct {
	code           int
	stdout, stderr string
	hosts          []string
}

// runPlugin runs the plugin in-process with args against f as user dev
// (a bearer token, namespace apps from the kubeconfig), stdin as given,
// until it ends or ctx does.
func (f *fakeAPI) runPlugin(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) pluginResult {
	f.t.Helper()
	kubeconfig := filepath.Join(f.t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	caData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	cfg.Clusters["api"] = &clientcmdapi.Cluster{Server: f.srv.URL, CertificateAuthorityData: caData}
	cfg.AuthInfos["dev"] = &clientcmdapi.AuthInfo{Token: userToken}
	cfg.Contexts["dev"] = &clientcmdapi.Context{Cluster: "api", AuthInfo: "dev", Namespace: apiNS}
	cfg.CurrentContext = "dev"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		f.t.Fatal(err)
	}
	var rec hostRecorder
	var out, errOut syncBuffer
	if stdout == nil {
		stdout = &out
	}
	streams := genericiooptions.IOStreams{In: stdin, Out: stdout, ErrOut: &errOut}
	flags := genericclioptions.NewConfigFlags(true).WithWrapConfigFn(rec.wrap)
	code := Execute(ctx, NewCommand(streams, flags), append([]string{"--kubeconfig", kubeconfig}, args...), &errOut)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return pluginResult{code: code, stdout: out.String(), stderr: errOut.String(), hosts: rec.hosts}
}

// syncBuffer is written by the plugin's streams and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
