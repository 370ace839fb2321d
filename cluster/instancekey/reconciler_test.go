package instancekey

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/instancekey"
	"github.com/unitlet/unitlet/internal/scheme"
	"github.com/unitlet/unitlet/internal/testkit/testenv"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

var k8s client.Client

const (
	keyNS     = "unitlet-keys"
	waitLimit = 20 * time.Second
	pollEvery = 50 * time.Millisecond
)

func TestMain(m *testing.M) {
	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	ctx, cancel := context.WithCancel(context.Background())
	code := func() int {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keyNS}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// As cluster/main.go has it: the key namespace's Secrets only.
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"},
			Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Namespaces: map[string]cache.Config{keyNS: {}}}}}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), KeyNamespace: keyNS}
		if err := r.SetupWithManager(mgr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() { _ = mgr.Start(ctx) }()
		return m.Run()
	}()
	cancel()
	_ = env.Stop()
	os.Exit(code)
}

// unplaced is an Instance no agent hosts: the key is the cluster's alone.
func unplaced(t *testing.T, name string) *v1.Instance {
	t.Helper()
	inst := &v1.Instance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.InstanceSpec{Host: name + ".example.com", Strategy: v1.StrategyOverlap,
			Template: v1.Template{Command: []string{"/usr/bin/app"},
				Tier: v1.Tier{Memory: resource.MustParse("64Mi"), CPU: resource.MustParse("100m"), Pids: 32}}},
	}
	if err := k8s.Create(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), inst) })
	return inst
}

// waitKey waits until the Instance's status names a key other than not,
// and returns the Instance and its key Secret.
func waitKey(t *testing.T, name, not string) (*v1.Instance, *corev1.Secret) {
	t.Helper()
	inst, s := &v1.Instance{}, &corev1.Secret{}
	testutil.Eventually(t, name+" key minted", waitLimit, pollEvery, func() (bool, string) {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, inst); err != nil {
			return false, err.Error()
		}
		if fp := inst.Status.KeyFingerprint; fp == "" || fp == not {
			return false, "fingerprint " + fp
		}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: keyNS, Name: instancekey.SecretName(inst.UID)}, s); err != nil {
			return false, err.Error()
		}
		return instancekey.Fingerprint(s.Data[instancekey.DataKey]) == inst.Status.KeyFingerprint, "secret's key is not the status's"
	})
	return inst, s
}

func TestMintOnce(t *testing.T) {
	unplaced(t, "mint")
	inst, s := waitKey(t, "mint", "")
	if len(s.Data[instancekey.DataKey]) != 64 {
		t.Errorf("key %q: want 64 hex characters", s.Data[instancekey.DataKey])
	}
	// The first status written says a new Instance is under way (kstatus
	// would read one without conditions as Current).
	if c := meta.FindStatusCondition(inst.Status.Conditions, v1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue ||
		c.Reason != v1.ReasonProgressing || c.ObservedGeneration != inst.Generation {
		t.Errorf("the first status's conditions %+v, want Reconciling=True (Progressing) at generation %d", inst.Status.Conditions, inst.Generation)
	}
	want := map[string]string{instancekey.LabelInstanceNamespace: "default", v1.LabelInstance: "mint"}
	if diff := cmp.Diff(want, s.Labels); diff != "" {
		t.Errorf("labels (-want,+got):\n%s", diff)
	}
	// Another reconcile (any change of the Instance) mints nothing new.
	annotate(t, inst.Name, "example.com/touch", "1")
	time.Sleep(time.Second)
	_, again := waitKey(t, "mint", "")
	if string(again.Data[instancekey.DataKey]) != string(s.Data[instancekey.DataKey]) {
		t.Error("the key changed without a rotation")
	}
}

func TestRotate(t *testing.T) {
	unplaced(t, "rotate")
	inst, s := waitKey(t, "rotate", "")
	old := inst.Status.KeyFingerprint
	annotate(t, inst.Name, v1.AnnotationRotateKey, "1")
	inst, s2 := waitKey(t, "rotate", old)
	if string(s2.Data[instancekey.DataKey]) == string(s.Data[instancekey.DataKey]) {
		t.Fatal("rotation kept the key")
	}
	got := []string{s2.Annotations[instancekey.AnnotationRotatedFor], s2.Annotations[instancekey.AnnotationPrevious]}
	if diff := cmp.Diff([]string{"1", old}, got); diff != "" {
		t.Errorf("rotated-for, previous (-want,+got):\n%s", diff)
	}
	if inst.Status.KeyFingerprint != s2.Annotations[instancekey.AnnotationFingerprint] {
		t.Errorf("status %s, secret records %s", inst.Status.KeyFingerprint, s2.Annotations[instancekey.AnnotationFingerprint])
	}
}

func TestLostKeyWaitsForRotation(t *testing.T) {
	unplaced(t, "lost")
	inst, s := waitKey(t, "lost", "")
	old := inst.Status.KeyFingerprint
	if err := k8s.Delete(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the Secret's deletion was seen and reconciled
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a lost key was minted again without a rotation: %v", err)
	}
	annotate(t, inst.Name, v1.AnnotationRotateKey, "lost")
	_, s2 := waitKey(t, "lost", old)
	if got := s2.Annotations[instancekey.AnnotationPrevious]; got != old {
		t.Errorf("previous = %q, want the lost key's %q", got, old)
	}
}

func TestSweepGoneInstance(t *testing.T) {
	inst := unplaced(t, "sweep")
	_, s := waitKey(t, "sweep", "")
	// A key left by a former Instance of the same name goes too.
	stale := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keyNS, Name: instancekey.SecretName("former"), Labels: s.Labels}}
	if err := k8s.Create(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	waitGone(t, stale)
	if err := k8s.Delete(context.Background(), inst); err != nil {
		t.Fatal(err)
	}
	waitGone(t, s)
}

func waitGone(t *testing.T, s *corev1.Secret) {
	t.Helper()
	testutil.Eventually(t, s.Name+" deleted", waitLimit, pollEvery, func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), &corev1.Secret{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// annotate sets one annotation of the Instance, retrying conflicts.
func annotate(t *testing.T, name, key, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		inst := &v1.Instance{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, inst); err != nil {
			return err
		}
		if inst.Annotations == nil {
			inst.Annotations = map[string]string{}
		}
		inst.Annotations[key] = value
		return k8s.Update(context.Background(), inst)
	})
	if err != nil {
		t.Fatalf("annotate %s: %v", name, err)
	}
}
