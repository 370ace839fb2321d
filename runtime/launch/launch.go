// Package launch is the launch file: what a unit runs and as whom,
// written by prepare beneath the instance's private dir and read by the
// trampoline (unitlet exec), which runs as root until it drops to the
// file's credential. Decoding is strict: anything unexpected is refused.
package launch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/unitlet/unitlet/runtime/identity"
	"github.com/unitlet/unitlet/runtime/instancefs"
)

// Schema names this version of the file; a reader refuses any other (v1
// files sat in the tenant's data dir and named a user by name only).
const Schema = "unitlet.dev/launch/v2"

// ErrInvalid is wrapped by every decode or validation error.
var ErrInvalid = errors.New("invalid launch file")

// File is one launch: argv exec'd with exactly Env (KEY=VALUE entries) in
// WorkingDir as Identity, in the sandbox where only Writable can be
// written. Host is the instance's host name, for the logs.
type File struct {
	Schema     string   `json:"schema"`
	Host       string   `json:"host"`
	Argv       []string `json:"argv"`
	Env        []string `json:"env"`
	WorkingDir string   `json:"workingDir,omitempty"`
	Identity   Identity `json:"identity"`
	Writable   []string `json:"writable,omitempty"`
	// Listen, when set, is socket activation: the trampoline fetches the
	// listening socket offered under Key at the agent's Handoff socket and
	// execs the app with it as fd 3 (LISTEN_FDS=1).
	Listen *Listen `json:"listen,omitempty"`
	// NetworkDeny are addresses the process tree may not connect or send
	// to (the cloud metadata service's, unless a grant allows it): the
	// trampoline guards its own cgroup before it execs anything.
	NetworkDeny []string `json:"networkDeny,omitempty"`
	// UserNamespace, when set, runs the process as Identity (uid 0) in a
	// user namespace of its own whose 0 is this uid and gid on the node:
	// a granted root that is nobody to the node.
	UserNamespace *IDMap `json:"userNamespace,omitempty"`
	// Terminal, when set, runs argv on a terminal of its own made in the
	// sandbox, whose other end the trampoline hands to the agent at
	// Socket (a run's, for `run -t`).
	Terminal *Terminal `json:"terminal,omitempty"`
	// MemoryEnv, when set, is a file of KEY=VALUE lines beneath the run
	// root (memory, root's, 0600) added to Env at exec: what must never be
	// written to the node's disk, as this file is (the instance key).
	MemoryEnv string `json:"memoryEnv,omitempty"`
}

// Terminal is where a run's terminal is handed to the agent.
type Terminal struct {
	Socket string `json:"socket"`
}

// IDMap is the node's uid and gid that a user namespace's 0 maps to.
type IDMap struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// Listen is where a generation's listening socket is fetched from.
type Listen struct {
	Handoff string `json:"handoff"`
	Key     string `json:"key"`
}

// Identity is who the process runs as (the Instance's resolved
// credential). User is kept for the record; the numbers are what the
// trampoline sets.
type Identity = identity.Credential

// Validate checks what exec needs: the schema, a non-empty argv with an
// absolute argv[0], KEY=VALUE env entries, no NUL byte anywhere (exec
// would cut the string there), an absolute working dir if any.
func (f File) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
	}
	if f.Schema != Schema {
		return bad("schema %q, want %q", f.Schema, Schema)
	}
	if len(f.Argv) == 0 {
		return bad("empty argv")
	}
	if !filepath.IsAbs(f.Argv[0]) {
		return bad("argv[0] %q is not absolute", f.Argv[0])
	}
	for i, a := range f.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return bad("argv[%d] holds a NUL byte", i)
		}
	}
	for i, e := range f.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" || strings.IndexByte(e, 0) >= 0 {
			return bad("env[%d] is not KEY=VALUE", i)
		}
	}
	if f.WorkingDir != "" && (!filepath.IsAbs(f.WorkingDir) || strings.IndexByte(f.WorkingDir, 0) >= 0) {
		return bad("workingDir %q is not absolute", f.WorkingDir)
	}
	if strings.IndexByte(f.Identity.User, 0) >= 0 || strings.IndexByte(f.Host, 0) >= 0 {
		return bad("user or host holds a NUL byte")
	}
	if f.Identity.UID < 0 || f.Identity.GID < 0 {
		return bad("uid %d or gid %d is negative", f.Identity.UID, f.Identity.GID)
	}
	for _, g := range f.Identity.Groups {
		if g < 0 {
			return bad("group %d is negative", g)
		}
	}
	if l := f.Listen; l != nil && (!filepath.IsAbs(l.Handoff) || l.Key == "" || strings.ContainsAny(l.Key, "\n\x00")) {
		return bad("listen: hand-off %q must be absolute and key %q one line", l.Handoff, l.Key)
	}
	if t := f.Terminal; t != nil && (!filepath.IsAbs(t.Socket) || strings.IndexByte(t.Socket, 0) >= 0) {
		return bad("terminal: socket %q is not absolute", t.Socket)
	}
	if m := f.UserNamespace; m != nil && (m.UID <= 0 || m.GID <= 0 || f.Identity.UID != 0 || f.Identity.GID != 0) {
		return bad("userNamespace maps uid 0 to %d:%d: both must be above 0 and the identity root", m.UID, m.GID)
	}
	for _, a := range f.NetworkDeny {
		if _, err := netip.ParseAddr(a); err != nil {
			return bad("networkDeny: %v", err)
		}
	}
	if f.MemoryEnv != "" && (!filepath.IsAbs(f.MemoryEnv) || filepath.Clean(f.MemoryEnv) != f.MemoryEnv) {
		return bad("memoryEnv %q is not a clean absolute path", f.MemoryEnv)
	}
	for _, w := range f.Writable {
		if !filepath.IsAbs(w) || filepath.Clean(w) != w || w == "/" {
			return bad("writable path %q is not a clean absolute path below /", w)
		}
	}
	return nil
}

