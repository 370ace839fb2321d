package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/unitlet/unitlet/api/v1alpha1"
	"github.com/unitlet/unitlet/internal/testkit/escapeprobe/report"
	"github.com/unitlet/unitlet/internal/testkit/nodevm"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
)

// metadataAddr stands in for the cloud metadata service inside the VM: a
// dummy interface of the guest's own holds it, so a connect that got
// through would reach only the test's listener there.
const metadataAddr = "169.254.169.254"

// escapeMatrix: on the systemd backend (pure cgroup v2), a tenant's app
// tries each way to reach another tenant or the node beside one that
// left traces, and the metadata address; nothing gets through, and the
// guest's stand-in for the metadata service sees no connection. Then
// systemd-analyze security rates a sample Instance's unit.
func escapeMatrix(t *testing.T) {
	probe := "/usr/local/bin/escapeprobe"
	bin, err := os.ReadFile(testutil.EscapeProbe(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.WriteFile(context.Background(), probe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	seen := "/root/metadata-connections"
	guest(t, "modprobe dummy && ip link add meta0 type dummy && ip addr add "+metadataAddr+"/32 dev meta0 && ip link set meta0 up")
	// Nothing may be dialled before the address is the guest's own.
	if r := guest(t, "ip route get "+metadataAddr); !strings.HasPrefix(r, "local "+metadataAddr) {
		t.Fatalf("the metadata address is not the guest's own: %q", r)
	}
	guest(t, "rm -f "+seen+"; systemd-run --unit=metadata-standin "+probe+" listen "+metadataAddr+":80 "+seen)
	t.Cleanup(func() { guest(t, "systemctl stop metadata-standin; ip link del meta0 || true") })
	// The stand-in counts: the guest itself, outside any Instance, reaches it.
	eventually(t, "the guest reaches the metadata stand-in", 30*time.Second, func() (bool, string) {
		out := guest(t, "timeout 3 bash -c 'exec 3<>/dev/tcp/"+metadataAddr+"/80' && sleep 0.2 && wc -l < "+seen+" || true")
		return out == "1", out
	})

	marker := "unitlet-escape-node"
	for _, p := range []struct{ name, mode string }{{"escape-holder", "hold"}, {"escape-probe", "probe"}} {
		inst := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", nodeName)
		inst.Name, inst.Spec.Host = p.name, p.name+".example.com"
		testutil.EscapeApp(probe, p.mode, marker)(inst)
		inst.Spec.Template.Env = append(inst.Spec.Template.Env, v1.EnvVar{Name: "PROBE_METADATA", Value: metadataAddr + ":80"})
		if err := k8s.Create(context.Background(), inst); err != nil {
			t.Fatal(err)
		}
	}
	kube.WaitServing(t, "escape-holder", 1)
	kube.WaitServing(t, "escape-probe", 1)
	li, _ := nodevm.NodeLayout.Instance(testutil.Namespace, "escape-probe")
	var rows []report.Row
	eventually(t, "the probe's report", time.Minute, func() (bool, string) {
		out, err := vm.Run(context.Background(), "cat "+filepath.Join(li.DataDir(), "escape.json"))
		if err != nil {
			return false, err.Error()
		}
		rows, err = report.Parse([]byte(out))
		return err == nil, out
	})
	t.Logf("escape matrix, systemd backend, cgroup v2:\n%s", report.Table(rows))
	for _, e := range report.Escapes(rows) {
		t.Error("escaped: " + e)
	}
	if len(rows) != report.Rows+1 {
		t.Errorf("report has %d rows, want %d with the metadata row", len(rows), report.Rows+1)
	}
	if n := guest(t, "wc -l < "+seen); n != "1" {
		t.Errorf("the metadata stand-in saw %s connections, want 1 (the guest's own): an Instance reached it", n)
	}

	// Allowed by an administrator's grant, the same dial reaches the
	// stand-in: the dummy interface of the guest's own, nothing further.
	grant := &v1.UserGrant{
		ObjectMeta: metav1.ObjectMeta{Name: "nobody-metadata"},
		Spec:       v1.UserGrantSpec{User: "nobody", Namespaces: []string{testutil.Namespace}, Nodes: []string{nodeName}, CloudMetadata: true},
	}
	if err := k8s.Create(context.Background(), grant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), grant) })
	allowed := testutil.Sample(t, "hosting_v1alpha1_instance_replace.yaml", nodeName)
	allowed.Name, allowed.Spec.Host = "escape-allowed", "escape-allowed.example.com"
	testutil.EscapeApp(probe, "probe", marker)(allowed)
	allowed.Spec.Template.User = "nobody"
	allowed.Spec.Template.Network = &v1.Network{CloudMetadata: v1.CloudMetadataAllow}
	allowed.Spec.Template.Env = append(allowed.Spec.Template.Env, v1.EnvVar{Name: "PROBE_METADATA", Value: metadataAddr + ":80"})
	if err := k8s.Create(context.Background(), allowed); err != nil {
		t.Fatal(err)
	}
	kube.WaitServing(t, "escape-allowed", 1)
	eventually(t, "the allowed Instance reaches the stand-in", time.Minute, func() (bool, string) {
		n := guest(t, "wc -l < "+seen)
		return n == "2", n + " connections seen"
	})

	unit := kube.Generation(t, "escape-probe", 1).Status.Unit
	// The unit name holds systemd's \x2d escapes: quoted for the shell.
	rating := guest(t, "systemd-analyze security --no-pager '"+unit+"' 2>&1 || true")
	t.Logf("systemd-analyze security %s:\n%s", unit, rating)
	if !strings.Contains(rating, "Overall exposure level") {
		t.Errorf("systemd-analyze security rated nothing: %q", rating)
	}
	for _, name := range []string{"escape-probe", "escape-holder", "escape-allowed"} {
		kube.DeleteAndWait(t, name, 3*time.Minute)
	}
}
