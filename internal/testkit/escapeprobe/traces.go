package main

import (
	"hash/fnv"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ipcKey is the System V key both sides derive from the marker.
func ipcKey(marker string) int {
	h := fnv.New32a()
	h.Write([]byte(marker))
	return int(h.Sum32() & 0x7fffffff)
}

func shmFile(marker string) string { return filepath.Join("/dev/shm", marker) }

// hold leaves the traces: a SysV segment readable by all, and a
// world-readable file in /dev/shm.
func hold(marker string) error {
	if _, err := unix.SysvShmGet(ipcKey(marker), 4096, unix.IPC_CREAT|0o644); err != nil {
		return err
	}
	return os.WriteFile(shmFile(marker), []byte(marker), 0o644)
}