// Encode validates f and renders it as indented JSON.
func Encode(f File) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Decode parses and validates a launch file: unknown fields, trailing data
// and anything Validate refuses are errors.
func Decode(b []byte) (File, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return File{}, fmt.Errorf("%w: data after the JSON object", ErrInvalid)
	}
	if err := f.Validate(); err != nil {
		return File{}, err
	}
	// An empty list and an absent one mean the same; keep one form so a
	// file decodes to what it encodes back to (omitempty drops "[]").
	if len(f.Writable) == 0 {
		f.Writable = nil
	}
	if len(f.NetworkDeny) == 0 {
		f.NetworkDeny = nil
	}
	if len(f.Identity.Groups) == 0 {
		f.Identity.Groups = nil
	}
	return f, nil
}

// Write stores f atomically as dir/name, mode 0600, beneath dir.
func Write(dir, name string, f File) error {
	b, err := Encode(f)
	if err != nil {
		return err
	}
	return instancefs.WriteAtomic(dir, name, b, 0o600)
}

// Read reads and decodes dir/name beneath dir (no symlink followed,
// bounded size).
func Read(dir, name string) (File, error) {
	b, err := instancefs.ReadFile(dir, name)
	if err != nil {
		return File{}, err
	}
	f, err := Decode(b)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return f, nil
}

// EnvMap returns Env as a map. Of duplicate keys the first is kept, the
// one getenv(3) in the exec'd program would find.
func (f File) EnvMap() map[string]string {
	m := make(map[string]string, len(f.Env))
	for _, e := range f.Env {
		k, v, _ := strings.Cut(e, "=")
		if _, seen := m[k]; !seen {
			m[k] = v
		}
	}
	return m
}

// WriteMemoryEnv writes env (KEY=VALUE entries) as dir/name, 0600, for
// a launch file's MemoryEnv. dir is in the run root: memory, so nothing
// is synced to a disk.
func WriteMemoryEnv(dir, name string, env []string) error {
	for _, e := range env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.ContainsAny(e, "\n\x00") {
			return fmt.Errorf("%w: memory env entry is not one KEY=VALUE line", ErrInvalid)
		}
	}
	return instancefs.WriteAtomicVolatile(dir, name, []byte(strings.Join(env, "\n")+"\n"), 0o600)
}

// WithMemoryEnv is f with its MemoryEnv file's entries added to Env (f
// itself when it names none).
func (f File) WithMemoryEnv() (File, error) {
	if f.MemoryEnv == "" {
		return f, nil
	}
	b, err := instancefs.ReadFile(filepath.Dir(f.MemoryEnv), filepath.Base(f.MemoryEnv))
	if err != nil {
		return f, fmt.Errorf("memory env: %w", err)
	}
	env := slices.Clone(f.Env)
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if k, _, ok := strings.Cut(line, "="); !ok || k == "" || strings.IndexByte(line, 0) >= 0 {
			return f, fmt.Errorf("%w: memory env %s: a line is not KEY=VALUE", ErrInvalid, f.MemoryEnv)
		}
		env = append(env, line)
	}
	f.Env = env
	return f, nil
}
