package chaos

import (
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
)

// cutProxy passes TCP between the agents and the API server until Cut:
// then every open connection is reset and new ones are refused (its port
// closed), as an API server that went down; Restore opens it again on
// the same port.
type cutProxy struct {
	target, addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func newCutProxy(apiHost string) (*cutProxy, error) {
	u, err := url.Parse(apiHost)
	if err != nil {
		return nil, err
	}
	p := &cutProxy{target: u.Host, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	return p, nil
}

// URL is the proxy's address as a kubeconfig's server (the API server's
// certificate names 127.0.0.1, so TLS passes through unchanged).
func (p *cutProxy) URL() string { return "https://" + p.addr }

func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *cutProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	p.untrack(c, up)
}

// track records a connection pair, unless the proxy is cut.
func (p *cutProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *cutProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

// Cut resets every connection and closes the port.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as a dead peer's kernel sends
		}
		c.Close()
		delete(p.conns, c)
	}
}

// Restore listens on the same port again.
func (p *cutProxy) Restore() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// Close cuts for good.
func (p *cutProxy) Close() { p.Cut() }

// writeProxiedConfig writes raw (a kubeconfig) to path with every
// cluster's server replaced by server.
func writeProxiedConfig(raw []byte, server, path string) error {
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return err
	}
	if len(cfg.Clusters) == 0 {
		return errors.New("kubeconfig names no cluster")
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}
