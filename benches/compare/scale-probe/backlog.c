/* LD_PRELOAD shim for scale.sh --backlog B: every listen() gets backlog B (env BACKLOG, default
 * 4096; the kernel caps it at net.core.somaxconn), as Go's net.Listen gives kube-apiserver. Shows
 * what a simulator listening with a shallower accept queue (tokio/mio's 128) does to a burst of N
 * watch connections: each dropped attempt costs the client a 1 s SYN retransmit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/socket.h>
int listen(int fd, int backlog) {
    static int (*real)(int, int);
    if (!real) real = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
    const char *b = getenv("BACKLOG");
    (void)backlog;
    return real(fd, b ? atoi(b) : 4096);
}
