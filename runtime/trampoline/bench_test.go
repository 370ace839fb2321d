package trampoline

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/unitlet/unitlet/runtime/launch"
)

// BenchmarkExec is `unitlet exec` of /bin/true (launch file read, sandbox
// built, identity dropped) beside the raw fork/exec of /bin/true, in one
// run: the difference is what the trampoline costs each start. The
// sandbox's read-only pass is one mount_setattr per mount, so the figure
// grows with the node's mount count (this machine's is in the log).
func BenchmarkExec(b *testing.B) {
	if os.Geteuid() != 0 { // as in sandboxed: only without root
		b.Skip("needs root: the sandbox and the drop")
	}
	mounts, _ := mountPoints()
	b.Logf("%d mounts", len(mounts))
	dir := b.TempDir()
	if err := launch.Write(dir, "launch.gen.1.json", launch.File{Schema: launch.Schema, Argv: []string{"/bin/true"},
		Identity: launch.Identity{UID: 1879048192 + 99, GID: 1879048192 + 99}, Writable: []string{dir}}); err != nil {
		b.Fatal(err)
	}
	lf := dir + "/launch.gen.1.json"
	run := func(b *testing.B, cmd func() *exec.Cmd) {
		for b.Loop() {
			if out, err := cmd().CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	}
	b.Run("trampoline", func(b *testing.B) {
		run(b, func() *exec.Cmd {
			c := exec.Command(os.Args[0], "--launch", lf)
			c.Env = []string{asTrampoline + "=1"}
			return c
		})
	})
	// The sandbox alone, on a thread of its own that ends with it (a
	// locked goroutine's thread is dropped, namespace and all).
	b.Run("sandbox", func(b *testing.B) {
		for b.Loop() {
			errc := make(chan error, 1)
			go func() {
				runtime.LockOSThread() // never unlocked: the thread goes
				errc <- sandbox([]string{dir})
			}()
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		run(b, func() *exec.Cmd { return exec.Command("/bin/true") })
	})
}
