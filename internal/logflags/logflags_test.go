package logflags

import (
	"bytes"
	"encoding/json"
	"flag"
	"regexp"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// The default "ts" is RFC 3339 with its fraction of a second;
// --zap-time-encoding still chooses another.
func TestTimeEncoding(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want *regexp.Regexp
	}{
		"default":            {want: regexp.MustCompile(`^"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+(Z|[+-]\d\d:\d\d)"$`)},
		"epoch on request":   {args: []string{"--zap-time-encoding=epoch"}, want: regexp.MustCompile(`^\d+\.\d+$`)},
		"seconds on request": {args: []string{"--zap-time-encoding=rfc3339"}, want: regexp.MustCompile(`^"[^.]*"$`)},
	} {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			var o zap.Options
			Bind(fs, &o)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			o.DestWriter = &buf
			zap.New(zap.UseFlagOptions(&o)).Info("hello")
			var line map[string]json.RawMessage
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("%q: %v", buf.String(), err)
			}
			if !tc.want.Match(line["ts"]) {
				t.Errorf("ts %s, want it to match %s", line["ts"], tc.want)
			}
		})
	}
}
