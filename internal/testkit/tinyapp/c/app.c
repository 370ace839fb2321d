/* The tests' and the bench's app: a tiny HTTP server on $UNITLET_APP_SOCKET
 * that answers every request and closes. Single-threaded, static: its own
 * memory is what an app costs at the least, and it starts at once even in
 * an emulated guest, where an interpreter takes seconds.
 *
 * By default it answers "ok" and SIGTERM ends it. Its environment can ask:
 *   GREETING_HOST        answer "hello from $GREETING_HOST generation
 *                        $UNITLET_GENERATION" (as the samples' apps do)
 *   DRAIN_SECONDS=n      on SIGTERM keep serving n seconds, then exit 0
 *                        (the drain an Overlap swap relies on)
 *   START_DELAY_SECONDS  wait that long before binding (a slow start)
 *   HOLD_SECONDS=n       answer GET /hold only after n seconds, from a
 *                        child, while the app goes on answering others (a
 *                        request in flight across a swap)
 * With LISTEN_PID and LISTEN_FDS=1 it serves the socket it was handed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static unsigned drain;

static void on_alarm(int s) {
	(void)s;
	_exit(0);
}

static void on_term(int s) {
	(void)s;
	alarm(drain);
}

static unsigned env_seconds(const char *name) {
	const char *v = getenv(name);
	return v ? (unsigned)strtoul(v, 0, 10) : 0;
}

/* listening is the socket handed over by the agent (LISTEN_FDS=1 for this
 * pid: fd 3, socket activation's convention), or else path, bound. */
static int listening(const char *path) {
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	if (pid && fds && strtol(pid, 0, 10) == (long)getpid() && strcmp(fds, "1") == 0)
		return 3;
	if (!path || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -1;
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	strcpy(a.sun_path, path);
	unlink(path);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 128) < 0)
		return -1;
	return l;
}

int main(void) {
	char body[256] = "ok\n";
	const char *host = getenv("GREETING_HOST"), *gen = getenv("UNITLET_GENERATION");
	if (host)
		snprintf(body, sizeof body, "hello from %s generation %s\n", host, gen ? gen : "?");
	char resp[512];
	int n = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
	                 strlen(body), body);
	if ((drain = env_seconds("DRAIN_SECONDS")) > 0) {
		/* glibc's signal() restarts accept() after the handler. */
		signal(SIGALRM, on_alarm);
		signal(SIGTERM, on_term);
	}
	unsigned hold = env_seconds("HOLD_SECONDS");
	if (hold > 0)
		signal(SIGCHLD, SIG_IGN); /* held answers' children reap themselves */
	for (unsigned d = env_seconds("START_DELAY_SECONDS"); d > 0;)
		d = sleep(d);
	int l = listening(getenv("UNITLET_APP_SOCKET"));
	if (l < 0)
		return 1;
	char buf[4096];
	for (;;) {
		int c = accept(l, 0, 0);
		if (c < 0)
			continue;
		ssize_t got = read(c, buf, sizeof buf);
		if (hold > 0 && got >= 10 && strncmp(buf, "GET /hold ", 10) == 0) {
			/* The child keeps the connection; the parent's copy closes. */
			if (fork() == 0) {
				for (unsigned d = hold; d > 0;)
					d = sleep(d);
				(void)send(c, resp, n, MSG_NOSIGNAL);
				_exit(0);
			}
			close(c);
			continue;
		}
		/* A client gone before the answer (a probe that only connects)
		 * must not end the app with SIGPIPE. */
		(void)send(c, resp, n, MSG_NOSIGNAL);
		close(c);
	}
}
