// Package prepare does everything a role or generation of an instance
// needs on the node before its unit starts: directories, the admin token,
// the merged environment, stale records and sockets cleared, and the
// control and log listeners bound. Each step is timed; the listeners are
// returned so the caller can hand them on, or close them all on failure.
package prepare

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/unitlet/unitlet/runtime/control"
	"github.com/unitlet/unitlet/runtime/instancefs"
	"github.com/unitlet/unitlet/runtime/launch"
	"github.com/unitlet/unitlet/runtime/layout"
	"github.com/unitlet/unitlet/runtime/logs"
	"github.com/unitlet/unitlet/runtime/netguard"
)

// Request is one role or generation to prepare.
type Request struct {
	Instance layout.Instance
	Host     string
	Role     layout.Role
	// Generation: for the run role the generation prepared; for cmd the
	// generation it runs against (its env comes from that launch file);
	// 0 for seed and sidecar.
	Generation int64
	// Name is the sidecar's or the command's name.
	Name string
	// SocketGID owns the run dir and sockets (so a proxy in that group can
	// connect); -1 leaves them root's.
	SocketGID int
	// App is who the process runs as: it owns the data dir and the
	// generation dir (so the app can write and bind there), and the
	// launch file names it.
	App launch.Identity
	// SpecEnv is the Instance's env; RefEnv the referenced Secret and
	// ConfigMap data. Platform variables win over both.
	SpecEnv, RefEnv map[string]string
	// InstanceKey is the Instance's key, given as EnvInstanceKey ("":
	// none, a generation made before instance keys).
	InstanceKey string
	// Fence and State serve the control socket (run role only).
	Fence control.Fence
	State func() string
	// LogFile receives the output lines; required except for cmd.
	LogFile *logs.RotatingFile
	// Logger receives the output lines and the control server's errors.
	Logger logr.Logger
	// RootInUserNamespace runs the process as uid 0 in a user namespace
	// whose 0 is App (a granted root): App still owns the files.
	RootInUserNamespace bool
	// AllowMetadata lets the process reach the cloud metadata service
	// (where an administrator's grant allows it); by default its cgroup
	// refuses every connect and datagram to it.
	AllowMetadata bool
}

// Result is a prepared role or generation. Close releases what it holds.
type Result struct {
	Slot layout.Slot
	Env  map[string]string
	// Layers says for each key of Env which layer it came from, decided by
	// the same env file read that produced Env.
	Layers  map[string]Layer
	Control *control.Server // nil: not a run role, or the bind failed (see Warnings)
	Logs    *logs.Listener  // nil for cmd
	// Warnings are failures prepare continued past: a control bind, an
	// env key under UNITLET_ from spec or refs (dropped).
	Warnings []error
	Timings  Timings
	// Listen, set by the caller before WriteLaunch, is where an activated
	// generation fetches its listening socket.
	Listen *launch.Listen
	// Terminal, set by the caller before WriteLaunch, is a TTY run's
	// terminal hand-off.
	Terminal *launch.Terminal

	identity    launch.Identity
	networkDeny []string
	userns      bool
}

// Close closes the listeners; safe on a partly filled Result.
func (r *Result) Close() error {
	var errs []error
	if r.Control != nil {
		errs = append(errs, r.Control.Close())
		r.Control = nil
	}
	if r.Logs != nil {
		errs = append(errs, r.Logs.Close())
		r.Logs = nil
	}
	return errors.Join(errs...)
}

// EnvList is Env as sorted KEY=VALUE entries.
func (r *Result) EnvList() []string { return envList(r.Env) }

