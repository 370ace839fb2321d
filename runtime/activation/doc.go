// Package activation is socket activation (the sd_listen_fds protocol)
// for both unit backends: the agent binds an Instance's listening socket
// and keeps it, and a generation's trampoline, still root and before its
// sandbox, fetches it over the agent's hand-off socket (SCM_RIGHTS) and
// execs the app with it as fd 3, LISTEN_FDS=1, LISTEN_PID and
// LISTEN_FDNAMES=app. A systemd transient service cannot be handed a
// descriptor at start, and the direct backend's shim is a process apart,
// so one path serves both. A Watcher tells when a held socket last got
// a connection, for an Instance that sleeps when idle.
package activation
