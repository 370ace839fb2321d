package boot

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	bootA = "8a1f3c2e-5b6d-4e7f-9a0b-1c2d3e4f5a6b"
	bootB = "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f7a"
)

func TestDecide(t *testing.T) {
	tests := map[string]struct {
		recorded, current string
		want              Verdict
		wantErr           bool
	}{
		"changed boot ID is a reboot": {
			recorded: bootA, current: bootB,
			want: Verdict{Reason: Changed, Previous: bootA, Current: bootB},
		},
		"same boot ID never is": {
			recorded: bootA, current: bootA,
			want: Verdict{Reason: Unchanged, Previous: bootA, Current: bootA},
		},
		"same boot ID in another case never is": {
			recorded: "8A1F3C2E-5B6D-4E7F-9A0B-1C2D3E4F5A6B", current: bootA,
			want: Verdict{Reason: Unchanged, Previous: "8A1F3C2E-5B6D-4E7F-9A0B-1C2D3E4F5A6B", Current: bootA},
		},
		"no record proves nothing": {
			recorded: "", current: bootA,
			want: Verdict{Reason: NoRecord, Current: bootA},
		},
		"a malformed record proves nothing": {
			recorded: "not-a-boot-id", current: bootA,
			want:    Verdict{Reason: RecordUnusable, Current: bootA},
			wantErr: true,
		},
		"an unreadable node boot ID proves nothing": {
			recorded: bootA, current: "",
			want:    Verdict{Reason: SourceUnusable, Previous: bootA},
			wantErr: true,
		},
		"a malformed node boot ID proves nothing": {
			recorded: bootA, current: bootB[:35] + "x",
			want:    Verdict{Reason: SourceUnusable, Previous: bootA},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Decide(tc.recorded, tc.current)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error: %v", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("verdict (-want,+got):\n%s", d)
			}
			if got.Rebooted() != (tc.want.Reason == Changed) {
				t.Errorf("Rebooted() = %v for %s", got.Rebooted(), got.Reason)
			}
		})
	}
}

// A Record as the agent uses it: first start, restart in the same boot,
// a boot ID source rewritten (a simulated reboot), a corrupt record.
func TestRecordAcrossStarts(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "boot_id")
	r := Record{Path: filepath.Join(dir, "state", "boot_id"), Source: src}
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want Verdict, wantErr bool) {
		t.Helper()
		got, err := r.Check()
		if (err != nil) != wantErr {
			t.Fatalf("Check error = %v, want error: %v", err, wantErr)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("verdict (-want,+got):\n%s", d)
		}
	}
	write(src, bootA+"\n")
	check(Verdict{Reason: NoRecord, Current: bootA}, false)
	if err := r.Save(bootA); err != nil {
		t.Fatal(err)
	}
	check(Verdict{Reason: Unchanged, Previous: bootA, Current: bootA}, false)

	write(src, bootB+"\n")
	check(Verdict{Reason: Changed, Previous: bootA, Current: bootB}, false)
	if err := r.Save(bootB); err != nil {
		t.Fatal(err)
	}
	check(Verdict{Reason: Unchanged, Previous: bootB, Current: bootB}, false)

	write(r.Path, "garbage\n")
	check(Verdict{Reason: RecordUnusable, Current: bootB}, true)
	if err := r.Save("garbage"); err == nil {
		t.Error("Save of a malformed boot ID succeeded")
	}
	if b, _ := os.ReadFile(r.Path); string(b) != "garbage\n" {
		t.Errorf("a refused Save changed the record: %q", b)
	}

	if err := os.Remove(src); err != nil {
		t.Fatal(err)
	}
	write(r.Path, bootB+"\n")
	check(Verdict{Reason: SourceUnusable, Previous: bootB}, true)
}

// TestPending: a reboot's proof kept on the node until it is written:
// read back as saved, none when absent or cleared, an unusable one an
// error (never a proof), and none kept without a path.
func TestPending(t *testing.T) {
	saved := Pending{Previous: bootA, Current: bootB, Generations: []string{"ns/a-1/uid-1", "ns/b-2/uid-2"}}
	tests := map[string]struct {
		file    string // "": none written; "saved": Save(saved)
		clear   bool
		want    *Pending
		wantErr bool
	}{
		"none":                 {},
		"saved, read back":     {file: "saved", want: &saved},
		"cleared once written": {file: "saved", clear: true},
		"not JSON":             {file: "garbage\n", wantErr: true},
		"no boot IDs":          {file: `{"previous":"","current":"","generations":[]}`, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			r := Record{Path: filepath.Join(dir, "state", "boot_id"), PendingPath: filepath.Join(dir, "state", "boot_pending.json")}
			switch tc.file {
			case "":
			case "saved":
				if err := r.SavePending(saved); err != nil {
					t.Fatal(err)
				}
			default:
				if err := os.MkdirAll(filepath.Dir(r.PendingPath), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(r.PendingPath, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.clear {
				if err := r.ClearPending(); err != nil {
					t.Fatal(err)
				}
			}
			got, err := r.LoadPending()
			if (err != nil) != tc.wantErr {
				t.Fatalf("LoadPending error = %v, want error: %v", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("pending (-want,+got):\n%s", d)
			}
		})
	}
	if err := (Record{}).SavePending(saved); err == nil {
		t.Error("a proof was saved with no path to keep it at")
	}
	if got := saved.Verdict(); !got.Rebooted() || got.Previous != bootA || got.Current != bootB {
		t.Errorf("the proof's verdict = %+v", got)
	}
}
