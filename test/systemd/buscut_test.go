package systemd

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// busProxy sits between the agent's runtime and the bus: it passes every
// byte through until armed, then cuts the connection (both ends closed)
// right after it has passed on the StartTransientUnit call of the unit it
// was armed for, so systemd gets
// the call and the caller never gets the answer.
type busProxy struct {
	path, target string
	mu           sync.Mutex
	armed        string // the unit whose start call is cut after
	cuts         []time.Time
}

var bus *busProxy

// startBusProxy listens on a socket beside the bus's.
func startBusProxy(dir, target string) (*busProxy, error) {
	p := &busProxy{path: filepath.Join(dir, "bus-proxy.sock"), target: target}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
	return p, nil
}

// connect is the runtime's Connect: the booted systemd, through the proxy.
func (p *busProxy) connect(ctx context.Context) (*sddbus.Conn, error) {
	return sys.ConnAt(ctx, p.path)
}

func (p *busProxy) arm(unit string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = unit
}

// cutAt lists when the proxy cut a connection.
func (p *busProxy) cutAt() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.cuts)
}

func (p *busProxy) pipe(c net.Conn) {
	up, err := net.Dial("unix", p.target)
	if err != nil {
		c.Close()
		return
	}
	defer up.Close()
	defer c.Close()
	go func() { _, _ = io.Copy(c, up); c.Close(); up.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			cut := p.cutAfter(buf[:n])
			if cut {
				// The caller's end first: whatever the bus answers to
				// this call can no longer reach it.
				c.Close()
			}
			if _, werr := up.Write(buf[:n]); werr != nil || cut {
				return // the deferred closes cut the bus's end
			}
		}
		if err != nil {
			return
		}
	}
}

// cutAfter reports (once per arming) that chunk carried the start call.
func (p *busProxy) cutAfter(chunk []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed == "" || !bytes.Contains(chunk, []byte("StartTransientUnit")) || !bytes.Contains(chunk, []byte(p.armed)) {
		return false
	}
	p.armed = ""
	p.cuts = append(p.cuts, time.Now())
	return true
}

// TestBusCutAfterStart: the bus connection is cut right after a
// generation's start call was written to it. The answer is lost, and so
// (the bus drops a dead sender's call) is the start. The Instance must say
// at once that the start may have run (StartUncertain), never claim it
// ran; once the readiness timeout gives the start up, its unit is proven
// gone and a successor serves: nothing ran twice, and nothing is left
// waiting for an edit.
func TestBusCutAfterStart(t *testing.T) {
	inst := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", testNode)
	inst.Name, inst.Spec.Host = "buscut", "buscut.example.com"
	inst.Spec.Template.Readiness.TimeoutSeconds = 5
	li := instanceLayout(t, inst.Name)
	unit := proc(t, li, 1).UnitName()
	bus.arm(unit)
	create(t, inst)
	var cut time.Time
	testutil.Eventually(t, "the start call cut", 30*time.Second, pollEvery, func() (bool, string) {
		cuts := bus.cutAt()
		if len(cuts) == 0 {
			return false, "no cut yet"
		}
		cut = cuts[0]
		return true, ""
	})
	// Said at once: StartUncertain=True on the Instance or, when the call
	// reached systemd before the cut and a look resolved it (between two
	// polls of this test, or before the uncertainty was even written),
	// the MayHaveRun Event.
	testutil.Eventually(t, "the start's uncertainty said", 5*time.Second, pollEvery, func() (bool, string) {
		i := kube.Instance(t, inst.Name)
		if meta.IsStatusConditionTrue(i.Status.Conditions, v1.ConditionStartUncertain) {
			return true, ""
		}
		return uncertaintyEvent(t, inst.Name+"-g1"), testutil.Conditions(i.Status.Conditions)
	})
	if late := time.Since(cut); late > time.Second {
		t.Errorf("the uncertainty shown %s after the start's answer was lost, limit 1s", late)
	}

	c := busConn(t)
	var served *v1.Instance
	testutil.Eventually(t, "a generation serving", 2*time.Minute, pollEvery, func() (bool, string) {
		served = kube.Instance(t, inst.Name)
		return served.Status.ActiveGeneration != 0 && meta.IsStatusConditionTrue(served.Status.Conditions, v1.ConditionReady),
			testutil.Conditions(served.Status.Conditions)
	})
	if served.Status.ActiveGeneration == 1 {
		// The bus had the whole call before the cut: the unit runs, once,
		// and only a look at it (not the lost answer) said so.
		g1 := kube.Generation(t, inst.Name, 1)
		props, err := c.GetUnitTypePropertiesContext(context.Background(), unit, "Service")
		if err != nil {
			t.Fatal(err)
		}
		if pid, _ := props["MainPID"].(uint32); pid == 0 || g1.Status.MainPID != int64(pid) {
			t.Errorf("generation 1 says %s with pid %d; systemd runs pid %d", testutil.Conditions(g1.Status.Conditions), g1.Status.MainPID, pid)
		}
		if body, err := testutil.UnixGet(served.Status.Socket, "/"); err != nil || body != "ledger ok\n" {
			t.Errorf("GET after the cut = %q, %v", body, err)
		}
		return
	}
	if served.Status.ActiveGeneration != 2 {
		t.Fatalf("generation %d serves, want 1 (the call arrived) or 2 (it was dropped)", served.Status.ActiveGeneration)
	}
	g1 := kube.Generation(t, inst.Name, 1)
	if !meta.IsStatusConditionTrue(g1.Status.Conditions, v1.ConditionTerminated) ||
		meta.IsStatusConditionTrue(g1.Status.Conditions, v1.ConditionStarted) {
		t.Errorf("generation 1 after its start was given up: %s", testutil.Conditions(g1.Status.Conditions))
	}
	if load, active := unitState(t, c, unit); load == "loaded" && active != "inactive" {
		t.Errorf("generation 1's unit is %s/%s after it was proven gone", load, active)
	}
	g2 := kube.Generation(t, inst.Name, 2)
	props, err := c.GetUnitTypePropertiesContext(context.Background(), proc(t, li, 2).UnitName(), "Service")
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := props["MainPID"].(uint32); pid == 0 || g2.Status.MainPID != int64(pid) {
		t.Errorf("generation 2 says %s with pid %d; systemd runs pid %d", testutil.Conditions(g2.Status.Conditions), g2.Status.MainPID, pid)
	}
	if body, err := testutil.UnixGet(served.Status.Socket, "/"); err != nil || body != "ledger ok\n" {
		t.Errorf("GET after the cut = %q, %v", body, err)
	}
}

// uncertaintyEvent: the Generation gen has a Warning Event saying its
// start may have run.
func uncertaintyEvent(t *testing.T, gen string) bool {
	t.Helper()
	var evs eventsv1.EventList
	if err := kube.Client.List(context.Background(), &evs, client.InNamespace(testutil.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Regarding.Name == gen && (e.Reason == v1.ReasonMayHaveRun || e.Reason == v1.ReasonQueuedJobMayRun) {
			return true
		}
	}
	return false
}
