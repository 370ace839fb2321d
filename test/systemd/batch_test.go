package systemd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/controllers/metrics"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/internal/testkit/tinyapp"
)

// batchSize is the batch of issue 32's part 3: Instances applied at once.
const batchSize = 30

// idleWindow is how long the benchmark watches systemd's CPU while the
// batch sits Ready: what watching settled units costs it.
const idleWindow = 5 * time.Second

// rounds counts the benchmark's rounds across its calls.
var rounds int

// batchLimit bounds one round: the batch Ready, or the raw units answering.
const batchLimit = 2 * time.Minute

// BenchmarkBatch applies batchSize Instances of the tiny app at once to
// the systemd backend and, on the same systemd, makes batchSize
// StartTransientUnit calls at once for the same app (each job waited
// for, as the backend waits), each round in turn:
// apply→Ready beside call→answer, pooled over b.N rounds.
//
//	go test -count=1 -run '^$' -bench Batch -benchtime 5x ./test/systemd
func BenchmarkBatch(b *testing.B) {
	app := buildTinyApp(b)
	var ours, raw []time.Duration
	var idle float64
	var starts, prepares histTotal
	for range b.N {
		rounds++ // the framework calls this more than once: names stay new
		s0, p0 := histTotals(b, metrics.NameStartDuration), histTotals(b, metrics.NamePrepareStep)
		lat, busy := applyBatch(b, app, fmt.Sprintf("batch%d", rounds), batchSize, idleWindow)
		starts, prepares = starts.plus(histTotals(b, metrics.NameStartDuration).minus(s0)), prepares.plus(histTotals(b, metrics.NamePrepareStep).minus(p0))
		ours, idle = append(ours, lat...), idle+busy/float64(b.N)
		raw = append(raw, rawBatch(b, app, fmt.Sprintf("raw%d", rounds), batchSize)...)
	}
	b.StopTimer()
	o50, _, o99 := testutil.Percentiles(ours)
	r50, _, r99 := testutil.Percentiles(raw)
	b.ReportMetric(o50*1000, "apply-ready-p50-ms")
	b.ReportMetric(o99*1000, "apply-ready-p99-ms")
	b.ReportMetric(r50*1000, "raw-answer-p50-ms")
	b.ReportMetric(r99*1000, "raw-answer-p99-ms")
	b.ReportMetric(o99/r99, "p99-ratio")
	// Of apply→Ready, the node's own start (prepare, then the backend's
	// calls until the unit is seen running), per start.
	b.ReportMetric(starts.mean()*1000, "node-start-mean-ms")
	b.ReportMetric(prepares.sum/float64(max(starts.n, 1))*1000, "prepare-mean-ms")
	b.ReportMetric(idle*100, "idle-systemd-cpu-%")
	b.ReportMetric(0, "ns/op") // a round's time is its two batches': the metrics above say it
}

// histTotal is a histogram's sum and count over all its series.
type histTotal struct {
	sum float64
	n   uint64
}

func (h histTotal) plus(o histTotal) histTotal  { return histTotal{h.sum + o.sum, h.n + o.n} }
func (h histTotal) minus(o histTotal) histTotal { return histTotal{h.sum - o.sum, h.n - o.n} }
func (h histTotal) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// histTotals reads the histogram name from the reconcilers' registry.
func histTotals(tb testing.TB, name string) histTotal {
	tb.Helper()
	fams, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var t histTotal
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			t.sum += m.GetHistogram().GetSampleSum()
			t.n += m.GetHistogram().GetSampleCount()
		}
	}
	return t
}

// TestBatch runs one small round of the benchmark's two halves, so what
// the benchmark measures keeps working: every Instance Ready and every
// raw unit answering, each latency within the round's limit.
func TestBatch(t *testing.T) {
	app := buildTinyApp(t)
	before := histTotals(t, metrics.NameStartDuration)
	applied, _ := applyBatch(t, app, "tbatch", 3, 0)
	// The benchmark's node-start figure is read from these.
	if got := histTotals(t, metrics.NameStartDuration).minus(before); got.n < 3 || got.sum <= 0 {
		t.Errorf("%s grew by %+v over 3 starts", metrics.NameStartDuration, got)
	}
	for name, lat := range map[string][]time.Duration{
		"apply→Ready": applied,
		"call→answer": rawBatch(t, app, "traw", 3),
	} {
		if len(lat) != 3 {
			t.Errorf("%s: %d latencies, want 3", name, len(lat))
		}
		for _, d := range lat {
			if d <= 0 || d > batchLimit {
				t.Errorf("%s: latency %s", name, d)
			}
		}
	}
}

