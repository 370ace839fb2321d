package fleet

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/scheme"
)

// router is the front end a fleet needs: one loopback listener per host,
// each request sent to the socket the Instance's status names on the node
// it names (every node of this suite is on this machine, so a node's
// socket path is reachable here). It reads status from an informer, as an
// ingress controller would, and opens a connection per request: a pooled
// one would keep the old node's listener busy after a move.
type router struct {
	cache cache.Cache
	mu    sync.Mutex
	addrs map[string]string // host -> listener address
}

func newRouter(t *testing.T) *router {
	t.Helper()
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	// Ask for the informer before waiting: the cache starts one lazily.
	if _, err := c.GetInformer(ctx, &v1.Instance{}); err != nil {
		t.Fatal(err)
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("router cache did not sync")
	}
	return &router{cache: c, addrs: map[string]string{}}
}

// route is where host is served now: the node and its socket.
func (r *router) route(ctx context.Context, name string) (node, sock string, err error) {
	inst := &v1.Instance{}
	if err := r.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, inst); err != nil {
		return "", "", err
	}
	if inst.Status.NodeName == "" || inst.Status.Socket == "" {
		return "", "", fmt.Errorf("instance %s serves nowhere yet", name)
	}
	return inst.Status.NodeName, inst.Status.Socket, nil
}

// listen serves the Instance name on a loopback port until the test ends
// and returns its address.
func (r *router) listen(t *testing.T, name string) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.addrs[name]; ok {
		return a
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", name
		},
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				_, sock, err := r.route(ctx, name)
				if err != nil {
					return nil, err
				}
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
		},
	}
	srv := &http.Server{Handler: proxy}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.addrs[name] = l.Addr().String()
	return r.addrs[name]
}
