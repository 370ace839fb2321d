package instancefs

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// bindSocket binds a unix socket at dir/name under a umask that leaves
// the group no write, as most apps' do.
func bindSocket(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	old := syscall.Umask(0o022)
	l, err := net.Listen("unix", p)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return p
}

// linkTo plants dir/app.sock as a symlink to the file target makes, and
// returns that file.
func linkTo(target func(t *testing.T) string) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		p := target(t)
		if err := os.Symlink(p, filepath.Join(dir, "app.sock")); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func TestShareSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chown to another group")
	}
	const gid = 65534
	tests := map[string]struct {
		// plant makes dir/"app.sock"; it returns a file outside the
		// tenant's reach that must stay as it was, or "".
		plant   func(t *testing.T, dir string) string
		wantErr error
	}{
		"an app's socket": {
			plant: func(t *testing.T, dir string) string { bindSocket(t, dir, "app.sock"); return "" },
		},
		"a symlink to a file outside": {
			plant:   linkTo(func(t *testing.T) string { shadow, _ := shadowOutside(t); return shadow }),
			wantErr: ErrSymlink,
		},
		"a symlink to another socket": {
			plant:   linkTo(func(t *testing.T) string { return bindSocket(t, t.TempDir(), "other.sock") }),
			wantErr: ErrSymlink,
		},
		"a plain file": {
			plant: func(t *testing.T, dir string) string {
				if err := os.WriteFile(filepath.Join(dir, "app.sock"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(dir, "app.sock")
			},
			wantErr: ErrNotSocket,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			outside := tc.plant(t, dir)
			var before os.FileInfo
			if outside != "" {
				var err error
				if before, err = os.Stat(outside); err != nil {
					t.Fatal(err)
				}
			}
			err := ShareSocket(dir, "app.sock", gid, 0o660)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ShareSocket: %v, want %v", err, tc.wantErr)
			}
			if outside != "" {
				after, err := os.Stat(outside)
				if err != nil {
					t.Fatal(err)
				}
				if after.Mode() != before.Mode() || after.Sys().(*syscall.Stat_t).Gid != before.Sys().(*syscall.Stat_t).Gid {
					t.Errorf("%s changed: %v → %v", outside, before.Mode(), after.Mode())
				}
			}
			if tc.wantErr != nil {
				return
			}
			fi, err := os.Lstat(filepath.Join(dir, "app.sock"))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o660 || fi.Sys().(*syscall.Stat_t).Gid != gid {
				t.Errorf("socket mode %v gid %d, want 0660 gid %d", fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid, gid)
			}
		})
	}
}
