package logs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchLog writes a kept set like an agent's at its defaults: app.log and
// three rotated files of ~8 MiB, lines of two generations and a sidecar.
func benchLog(b *testing.B) (string, int) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "app.log")
	const keep, size = 3, 8 << 20
	for i, name := range []string{path + ".3", path + ".2", path + ".1", path} {
		f, err := os.Create(name)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriter(f)
		for n, written := 0, 0; written < size; n++ {
			src := []string{"g1", "g2", "sidecar.cache"}[n%3]
			k, _ := w.WriteString(line(i*1_000_000+n, src, fmt.Sprintf("GET /items/%d 200 1.3ms user=%d", n, n%97)))
			written += k
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	return path, keep
}

// BenchmarkRead reads the whole kept set (32 MiB) for one generation's
// lines, beside the raw primitive: the same files scanned line by line.
func BenchmarkRead(b *testing.B) {
	path, keep := benchLog(b)
	b.Run("logs.Read generation 2", func(b *testing.B) {
		b.SetBytes(4 * 8 << 20)
		for b.Loop() {
			n := 0
			err := Read(context.Background(), path, keep, Filter{Role: "run", Generation: 2}, false, func(Record) error { n++; return nil })
			if err != nil || n == 0 {
				b.Fatal(err, n)
			}
		}
	})
	b.Run("bufio.Scanner raw", func(b *testing.B) {
		b.SetBytes(4 * 8 << 20)
		for b.Loop() {
			n := 0
			for _, name := range []string{path + ".3", path + ".2", path + ".1", path} {
				f, err := os.Open(name)
				if err != nil {
					b.Fatal(err)
				}
				sc := bufio.NewScanner(f)
				for sc.Scan() {
					n++
				}
				f.Close()
			}
			if n == 0 {
				b.Fatal("no lines")
			}
		}
	})
}