// WriteLaunch writes the launch file for this process beneath the
// private dir (atomic, 0600), with argv expanded against Env ($(NAME)),
// exactly Env as its environment, the request's identity, and the
// instance's data and run dirs as the only writable paths.
func (r *Result) WriteLaunch(host string, argv []string, workingDir string) error {
	env, memory := splitMemoryEnv(r.Env)
	expanded := make([]string, len(argv))
	for i, a := range argv {
		// Not against the memory env: argv is in this file, and in every
		// process's view of the node (/proc/<pid>/cmdline).
		expanded[i] = Expand(a, env)
	}
	inst := r.Slot.Instance()
	var memoryFile string
	if len(memory) > 0 {
		if err := launch.WriteMemoryEnv(inst.RunDir(), r.Slot.MemoryEnvFile(), memory); err != nil {
			return err
		}
		memoryFile = filepath.Join(inst.RunDir(), r.Slot.MemoryEnvFile())
	}
	f := launch.File{Schema: launch.Schema, Host: host, Argv: expanded, Env: envList(env), MemoryEnv: memoryFile, WorkingDir: workingDir,
		Identity: r.identity, Writable: []string{inst.DataDir(), inst.RunDir()}, Listen: r.Listen,
		NetworkDeny: r.networkDeny, Terminal: r.Terminal}
	if r.userns {
		f.Identity = launch.Identity{User: r.identity.User}
		f.UserNamespace = &launch.IDMap{UID: r.identity.UID, GID: r.identity.GID}
	}
	return launch.Write(inst.PrivateDir(), r.Slot.LaunchFile(), f)
}

// Prepare runs the steps for req in order. On error everything opened so
// far is closed and the Result is nil.
func Prepare(req Request) (res *Result, err error) {
	res = &Result{}
	res.Timings.begin(time.Now())
	nameGen := req.Generation
	if req.Role != layout.RoleApp {
		nameGen = 0 // a cmd's own names are not keyed by its generation
	}
	p, err := req.Instance.Slot(req.Role, nameGen, req.Name)
	if err != nil {
		return nil, err
	}
	if req.Role == layout.RoleCommand && req.Generation == 0 {
		return nil, fmt.Errorf("cmd role: %w: the generation it runs against is needed", layout.ErrNotAGeneration)
	}
	if req.Role != layout.RoleCommand && req.LogFile == nil {
		return nil, errors.New("prepare: no log file")
	}
	res.Slot, res.identity, res.userns = p, req.App, req.RootInUserNamespace
	if !req.AllowMetadata {
		res.networkDeny = netguard.MetadataStrings()
	}
	defer func() {
		if err != nil {
			res.Close()
			res = nil
		}
	}()

	dirs, err := makeDirs(req, p)
	if err != nil {
		return res, err
	}
	defer dirs.close()
	res.Timings.mark(StepDirs)

	if err := prepareEnv(req, p, res); err != nil {
		return res, err
	}

	if err := removeExitRecords(dirs.run, p.ExitPrefix()); err != nil {
		return res, err
	}
	res.Timings.mark(StepExitRecords)

	if req.Role == layout.RoleApp {
		if err := removeStale(dirs.gen, layout.AppSocketName); err != nil {
			return res, fmt.Errorf("stale app socket: %w", err)
		}
		res.Timings.mark(StepAppSocket)
		bindControl(req, p, dirs, res)
		res.Timings.mark(StepControlSocket)
	}

	if req.Role != layout.RoleCommand {
		if res.Logs, err = listenLogs(req, p, dirs); err != nil {
			return res, err
		}
		res.Timings.mark(StepLogs)
	}
	return res, nil
}

// prepareEnv sets res.Env: a cmd's from its generation's launch file,
// every other role's merged from the spec, the referenced data and the
// platform's variables (with the admin token, minted once).
func prepareEnv(req Request, p layout.Slot, res *Result) error {
	inst := req.Instance
	if req.Role == layout.RoleCommand {
		return cmdEnv(res, inst, req.Generation)
	}
	token, err := ensureToken(inst)
	if err != nil {
		return fmt.Errorf("admin token of %s/%s: %w", inst.Namespace(), inst.Name(), err)
	}
	res.Timings.mark(StepAdminToken)
	appSocket := ""
	if p.Generation() != 0 {
		appSocket, _ = inst.AppSocket(p.Generation())
	}
	var warnings []error
	res.Env, res.Layers, warnings, err = mergeEnv(req.SpecEnv, req.RefEnv, platformEnv(req, p, token, appSocket))
	if err != nil {
		return err
	}
	res.Warnings = append(res.Warnings, warnings...)
	res.Timings.mark(StepEnv)
	return nil
}

