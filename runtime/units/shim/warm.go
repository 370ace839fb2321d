package shim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/unitlet/unitlet/runtime/cgroups"
	"github.com/unitlet/unitlet/runtime/units/record"
)

// WarmFlag starts a warm shim: it initializes, then waits on the job pipe
// (JobFD) for its Args. The agent keeps a few idle ones so a start need
// not pay the binary's start-up.
const WarmFlag = "--warm"

// JobFD is a warm shim's job pipe.
const JobFD = 4

// ExitIdle: a warm shim's job pipe ended without a whole job; it did
// nothing at all.
const ExitIdle = 123

// Job renders a as the one message a warm shim acts on: JSON ended by a
// newline, so a job cut short by the agent's death is never taken.
func (a Args) Job() ([]byte, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// maxJob bounds a job; the agent's are well below it.
const maxJob = 64 << 10

// errNoJob: the job pipe ended before a whole job came.
var errNoJob = fmt.Errorf("no job")

// readJob waits for the job on JobFD: one line, or the end of the pipe.
func readJob() (Args, error) {
	syscall.CloseOnExec(JobFD)
	f := os.NewFile(JobFD, "job")
	if f == nil {
		return Args{}, errNoJob
	}
	defer f.Close()
	warmUp()
	// The newline, not the pipe's end, makes a job whole: acting on it
	// at once spares a second wake-up for the close.
	b, err := bufio.NewReaderSize(f, maxJob).ReadSlice('\n')
	if err != nil {
		return Args{}, errNoJob
	}
	var a Args
	if err := json.Unmarshal(b, &a); err != nil {
		return Args{}, fmt.Errorf("bad job: %w", err)
	}
	// The same checks as for flags.
	return parse(a.Flags())
}

// warmUp runs, once, the code a job will run, with no effect outside
// this process: decoding and checking a job, encoding the records, the
// cgroup mount lookup, and a scheduling change to what the threads have
// already. A fresh process pays for such code on first use (page faults
// on its text, reflection caches built); an idle shim pays it before the
// job rather than on the start's path.
func warmUp() {
	s, _ := CurrentSched()
	sample := Args{Namespace: "warm", Name: "up", Child: "g1", ExitDir: "/warm", Prefix: "gen.1.",
		Invocation: "0", Exe: "/warm", Launch: "/warm", LogSocket: "/warm", Sched: &s}
	if b, err := sample.Job(); err == nil {
		var a Args
		if json.Unmarshal(b, &a) == nil {
			_, _ = parse(a.Flags())
		}
	}
	_, _ = json.Marshal(record.Pid{At: time.Now()})
	_, _ = json.Marshal(ExitOf(&os.ProcessState{}, ""))
	_, _ = cgroups.New(cgroups.Config{}, "warm", "up")
	_ = Apply(os.Getpid(), s)
}
