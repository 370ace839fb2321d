package instancefs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestReadFileLimit(t *testing.T) {
	tests := map[string]struct {
		size    int
		wantErr error
	}{
		"empty":          {0, nil},
		"exactly 1 MiB":  {DefaultReadLimit, nil},
		"one byte over":  {DefaultReadLimit + 1, ErrTooLarge},
		"far over limit": {4 * DefaultReadLimit, ErrTooLarge},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			data := bytes.Repeat([]byte("A"), tc.size)
			if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadFile(dir, "f")
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got error %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes, want %d", len(got), len(data))
			}
		})
	}
}

func TestEnvFileOver1MiB(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("K=0123456789\n"), DefaultReadLimit/13+1)
	if err := os.WriteFile(filepath.Join(dir, "instance.env"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadEnv(dir, "instance.env"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}
