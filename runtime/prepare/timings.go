package prepare

import "time"

// Step names, in the order prepare runs them.
const (
	StepDirs          = "dirs"
	StepAdminToken    = "adminToken"
	StepEnv           = "env"
	StepExitRecords   = "exitRecords"
	StepAppSocket     = "appSocket"
	StepControlSocket = "controlSocket"
	StepLogs          = "logs"
)

// Step is one timed step.
type Step struct {
	Name string
	Took time.Duration
}

// Timings is how long each step took, for one structured log line.
type Timings struct {
	Steps []Step
	Total time.Duration
	start time.Time
	last  time.Time
}

func (t *Timings) begin(now time.Time) { t.start, t.last = now, now }

func (t *Timings) mark(name string) {
	now := time.Now()
	t.Steps = append(t.Steps, Step{Name: name, Took: now.Sub(t.last)})
	t.last = now
	t.Total = now.Sub(t.start)
}

// KeysAndValues renders the timings as logr key/values:
// log.Info("prepared", res.Timings.KeysAndValues()...).
func (t Timings) KeysAndValues() []any {
	kv := make([]any, 0, 2*len(t.Steps)+2)
	for _, s := range t.Steps {
		kv = append(kv, s.Name, s.Took)
	}
	return append(kv, "total", t.Total)
}
