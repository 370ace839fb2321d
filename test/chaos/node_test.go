package chaos

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	ocgroups "github.com/opencontainers/cgroups"

	"github.com/unitlet/unitlet/internal/testkit/agentproc"
	"github.com/unitlet/unitlet/internal/testkit/testutil"
	"github.com/unitlet/unitlet/runtime/layout"
)

// The node's truth, read from the kernel and the file system without the
// agent: the pids hierarchy (every process of a unit is in it on this
// hybrid machine), /proc, the agent's roots.

const pidsHierarchy = "/sys/fs/cgroup/pids"

// pidsUnder lists every process in a cgroup subtree (none when it does not
// exist).
func pidsUnder(cgroup string) []int {
	pids, _ := ocgroups.GetAllPids(filepath.Join(pidsHierarchy, cgroup))
	return pids
}

// command is a process's name ("" once it is gone).
func command(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// appsOf are the processes of pids that are the chaos app itself (not the
// shim that supervises it).
func appsOf(pids []int) []int {
	var out []int
	for _, p := range pids {
		if strings.HasPrefix(command(p), "python") {
			out = append(out, p)
		}
	}
	return out
}

func instanceCgroup(a *agentproc.Agent, name string) string {
	return layout.InstanceCgroup(a.CgroupRoot, testutil.Namespace, name)
}

// genCgroup is where generation n of Instance name runs on a's node.
func genCgroup(a *agentproc.Agent, name string, n int64) string {
	child, _ := layout.GenerationCgroup(int64(n))
	return filepath.Join(instanceCgroup(a, name), child)
}

// populatedGens maps each generation of Instance name whose cgroup holds a
// process to those processes.
func populatedGens(a *agentproc.Agent, name string) map[int64][]int {
	ents, err := os.ReadDir(filepath.Join(pidsHierarchy, instanceCgroup(a, name)))
	if err != nil {
		return nil
	}
	out := map[int64][]int{}
	for _, e := range ents {
		n, ok := layout.ParseGenerationCgroup(e.Name())
		if !e.IsDir() || !ok {
			continue
		}
		if pids := pidsUnder(genCgroup(a, name, int64(n))); len(pids) > 0 {
			out[int64(n)] = pids
		}
	}
	return out
}

// instancesOnNode are the Instance names a's cgroup root holds a cgroup
// for (in any state).
func instancesOnNode(a *agentproc.Agent) []string {
	ents, _ := os.ReadDir(filepath.Join(pidsHierarchy, a.CgroupRoot))
	var out []string
	for _, e := range ents {
		if ns, name, ok := layout.ParseInstanceCgroup(e.Name()); ok && ns == testutil.Namespace {
			out = append(out, name)
		}
	}
	return out
}

// leftovers lists what of Instance name remains on a's node: cgroups in
// any hierarchy, its data, private and run dirs.
func leftovers(a *agentproc.Agent, name string) []string {
	var out []string
	hier, _ := os.ReadDir("/sys/fs/cgroup")
	for _, h := range hier {
		p := filepath.Join("/sys/fs/cgroup", h.Name(), instanceCgroup(a, name))
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	li, err := a.Layout().Instance(testutil.Namespace, name)
	if err != nil {
		return append(out, err.Error())
	}
	for _, d := range []string{li.DataDir(), li.PrivateDir(), li.RunDir()} {
		if _, err := os.Lstat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}
