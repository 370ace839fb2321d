package instancefs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// writers are the two atomic writers: they differ only in the fsyncs, so
// every property below holds for both.
var writers = map[string]func(dir, name string, data []byte, mode os.FileMode) error{
	"durable":  WriteAtomic,
	"volatile": WriteAtomicVolatile,
}

func TestWriteAtomicModeAndNoLeftovers(t *testing.T) {
	old := unix.Umask(0o077)
	t.Cleanup(func() { unix.Umask(old) })
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for _, content := range []string{"first", "second"} {
				if err := write(dir, "f", []byte(content), 0o640); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(dir, "f"))
				if err != nil || string(got) != content {
					t.Fatalf("got %q, %v; want %q", got, err, content)
				}
			}
			st, err := os.Stat(filepath.Join(dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o640 {
				t.Errorf("mode %v, want 0640", st.Mode().Perm())
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("leftover files: %v", entries)
			}
		})
	}
}

func TestWriteAtomicIntoSubdir(t *testing.T) {
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := write(dir, "sub/f", []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "sub", "f")); err != nil || string(got) != "x" {
				t.Fatalf("got %q, %v", got, err)
			}
		})
	}
}
