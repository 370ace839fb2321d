package testutil

import (
	"net"
	"net/http"
	"path/filepath"
	"testing"
)

// serveUnix answers HTTP on a fresh unix socket until the test ends.
func serveUnix(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "app.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

func TestUnixGet(t *testing.T) {
	sock := serveUnix(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok" {
			http.Error(w, "missing", http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte("hello"))
	})
	tests := map[string]struct {
		path    string
		want    string
		wantErr bool
	}{
		"200 gives the body":              {path: "/ok", want: "hello"},
		"other status errs with its body": {path: "/nope", want: "missing\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := UnixGet(sock, tc.path)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("UnixGet(%s) = %q, %v; want %q, error %v", tc.path, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestUnixClientDialsAfreshEachRequest(t *testing.T) {
	sock := serveUnix(t, func(w http.ResponseWriter, r *http.Request) {
		if !r.Close {
			t.Errorf("request kept its connection alive")
		}
	})
	c := UnixClient(sock)
	for range 2 {
		if _, err := Get(c, "/"); err != nil {
			t.Fatal(err)
		}
	}
}
