package systemd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// load is what a client loop saw.
type load struct {
	ok, failed atomic.Int64
	firstErr   atomic.Value
	mu         sync.Mutex
	bodies     map[string]int
}

// maxRequests bounds a client loop whatever happens to the swap.
const maxRequests = 200000

// runLoad sends GETs through the stable socket from workers clients until
// stop closes or maxRequests were sent.
func runLoad(sock string, workers int, stop <-chan struct{}) *load {
	l := &load{bodies: map[string]int{}}
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := testutil.UnixClient(sock)
			for sent.Add(1) <= maxRequests {
				select {
				case <-stop:
					return
				default:
				}
				body, err := testutil.Get(c, "/")
				if err != nil {
					if l.failed.Add(1) == 1 {
						l.firstErr.Store(err.Error())
					}
					continue
				}
				l.ok.Add(1)
				l.mu.Lock()
				l.bodies[body]++
				l.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return l
}

// TestOverlapSwap: the Overlap sample runs as systemd units, becomes Ready
// and answers through its stable socket; a template change starts
// generation 2 beside 1, flips the socket and retires 1 with a proof,
// while a client loop through app.sock sees no failure.
func TestOverlapSwap(t *testing.T) {
	inst := testutil.Sample(t, "hosting_v1alpha1_instance_overlap.yaml", testNode)
	create(t, inst)
	inst = kube.WaitServing(t, inst.Name, 1)
	li := instanceLayout(t, inst.Name)
	if inst.Status.Socket != li.StableSocket() {
		t.Fatalf("status.socket = %q, want %q", inst.Status.Socket, li.StableSocket())
	}
	if body, err := testutil.Get(testutil.UnixClient(inst.Status.Socket), "/"); err != nil || body != "hello from shop.example.com generation 1\n" {
		t.Fatalf("GET through %s = %q, %v", inst.Status.Socket, body, err)
	}
	c := busConn(t)
	g1 := proc(t, li, 1)
	if load, active := unitState(t, c, g1.UnitName()); load != "loaded" || active != "active" {
		t.Fatalf("generation 1 runs, yet systemd says %s is %s/%s", g1.UnitName(), load, active)
	}

	// The slice carries the parent limit: raised to spec.overlap while two
	// generations run, back to the tier once one does.
	sliceMem := filepath.Join(sys.HostCgroup("memory", sliceCgroup(t, c, li)), "memory.limit_in_bytes")
	const tierMem, overlapMem = 128 << 20, 256 << 20
	if got := readInt(t, sliceMem); got != tierMem {
		t.Fatalf("slice memory limit before the swap = %d, want the tier's %d", got, tierMem)
	}

	stop := make(chan struct{})
	done := make(chan *load)
	go func() { done <- runLoad(inst.Status.Socket, 4, stop) }()
	highest := make(chan int64)
	go func() { highest <- watchMax(sliceMem, stop) }()
	time.Sleep(500 * time.Millisecond) // load on the old generation first
	kube.UpdateInstance(t, inst.Name, updateLimit, func(i *v1.Instance) { i.Spec.Template.Env[0].Value = "shop-v2.example.com" })
	kube.WaitServing(t, inst.Name, 2)
	waitTerminated(t, inst.Name, 1)
	time.Sleep(300 * time.Millisecond) // and on the new one after the retire
	close(stop)
	l := <-done
	total := l.ok.Load() + l.failed.Load()
	t.Logf("overlap swap under systemd: %d requests through app.sock, %d failed, by answer: %v", total, l.failed.Load(), l.bodies)
	if l.failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed during the swap; first: %v", l.failed.Load(), total, l.firstErr.Load())
	}
	if got := <-highest; got != overlapMem {
		t.Errorf("highest slice memory limit during the swap = %d, want spec.overlap's %d", got, overlapMem)
	}
	testutil.Eventually(t, "slice limit restored", 10*time.Second, pollEvery, func() (bool, string) {
		got := readInt(t, sliceMem)
		return got == tierMem, fmt.Sprintf("memory.limit_in_bytes = %d, want %d", got, tierMem)
	})
	if l.bodies["hello from shop.example.com generation 1\n"] == 0 || l.bodies["hello from shop-v2.example.com generation 2\n"] == 0 {
		t.Fatalf("want answers from both generations, got %v", l.bodies)
	}
	if load, active := unitState(t, c, g1.UnitName()); active != "inactive" {
		t.Fatalf("generation 1 proven gone, yet systemd says %s is %s/%s", g1.UnitName(), load, active)
	}
}

