package diskspace

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOf(t *testing.T) {
	u, err := Of(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if u.Total == 0 || u.Free > u.Total {
		t.Errorf("usage %+v: want a size, and free within it", u)
	}
	if _, err := Of(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, syscall.ENOENT) && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing path: %v, want ENOENT", err)
	}
}
