// Command escapeprobe is the tenant the escape matrix runs: as an
// Instance's app it tries, from inside the sandbox, each way one tenant
// could reach another tenant or the node, and writes what it tried and
// what it got as JSON. Tests only (test/e2e, test/node, the trampoline's
// own tests); it changes nothing it reaches: a file opened for writing is
// closed unwritten, a personality set is set back at once.
//
//	escapeprobe hold   leaves traces for another tenant to find (SysV
//	                   shared memory, a /dev/shm file, the marker in its
//	                   argv), then serves
//	escapeprobe probe  looks for another tenant's traces and the node's
//	                   surfaces, writes the report, then serves
//	escapeprobe listen ADDR FILE
//	                   stands in for the metadata service inside a test
//	                   host: accepts on ADDR and appends a line to FILE
//	                   for each connection
//
// PROBE_MARKER names the traces; PROBE_OUT is the report's path
// (default $UNITLET_DATA_DIR/escape.json); PROBE_METADATA, when set, is
// an address:port to connect to (only ever one inside a network
// namespace the test made itself). Both modes serve HTTP on
// $UNITLET_APP_SOCKET when it is set, so an Instance reads Ready.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/unitlet/unitlet/internal/testkit/escapeprobe/report"
)

// Row is one line of the matrix.
type Row = report.Row

func main() {
	if len(os.Args) == 4 && os.Args[1] == "listen" {
		listen(os.Args[2], os.Args[3])
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: escapeprobe hold|probe|listen ADDR FILE")
		os.Exit(2)
	}
	marker := os.Getenv("PROBE_MARKER")
	if marker == "" {
		marker = "unitlet-probe"
	}
	switch os.Args[1] {
	case "hold":
		if err := hold(marker); err != nil {
			fmt.Fprintln(os.Stderr, "hold:", err)
			os.Exit(1)
		}
		fmt.Println("holding", marker)
	case "probe":
		rows := probe(marker, os.Getenv("PROBE_METADATA"))
		b, _ := json.MarshalIndent(rows, "", "  ")
		fmt.Println(string(b))
		out := os.Getenv("PROBE_OUT")
		if out == "" {
			out = filepath.Join(os.Getenv("UNITLET_DATA_DIR"), "escape.json")
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: escapeprobe hold|probe")
		os.Exit(2)
	}
	serve()
}

// listen counts the connections that reach addr in file.
func listen(addr, file string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(1)
		}
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, c.RemoteAddr())
			f.Close()
		}
		c.Close()
	}
}

// serve answers on the app socket until killed (or sleeps without one).
func serve() {
	sock := os.Getenv("UNITLET_APP_SOCKET")
	if sock == "" {
		time.Sleep(time.Hour)
		return
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "probe") }))
}
