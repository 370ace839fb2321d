package instancefs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// shadowOutside plants a secret file outside the tenant dir, as /etc/shadow
// would be, and returns its path and content.
func shadowOutside(t *testing.T) (string, []byte) {
	t.Helper()
	secret := []byte("root:$6$secret-hash:19000:0:99999:7:::\n")
	p := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(p, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, secret
}

func TestReadRefusesSymlinkedFile(t *testing.T) {
	shadow, _ := shadowOutside(t)
	dir := t.TempDir()
	if err := os.Symlink(shadow, filepath.Join(dir, "instance.env")); err != nil {
		t.Fatal(err)
	}
	b, err := ReadFile(dir, "instance.env")
	if !errors.Is(err, ErrSymlink) {
		t.Fatalf("got %q, %v; want ErrSymlink", b, err)
	}
	if _, err := ReadEnv(dir, "instance.env"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("ReadEnv: got %v, want ErrSymlink", err)
	}
}

func TestWriteReplacesSymlinkNeverItsTarget(t *testing.T) {
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			shadow, secret := shadowOutside(t)
			dir := t.TempDir()
			link := filepath.Join(dir, "launch.gen.1.json")
			if err := os.Symlink(shadow, link); err != nil {
				t.Fatal(err)
			}
			if err := write(dir, "launch.gen.1.json", []byte("new"), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(shadow)
			if err != nil || !bytes.Equal(got, secret) {
				t.Fatalf("outside file changed: %q, %v", got, err)
			}
			st, err := os.Lstat(link)
			if err != nil || !st.Mode().IsRegular() {
				t.Fatalf("link not replaced by a regular file: %v, %v", st.Mode(), err)
			}
		})
	}
}

func TestDataDirComponentSymlinkRefused(t *testing.T) {
	shadow, secret := shadowOutside(t)
	outside := filepath.Dir(shadow)
	base := t.TempDir()
	// <base>/instances -> a directory outside: every path through it
	// must be refused, for reads and for writes.
	if err := os.Symlink(outside, filepath.Join(base, "instances")); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(base, "instances")
	if _, err := ReadFile(dataDir, "shadow"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("read: got %v, want ErrSymlink", err)
	}
	if err := WriteAtomic(dataDir, "shadow", []byte("owned"), 0o600); !errors.Is(err, ErrSymlink) {
		t.Fatalf("write: got %v, want ErrSymlink", err)
	}
	if got, _ := os.ReadFile(shadow); !bytes.Equal(got, secret) {
		t.Fatalf("outside file changed: %q", got)
	}
}

func TestSubdirSymlinkBeneathRefused(t *testing.T) {
	shadow, _ := shadowOutside(t)
	dir := t.TempDir()
	if err := os.Symlink(filepath.Dir(shadow), filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(dir, "sub/shadow"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("got %v, want ErrSymlink", err)
	}
}

func TestDotDotCannotLeave(t *testing.T) {
	shadow, _ := shadowOutside(t)
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, shadow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(dir, rel); !errors.Is(err, unix.EXDEV) {
		t.Fatalf("read %s: got %v, want EXDEV", rel, err)
	}
}

func TestNoOpenat2IsRefused(t *testing.T) {
	orig := openat2
	openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	t.Cleanup(func() { openat2 = orig })
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(dir, "f"); !errors.Is(err, ErrNoOpenat2) {
		t.Fatalf("got %v, want ErrNoOpenat2", err)
	}
}

func TestReadRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(dir, "f"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(dir, "f"); err == nil {
		t.Fatal("read of a FIFO succeeded")
	}
}

func TestRemoveBeneath(t *testing.T) {
	shadow, _ := shadowOutside(t)
	dir := t.TempDir()
	if err := os.Symlink(filepath.Dir(shadow), filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := RemoveBeneath(d, "sub/shadow"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("got %v, want ErrSymlink", err)
	}
	if _, err := os.Stat(shadow); err != nil {
		t.Fatalf("outside file removed: %v", err)
	}
	if err := RemoveBeneath(d, "sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("symlink not removed: %v", err)
	}
}
