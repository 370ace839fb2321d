package sockdiag

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkLook: one drain look on a node with n listeners, each with an
// accepted connection (a thousand Instances mid-swap), beside the raw
// primitive: reading /proc/net/unix, the kernel's other listing of the
// same sockets (which names no queue and ties no connection to its
// listener).
func BenchmarkLook(b *testing.B) {
	for _, n := range []int{10, 1000} {
		dir := b.TempDir()
		var files []File
		var keep []any
		for i := 0; i < n; i++ {
			p := filepath.Join(dir, fmt.Sprintf("%d.sock", i))
			l, err := net.Listen("unix", p)
			if err != nil {
				b.Fatal(err)
			}
			c, err := net.Dial("unix", p)
			if err != nil {
				b.Fatal(err)
			}
			a, err := l.Accept()
			if err != nil {
				b.Fatal(err)
			}
			keep = append(keep, l, c, a)
			f, err := FileOf(p)
			if err != nil {
				b.Fatal(err)
			}
			files = append(files, f)
		}
		b.Run(fmt.Sprintf("sockets=%d/look", 3*n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				got, err := Look(files[i%n])
				if err != nil || got[files[i%n]].Open != 1 {
					b.Fatalf("%v %+v", err, got)
				}
			}
		})
		b.Run(fmt.Sprintf("sockets=%d/raw-proc-net-unix", 3*n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := os.ReadFile("/proc/net/unix"); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, k := range keep {
			k.(interface{ Close() error }).Close()
		}
	}
}
