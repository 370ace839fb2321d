package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/unitlet/unitlet/runtime/instancefs"
)

// Promote points the Instance's stable app.sock at generation ref's own
// socket in one rename, so a client connecting at any moment finds either
// the old or the new generation, never nothing; then it lets only ref
// write through its control socket.
func (n *Node) Promote(ctx context.Context, ref Ref) (string, error) {
	sock, err := n.appSocket(ref)
	if err != nil {
		return "", err
	}
	li, err := n.layoutOf(ref.InstanceRef)
	if err != nil {
		return "", err
	}
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		return "", fmt.Errorf("%w: %s (%v)", ErrNoAppSocket, sock, err)
	}
	if gid := n.cfg.SocketGID; gid >= 0 {
		// The app bound it under its own umask; the proxy's group must
		// be able to connect before clients are sent to it.
		if err := instancefs.ShareSocket(filepath.Dir(sock), filepath.Base(sock), gid, 0o660); err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrNoAppSocket, sock, err)
		}
	}
	stable := li.StableSocket()
	// Relative, so the run dir may be moved or bind-mounted elsewhere.
	target, err := filepath.Rel(filepath.Dir(stable), sock)
	if err != nil {
		return "", fmt.Errorf("node: promote: %w", err)
	}
	if cur, err := os.Readlink(stable); err != nil || cur != target {
		if err := flipSymlink(stable, target); err != nil {
			return "", err
		}
	}
	in := n.instanceOf(ref.InstanceRef)
	in.fence.Serve(ref.Generation)
	n.cfg.Log.Info("promoted", "namespace", ref.Namespace, "name", ref.Name, "generation", ref.Generation, "stable", stable)
	return stable, nil
}

// flipSymlink makes link point at target atomically: a fresh symlink
// beside it is renamed over it.
func flipSymlink(link, target string) error {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	// A temporary name beside the link (same file system, so rename is
	// atomic); it never outlives this call.
	tmp := link + ".tmp-" + hex.EncodeToString(rnd[:])
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("node: promote: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("node: promote: %w", err)
	}
	return nil
}
