package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// The test binary doubles as the guarded process: with helperEnv set it
// moves itself into the cgroup named there, guards it when asked, and
// dials each address given, printing one outcome per line.
const (
	helperEnv = "NETGUARD_TEST_CGROUP"
	guardEnv  = "NETGUARD_TEST_GUARD"
	dialEnv   = "NETGUARD_TEST_DIAL"
)

func TestMain(m *testing.M) {
	if cg := os.Getenv(helperEnv); cg != "" {
		os.Exit(helper(cg))
	}
	os.Exit(m.Run())
}

// helper enters the test's network namespace (fd 3) before anything
// else, and dials nothing if it cannot: no dial may leave that namespace.
func helper(cg string) int {
	runtime.LockOSThread()
	if err := unix.Setns(3, unix.CLONE_NEWNET); err != nil {
		fmt.Println("enter the test's network namespace:", err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte("0"), 0); err != nil {
		fmt.Println("join:", err)
		return 1
	}
	if os.Getenv(guardEnv) == "1" {
		if err := DenyOwnCgroup(MetadataAddrs); err != nil {
			fmt.Println("guard:", err)
			return 1
		}
	}
	for _, target := range strings.Fields(os.Getenv(dialEnv)) {
		network, addr, _ := strings.Cut(target, "/")
		fmt.Printf("%s %s\n", target, outcome(dial(network, netip.MustParseAddrPort(addr))))
	}
	return 0
}

// dial connects a raw socket (Go's dialer refuses an IPv4-mapped address
// on tcp6) and sends a byte on a datagram socket.
func dial(network string, ap netip.AddrPort) error {
	family, typ := unix.AF_INET6, unix.SOCK_STREAM
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	if network == "tcp4" || network == "udp4" {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	if strings.HasPrefix(network, "udp") {
		typ = unix.SOCK_DGRAM
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if typ == unix.SOCK_DGRAM {
		return unix.Sendto(fd, []byte("x"), 0, sa)
	}
	return unix.Connect(fd, sa)
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, unix.EPERM):
		return "EPERM"
	}
	return err.Error()
}

// TestMetadataDenied proves the guard inside a network namespace of the
// test's own, where 169.254.169.254 and fd00:ec2::254 sit on that
// namespace's loopback (the test machine's kernel has no dummy driver)
// with listeners behind them: guarded, every connect and
// datagram fails with EPERM and the listeners see nothing; unguarded, the
// same dials reach those listeners (and nothing else: the namespace has
// no other interface).
func TestMetadataDenied(t *testing.T) {
	cgRoot := cgroup2Root(t)
	runtime.LockOSThread() // the namespace is this thread's; never unlocked, so the thread dies with the test
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	netns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer netns.Close()
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", "169.254.169.254/32", "dev", "lo"},
		{"addr", "add", "fd00:ec2::254/128", "dev", "lo", "nodad"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	tcp4, accepted4 := listen(t, "tcp4", "169.254.169.254:80")
	tcp6, accepted6 := listen(t, "tcp6", "[fd00:ec2::254]:80")
	udp, received := listenUDP(t, "169.254.169.254:53")
	dials := strings.Join([]string{
		"tcp4/" + tcp4, "tcp6/" + tcp6, "tcp6/[::ffff:169.254.169.254]:" + port(tcp4), "udp4/" + udp,
	}, " ")

	for name, tc := range map[string]struct {
		guard bool
		want  string
		seen  int
	}{
		"guarded":   {guard: true, want: "EPERM", seen: 0},
		"unguarded": {guard: false, want: "ok", seen: 4},
	} {
		t.Run(name, func(t *testing.T) {
			cg := filepath.Join(cgRoot, fmt.Sprintf("unitlet-netguard-test-%d-%s", os.Getpid(), name))
			if err := os.Mkdir(cg, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Remove(cg) })
			before := *accepted4 + *accepted6 + *received
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.ExtraFiles = []*os.File{netns} // fd 3: the helper dials only from inside it
			cmd.Env = []string{helperEnv + "=" + cg, dialEnv + "=" + dials, guardEnv + "=" + map[bool]string{true: "1"}[tc.guard]}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v: %s", err, out)
			}
			var want []string
			for _, d := range strings.Fields(dials) {
				want = append(want, d+" "+tc.want)
			}
			if diff := cmp.Diff(want, strings.Split(strings.TrimSpace(string(out)), "\n")); diff != "" {
				t.Errorf("outcomes (-want,+got):\n%s", diff)
			}
			time.Sleep(100 * time.Millisecond) // let the listeners count
			if got := *accepted4 + *accepted6 + *received - before; got != tc.seen {
				t.Errorf("the namespace's listeners saw %d connections or datagrams, want %d", got, tc.seen)
			}
		})
	}
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func listen(t *testing.T, network, addr string) (string, *int) {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	n := new(int)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			*n++
			c.Close()
		}
	}()
	return l.Addr().String(), n
}

func listenUDP(t *testing.T, addr string) (string, *int) {
	t.Helper()
	c, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	n := new(int)
	go func() {
		buf := make([]byte, 16)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
			*n++
		}
	}()
	return c.LocalAddr().String(), n
}

// cgroup2Root is where cgroup2 is mounted (the unified hierarchy on a
// hybrid host).
func cgroup2Root(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroups, a network namespace and BPF")
	}
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup2"))
	if err != nil || len(mounts) == 0 {
		t.Fatalf("no cgroup2 hierarchy (every machine the suites run on has one): %v", err)
	}
	return mounts[0].Mountpoint
}

func TestPrograms(t *testing.T) {
	for name, tc := range map[string]struct {
		deny           []string
		wantV4, wantV6 int
	}{
		"metadata":  {deny: []string{"169.254.169.254", "fd00:ec2::254"}, wantV4: 1, wantV6: 2},
		"v4 mapped": {deny: []string{"::ffff:10.0.0.1"}, wantV4: 1, wantV6: 1},
		"v6 only":   {deny: []string{"fd00::1"}, wantV4: 0, wantV6: 1},
	} {
		t.Run(name, func(t *testing.T) {
			var addrs []netip.Addr
			for _, d := range tc.deny {
				addrs = append(addrs, netip.MustParseAddr(d))
			}
			v4, v6 := split(addrs)
			if len(v4) != tc.wantV4 || len(v6) != tc.wantV6 {
				t.Fatalf("split: %d IPv4, %d IPv6; want %d, %d", len(v4), len(v6), tc.wantV4, tc.wantV6)
			}
			// Every jump of both programs lands inside them.
			for _, p := range [][]insn{program4(v4), program6(v6)} {
				for i, in := range p {
					if in.code&0x07 == classJMP || in.code&0x07 == classJMP32 {
						if in.code == classJMP|opEXIT {
							continue
						}
						if dst := i + 1 + int(in.off); dst <= i || dst >= len(p) {
							t.Errorf("instruction %d jumps to %d of %d", i, dst, len(p))
						}
					}
				}
			}
		})
	}
}