// buildTinyApp builds the tiny app beneath the state root, which the
// booted systemd's namespace shares (its /tmp is its own).
func buildTinyApp(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join(lay.StateRoot, "tinyapp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	app, err := tinyapp.Build(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return app
}

// batchInstance runs the tiny app with a whole core, so what is measured
// is the start and not the tier's quota.
func batchInstance(name, app string) *v1.Instance {
	return testutil.NewInstance(name, testNode, func(i *v1.Instance) {
		i.Spec.Template.Command = []string{app}
		i.Spec.Template.Tier = v1.Tier{Memory: resource.MustParse("16Mi"), CPU: resource.MustParse("1"), Pids: 8}
		i.Spec.Template.Readiness = &v1.Readiness{HTTPGet: &v1.HTTPGetProbe{Path: "/healthz"}, TimeoutSeconds: 60}
	})
}

// applyBatch creates n Instances at once and returns each one's time from
// its create call to the watch event that shows it Ready, and the share
// of a core systemd used while they then sat Ready for idle (0: not
// watched); then deletes them and waits until every unit is proven gone.
func applyBatch(tb testing.TB, app, prefix string, n int, idle time.Duration) ([]time.Duration, float64) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), batchLimit)
	defer cancel()
	w := watchInstances(tb, ctx)
	defer func() { w.Stop() }()
	names := make([]string, n)
	began := make(map[string]time.Time, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%02d", prefix, i)
		wg.Go(func() {
			mu.Lock()
			began[names[i]] = time.Now()
			mu.Unlock()
			errs <- k8s.Create(ctx, batchInstance(names[i], app))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
	defer deleteBatch(tb, names)
	ready := map[string]time.Duration{}
	for len(ready) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				// Closed by the server: a new watch begins with every
				// Instance as it is now.
				w = watchInstances(tb, ctx)
				continue
			}
			if ev.Type == watch.Error {
				tb.Fatalf("the watch failed: %v", ev.Object)
			}
			i, isInst := ev.Object.(*v1.Instance)
			if !isInst || ev.Type == watch.Deleted {
				continue
			}
			if _, ours := began[i.Name]; ours && ready[i.Name] == 0 && i.Status.ActiveGeneration >= 1 &&
				meta.IsStatusConditionTrue(i.Status.Conditions, v1.ConditionReady) {
				ready[i.Name] = time.Since(began[i.Name])
			}
		case <-ctx.Done():
			tb.Fatalf("%d of %d Ready within %s", len(ready), n, batchLimit)
		}
	}
	lat := make([]time.Duration, 0, n)
	for _, d := range ready {
		lat = append(lat, d)
	}
	if idle == 0 {
		return lat, 0
	}
	before, err := testutil.ProcessCPU(sys.PID())
	if err != nil {
		tb.Fatal(err)
	}
	time.Sleep(idle)
	after, err := testutil.ProcessCPU(sys.PID())
	if err != nil {
		tb.Fatal(err)
	}
	return lat, (after - before).Seconds() / idle.Seconds()
}

// watchInstances watches the test namespace's Instances from now on.
func watchInstances(tb testing.TB, ctx context.Context) watch.Interface {
	tb.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		tb.Fatal(err)
	}
	w, err := c.Watch(ctx, &v1.InstanceList{}, client.InNamespace(testutil.Namespace))
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// deleteBatch deletes the Instances names at once and waits until each
// is gone.
func deleteBatch(tb testing.TB, names []string) {
	tb.Helper()
	for _, name := range names {
		inst := &v1.Instance{}
		inst.Namespace, inst.Name = testutil.Namespace, name
		if err := k8s.Delete(context.Background(), inst); client.IgnoreNotFound(err) != nil {
			tb.Fatal(err)
		}
	}
	for _, name := range names {
		kube.DeleteAndWait(tb, name, deleteLimit)
	}
}

// rawBatch makes n StartTransientUnit calls at once for the tiny app, each
// on its own socket, and returns each one's time from the call to the
// first connection its socket accepts; then stops the units, each
// waited for.
func rawBatch(tb testing.TB, app, prefix string, n int) []time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), batchLimit)
	defer cancel()
	c := busConn(tb)
	lat := make([]time.Duration, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		unit := fmt.Sprintf("unitlet-bench-%s-%02d.service", prefix, i)
		sock := filepath.Join(lay.RunRoot, fmt.Sprintf("%s-%02d.sock", prefix, i))
		defer stopRaw(c, unit, sock)
		wg.Go(func() {
			t0 := time.Now()
			props := []sddbus.Property{
				sddbus.PropExecStart([]string{app}, false),
				{Name: "Environment", Value: godbus.MakeVariant([]string{"UNITLET_APP_SOCKET=" + sock})},
			}
			done := make(chan string, 1)
			if _, err := c.StartTransientUnitContext(ctx, unit, "fail", props, done); err != nil {
				errs <- fmt.Errorf("start %s: %w", unit, err)
				return
			}
			<-done
			if err := testutil.WaitAccepts(ctx, sock); err != nil {
				errs <- err
				return
			}
			lat[i] = time.Since(t0)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return lat
}

// stopRaw stops a raw unit, waiting for its job, and removes its socket.
func stopRaw(c *sddbus.Conn, unit, sock string) {
	done := make(chan string, 1)
	if _, err := c.StopUnitContext(context.Background(), unit, "replace", done); err == nil {
		<-done
	}
	_ = os.Remove(sock)
}