// TestReplaceSuspendDelete: Replace proves generation 1 gone before 2
// starts; suspend leaves no unit of the instance active in systemd and
// keeps the dirs; resume serves again; delete leaves no unit, cgroup or
// directory behind.
func TestReplaceSuspendDelete(t *testing.T) {
	inst := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", testNode)
	create(t, inst)
	kube.WaitServing(t, inst.Name, 1)
	kube.UpdateInstance(t, inst.Name, updateLimit, func(i *v1.Instance) { i.Spec.Template.Args = append(i.Spec.Template.Args, "v2") })
	inst = kube.WaitServing(t, inst.Name, 2)
	g1, g2 := kube.Generation(t, inst.Name, 1), kube.Generation(t, inst.Name, 2)
	proof := meta.FindStatusCondition(g1.Status.Conditions, v1.ConditionTerminated)
	if proof == nil || proof.Status != "True" || g2.Status.StartedAt == nil || g2.Status.StartedAt.Before(&proof.LastTransitionTime) {
		t.Fatalf("Replace: generation 2 started at %v, generation 1 proven gone at %v", g2.Status.StartedAt, proof)
	}
	if body, err := testutil.Get(testutil.UnixClient(inst.Status.Socket), "/"); err != nil || body != "ledger ok\n" {
		t.Fatalf("GET = %q, %v", body, err)
	}

	li := instanceLayout(t, inst.Name)
	c := busConn(t)
	// The same order to the microsecond, from systemd's side: generation
	// 1's ExecStopPost (which runs inside its cgroup, so before the cgroup
	// can be seen empty) wrote its exit record before 2's main process
	// was started.
	exit1, err := testutil.ExitRecord(os.ReadFile, li, 1)
	if err != nil {
		t.Fatal(err)
	}
	if exit1.By != "systemd" {
		t.Errorf("generation 1's exit record was written by %q, want systemd's ExecStopPost", exit1.By)
	}
	sp, err := c.GetUnitTypePropertiesContext(context.Background(), proc(t, li, 2).UnitName(), "Service")
	if err != nil {
		t.Fatal(err)
	}
	started2, _ := sp["ExecMainStartTimestamp"].(uint64)
	testutil.CheckReplaceOrder(t, inst.Name, exit1.At, time.UnixMicro(int64(started2)))
	cgroup := sliceCgroup(t, c, li)
	if cgroup == "" || processesUnder(t, cgroup) == 0 {
		t.Fatalf("serving, yet the slice %s (cgroup %q) holds no process", li.SliceName(), cgroup)
	}

	kube.UpdateInstance(t, inst.Name, updateLimit, func(i *v1.Instance) { i.Spec.Suspend = true })
	testutil.Eventually(t, "suspended", 60*time.Second, pollEvery, func() (bool, string) {
		i := kube.Instance(t, inst.Name)
		c := meta.FindStatusCondition(i.Status.Conditions, v1.ConditionReady)
		return c != nil && c.Reason == v1.ReasonSuspended && c.Status == "True", testutil.Conditions(i.Status.Conditions)
	})
	for n := int64(1); n <= 2; n++ {
		p := proc(t, li, n)
		if load, active := unitState(t, c, p.UnitName()); active != "inactive" {
			t.Errorf("suspended, yet systemd says %s is %s/%s", p.UnitName(), load, active)
		}
	}
	if us := activeUnits(t, c, li); len(us) > 1 || (len(us) == 1 && us[0] != li.SliceName()+"=loaded/active") {
		t.Errorf("suspended, yet systemd holds units of the instance: %v", us)
	}
	if n := processesUnder(t, cgroup); n != 0 {
		t.Errorf("suspended, yet %d processes run in %s", n, cgroup)
	}
	if _, err := os.Stat(li.DataDir()); err != nil {
		t.Fatalf("suspend removed the data dir: %v", err)
	}
	kube.UpdateInstance(t, inst.Name, updateLimit, func(i *v1.Instance) { i.Spec.Suspend = false })
	inst = kube.WaitServing(t, inst.Name, 3)
	if body, err := testutil.Get(testutil.UnixClient(inst.Status.Socket), "/"); err != nil || body != "ledger ok\n" {
		t.Fatalf("GET after resume = %q, %v", body, err)
	}

	kube.DeleteAndWait(t, inst.Name, deleteLimit)
	if us := activeUnits(t, c, li); len(us) != 0 {
		t.Errorf("after delete systemd still holds units of the instance: %v", us)
	}
	for n := int64(1); n <= 3; n++ {
		p := proc(t, li, n)
		if load, active := unitState(t, c, p.UnitName()); active != "inactive" {
			t.Errorf("after delete systemd says %s is %s/%s", p.UnitName(), load, active)
		}
	}
	var left []error
	for _, dir := range append(hostCgroupDirs(cgroup), li.DataDir(), li.RunDir(), filepath.Dir(li.LogFile())) {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			left = append(left, fmt.Errorf("%s (%v)", dir, err))
		}
	}
	if len(left) > 0 {
		t.Errorf("after delete still there: %v", errors.Join(left...))
	}
}

// readInt reads a cgroup file holding one number.
func readInt(t *testing.T, file string) int64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return n
}

// watchMax samples a cgroup file holding one number until stop closes and
// returns the highest value seen.
func watchMax(file string, stop <-chan struct{}) int64 {
	var highest int64
	for {
		if b, err := os.ReadFile(file); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > highest {
				highest = n
			}
		}
		select {
		case <-stop:
			return highest
		case <-time.After(5 * time.Millisecond):
		}
	}
}