// listenLogs binds the slot's log socket afresh (and its FIFO).
func listenLogs(req Request, p layout.Slot, dirs openDirs) (*logs.Listener, error) {
	inst := req.Instance
	sock := p.LogSocket()
	if err := removeStale(dirs.log, filepath.Base(sock)); err != nil {
		return nil, fmt.Errorf("stale log socket: %w", err)
	}
	l, err := logs.Listen(sock, logs.Options{
		Labels: logs.Labels{Namespace: inst.Namespace(), Name: inst.Name(), Host: req.Host, Role: p.Role(), Generation: p.Generation(), Sidecar: p.SidecarName()},
		File:   req.LogFile,
		Logger: req.Logger,
		// Beside the socket: the systemd backend's trampoline writes
		// here, and the pipe outlives this agent (logs.OpenFIFO).
		FIFO: p.LogFIFO(),
	})
	if err != nil {
		return nil, fmt.Errorf("log listener: %w", err)
	}
	return l, nil
}

// openDirs are the directories prepare works in, open by fd.
type openDirs struct{ private, data, run, log, gen *os.File }

func (d openDirs) close() {
	for _, f := range []*os.File{d.private, d.data, d.run, d.log, d.gen} {
		if f != nil {
			f.Close()
		}
	}
}

func makeDirs(req Request, p layout.Slot) (d openDirs, err error) {
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	inst := req.Instance
	if d.private, err = ensureDir(inst.PrivateDir(), modePrivateDir, 0, 0); err != nil {
		return d, err
	}
	if d.data, err = ensureOwnedDir(inst.DataDir(), modeDataDir, req.App.UID, req.App.GID); err != nil {
		return d, err
	}
	if d.run, err = ensureDir(inst.RunDir(), modeRunDir, -1, req.SocketGID); err != nil {
		return d, err
	}
	if d.log, err = ensureSubdir(d.run, filepath.Base(inst.LogDir()), modeLogDir, -1, -1); err != nil {
		return d, err
	}
	if p.Generation() != 0 {
		gen, _ := inst.GenDir(p.Generation())
		if d.gen, err = ensureSubdir(d.run, filepath.Base(gen), modeGenDir, req.App.UID, req.SocketGID); err != nil {
			return d, err
		}
	}
	return d, nil
}

// EnsureRunDir makes the Instance's run dir as a start does (the socket
// group's, new sockets in it its): the agent binds an asleep Instance's
// socket there when a reboot emptied /run and nothing starts yet.
func EnsureRunDir(inst layout.Instance, socketGID int) error {
	d, err := ensureDir(inst.RunDir(), modeRunDir, -1, socketGID)
	if err != nil {
		return fmt.Errorf("prepare: run dir: %w", err)
	}
	return d.Close()
}

