// Package instancefs opens, reads and writes files beneath a directory a
// tenant can write to. A tenant who controls a directory can swap any file
// or subdirectory in it for a symlink pointing anywhere (/etc/shadow); every
// open here therefore resolves with openat2(RESOLVE_NO_SYMLINKS), the
// directory itself from / and the name beneath it with RESOLVE_BENEATH too,
// so no component is ever a symlink. Kernels without openat2 are refused,
// not served by a weaker fallback.
package instancefs
