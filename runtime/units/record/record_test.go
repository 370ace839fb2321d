package record

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/unitlet/unitlet/runtime/layout"
)

func TestRoundTripAndIdentity(t *testing.T) {
	dir := t.TempDir()
	lay := layout.Layout{StateRoot: "/s", RunRoot: "/r"}
	inst, err := lay.Instance("a-b", "c.d")
	if err != nil {
		t.Fatal(err)
	}
	p, err := inst.Generation(12)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := Start{Schema: Schema, Identity: IdentityOf(p), InvocationID: "00ff", GraceMillis: 5, At: at}
	name := Name(p, StartSuffix)
	if diff := cmp.Diff("exit.gen.12.start", name); diff != "" {
		t.Errorf("name (-want,+got):\n%s", diff)
	}
	if err := Write(dir, name, want); err != nil {
		t.Fatal(err)
	}
	var got Start
	if err := Read(dir, name, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record (-want,+got):\n%s", diff)
	}
	// The run dir is the socket group's to read; the records are root's.
	for _, write := range []func(dir, name string, v any) error{Write, WriteVolatile} {
		n := name + ".mode"
		if err := write(dir, n, want); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("record mode %v, want 0600", fi.Mode().Perm())
		}
		_ = os.Remove(filepath.Join(dir, n))
	}
	back, err := got.Identity.Slot(lay)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p.UnitName(), back.UnitName()); diff != "" {
		t.Errorf("identity maps back to (-want,+got):\n%s", diff)
	}
}

func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	tests := map[string]struct {
		body    string
		missing bool
	}{
		"missing":         {missing: true},
		"unknown field":   {body: `{"schema":"` + Schema + `","result":"x","extra":1}`},
		"other schema":    {body: `{"schema":"v0","result":"x"}`},
		"trailing data":   {body: `{"schema":"` + Schema + `"} {}`},
		"not json at all": {body: `exit 0`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := "exit.seed." + ExitSuffix
			_ = os.Remove(filepath.Join(dir, file))
			if !tc.missing {
				if err := os.WriteFile(filepath.Join(dir, file), []byte(tc.body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var e Exit
			err := Read(dir, file, &e)
			if tc.missing {
				if !Missing(err) {
					t.Errorf("got %v, want a missing record", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("got %v, want ErrInvalid", err)
			}
		})
	}
}

// A sidecar's or a run's identity keeps its name: a restarted agent maps
// each of several sidecars' and runs' records back to its own slot.
func TestNamedIdentityMapsBack(t *testing.T) {
	lay := layout.Layout{StateRoot: "/s", RunRoot: "/r"}
	inst, err := lay.Instance("ns", "web")
	if err != nil {
		t.Fatal(err)
	}
	slots := map[string]layout.Role{"cache": layout.RoleSidecar, "log-shipper": layout.RoleSidecar, "run-1a2b": layout.RoleCommand, "run-3c4d": layout.RoleCommand}
	for name, role := range slots {
		p, err := inst.Slot(role, 0, name)
		if err != nil {
			t.Fatal(err)
		}
		back, err := IdentityOf(p).Slot(lay)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(p.UnitName(), back.UnitName()); diff != "" {
			t.Errorf("identity maps back to (-want,+got):\n%s", diff)
		}
	}
}