// ensureToken returns the instance's admin token, minting it once: 32
// random bytes, hex, in the env file (0600) beneath the private dir. An
// agent before the private dir kept it in the data dir: that token is
// moved, so the generations it started keep their admin access.
func ensureToken(inst layout.Instance) (string, error) {
	env, err := instancefs.ReadEnv(inst.PrivateDir(), layout.EnvFileName)
	if err != nil {
		return "", err
	}
	if tok := env[EnvAdminToken]; tok != "" {
		return tok, nil
	}
	if old, err := instancefs.ReadEnv(inst.DataDir(), layout.EnvFileName); err == nil && old[EnvAdminToken] != "" {
		env[EnvAdminToken] = old[EnvAdminToken]
		if err := instancefs.WriteEnv(inst.PrivateDir(), layout.EnvFileName, env); err != nil {
			return "", err
		}
		if d, err := instancefs.OpenDir(inst.DataDir()); err == nil {
			_ = removeStale(d, layout.EnvFileName)
			d.Close()
		}
		return env[EnvAdminToken], nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	env[EnvAdminToken] = hex.EncodeToString(b[:])
	if err := instancefs.WriteEnv(inst.PrivateDir(), layout.EnvFileName, env); err != nil {
		return "", err
	}
	return env[EnvAdminToken], nil
}

// cmdEnv takes a cmd's env from its generation's launch file: the env that
// generation runs with, not whatever the env files say now, but for
// UNITLET_ROLE, which says it is a run.
func cmdEnv(res *Result, inst layout.Instance, gen int64) error {
	g, err := inst.Generation(gen)
	if err != nil {
		return err
	}
	lf, err := launch.Read(inst.PrivateDir(), g.LaunchFile())
	if err == nil {
		lf, err = lf.WithMemoryEnv()
	}
	if err != nil {
		return fmt.Errorf("cmd env from generation %d: %w", gen, err)
	}
	res.Env = lf.EnvMap()
	res.Layers = make(map[string]Layer, len(res.Env))
	for k := range res.Env {
		res.Layers[k] = LayerLaunch
	}
	res.Env[EnvRole], res.Layers[EnvRole] = string(layout.RoleCommand), LayerPlatform
	res.Timings.mark(StepEnv)
	return nil
}

// removeExitRecords removes this process's exit records, and only those:
// a sibling generation's prefix never matches (see Slot.ExitPrefix).
func removeExitRecords(run *os.File, prefix string) error {
	names, err := readDirNames(run)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			if err := removeStale(run, n); err != nil {
				return fmt.Errorf("stale exit record: %w", err)
			}
		}
	}
	return nil
}

func readDirNames(d *os.File) ([]string, error) {
	// A fresh fd: reading names moves the offset of the one we hold.
	f, err := instancefs.OpenBeneath(d, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// bindControl binds the control socket next to the generation's app
// socket. A failure is a warning: the app runs without control verbs, and
// its env no longer names a socket nobody listens on.
func bindControl(req Request, p layout.Slot, dirs openDirs, res *Result) {
	srv, err := listenControl(req, p)
	if err != nil {
		res.Warnings = append(res.Warnings, fmt.Errorf("%w (running without control verbs)", err))
		delete(res.Env, EnvControlSocket)
		delete(res.Layers, EnvControlSocket)
		return
	}
	res.Control = srv
}

// ListenControl binds generation p's control socket again, for a
// generation this agent adopted (it did not prepare it): the socket its
// env names died with the agent that bound it. req needs Instance, Host,
// Fence, State, Logger, App and SocketGID.
func ListenControl(req Request, p layout.Slot) (*control.Server, error) {
	return listenControl(req, p)
}

// listenControl binds the control socket in the generation dir, owned
// by the app and the socket group, staged in the run dir (root's).
func listenControl(req Request, p layout.Slot) (*control.Server, error) {
	inst := req.Instance
	app, _ := inst.AppSocket(p.Generation())
	path := layout.ControlSocket(app)
	srv, err := control.Listen(inst.RunDir(), path, req.App.UID, req.SocketGID, control.Config{
		Identity: control.Identity{Namespace: inst.Namespace(), Name: inst.Name(), Host: req.Host, Generation: p.Generation()},
		Token: func() (string, error) {
			env, err := instancefs.ReadEnv(inst.PrivateDir(), layout.EnvFileName)
			return env[EnvAdminToken], err
		},
		Fence:         req.Fence,
		State:         req.State,
		Dir:           inst.PrivateDir(),
		SchedulesFile: layout.SchedulesFileName,
		Logger:        req.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return srv, nil
}
