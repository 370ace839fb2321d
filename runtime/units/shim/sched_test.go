package shim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSched(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    Sched
		wantErr bool
	}{
		"normal":             {in: "0/0/0", want: Sched{}},
		"niced batch":        {in: "3/5/0", want: Sched{Policy: 3, Nice: 5}},
		"negative nice":      {in: "0/-20/0", want: Sched{Nice: -20}},
		"fifo priority":      {in: "1/0/50", want: Sched{Policy: 1, Priority: 50}},
		"nice above range":   {in: "0/20/0", wantErr: true},
		"nice below range":   {in: "0/-21/0", wantErr: true},
		"two fields":         {in: "0/0", wantErr: true},
		"not a number":       {in: "idle/0/0", wantErr: true},
		"negative policy":    {in: "-1/0/0", wantErr: true},
		"empty":              {in: "", wantErr: true},
		"trailing separator": {in: "0/0/0/", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSched(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseSched(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("ParseSched(%q) (-want,+got):\n%s", tc.in, diff)
			}
		})
	}
}

// A job is checked as flags: its scheduling must survive the round trip.
func TestArgsFlagsRoundTrip(t *testing.T) {
	s := Sched{Policy: 0, Nice: -5}
	want := Args{CgroupRoot: "unitlet", Namespace: "ns", Name: "app", Child: "g3", ExitDir: "/run/x/exit",
		Prefix: "gen.3.", Invocation: "abc", Exe: "/usr/bin/unitlet", Launch: "/var/lib/x/launch.gen.3.json",
		LogSocket: "/run/x/log.sock", Sched: &s}
	got, err := parse(want.Flags())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parse(Flags()) (-want,+got):\n%s", diff)
	}
	bad := append(want.Flags(), "--sched=0/99/0")
	if _, err := parse(bad); err == nil {
		t.Error("parse accepted --sched with nice 99")
	}
}
