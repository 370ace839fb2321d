/* The bench's app: a tiny HTTP server on $UNITLET_APP_SOCKET that answers
 * every request with "ok" and closes. Single-threaded, static: its own
 * memory is what an app costs at the least. SIGTERM ends it (default). */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(void) {
	const char *path = getenv("UNITLET_APP_SOCKET");
	if (!path || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return 2;
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	strcpy(a.sun_path, path);
	unlink(path);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 128) < 0)
		return 1;
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n";
	char buf[1024];
	for (;;) {
		int c = accept(l, 0, 0);
		if (c < 0)
			continue;
		(void)read(c, buf, sizeof buf);
		(void)write(c, resp, sizeof resp - 1);
		close(c);
	}
}
