/*
 * Threads cancelled while they wait in calls the library wraps.
 *
 * Each round starts one thread per call below; each allocates a buffer, pushes a cleanup
 * handler that frees it, and blocks in its call (on a pipe, a socket, a listening socket, an
 * epoll set, a message queue, a signal, a timer, a child that does not exit, a stdio stream).
 * The main thread cancels them all (deferred cancellation: the calls are cancellation
 * points), joins them, checks that each ended cancelled with its handler run, and allocates
 * and frees; then the next round. A wrapper that kept a lock, or the allocator's own state,
 * across the call would hang or crash a later round. Prints "OK n" (handlers run) and exits
 * 0; "FAIL: ..." and exits 1 otherwise.
 *
 *   cancel [ROUNDS]        (default 10)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void fail(const char *what, long v) {
    printf("FAIL: %s (%ld)\n", what, v);
    fflush(stdout);
    _exit(1);
}

static int pipefd[2], pair[2], listener, epfd, queue;
static int cleaned;

static void cleanup(void *p) {
    free(p);
    __atomic_add_fetch(&cleaned, 1, __ATOMIC_SEQ_CST);
}

enum { KINDS = 16 };

static void *blocker(void *arg) {
    long kind = (long)arg;
    char *buf = malloc(4096);
    if (!buf) fail("malloc", errno);
    pthread_cleanup_push(cleanup, buf);
    struct pollfd pf = {pipefd[0], POLLIN, 0};
    struct epoll_event ev;
    fd_set readable;
    FD_ZERO(&readable);
    FD_SET(pipefd[0], &readable);
    struct timespec long_time = {100, 0};
    struct iovec iov = {buf, 4096};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    int sig;
    switch (kind) {
    case 0: read(pipefd[0], buf, 4096); break;
    case 1: recv(pair[0], buf, 4096, 0); break;
    case 2: accept(listener, 0, 0); break;
    case 3: poll(&pf, 1, -1); break;
    case 4: epoll_wait(epfd, &ev, 1, -1); break;
    case 5: select(pipefd[0] + 1, &readable, 0, 0, 0); break;
    case 6: nanosleep(&long_time, 0); break;
    case 7: sigwait(&usr2, &sig); break;
    case 8: sigtimedwait(&usr2, 0, &long_time); break;
    case 9: msgrcv(queue, buf, 1000, 0, 0); break;
    case 10: readv(pipefd[0], &iov, 1); break;
    case 11: recvmsg(pair[0], &mh, 0); break;
    case 12: pause(); break;
    case 13: clock_nanosleep(CLOCK_MONOTONIC, 0, &long_time, 0); break;
    case 14: {
        FILE *f = fdopen(dup(pipefd[0]), "r");
        if (!f) fail("fdopen", errno);
        pthread_cleanup_push((void (*)(void *))fclose, f);
        fgets(buf, 100, f);
        pthread_cleanup_pop(1);
        break;
    }
    case 15: waitpid(-1, 0, 0); break;
    }
    pthread_cleanup_pop(1);
    return (void *)kind;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, 0);
    if (pipe(pipefd) || socketpair(AF_UNIX, SOCK_STREAM, 0, pair)) fail("pipe", errno);
    listener = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "/tmp/nevermore-cancel-%d", getpid());
    unlink(addr.sun_path);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) || listen(listener, 4)) fail("listen", errno);
    epfd = epoll_create1(0);
    struct epoll_event e = {EPOLLIN, {0}};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, pipefd[0], &e)) fail("epoll_ctl", errno);
    queue = msgget(IPC_PRIVATE, 0600);
    if (queue < 0) fail("msgget", errno);
    pid_t child = fork();
    if (child < 0) fail("fork", errno);
    if (child == 0) {
        pause();
        _exit(0);
    }
    for (int r = 0; r < rounds; r++) {
        pthread_t t[KINDS];
        for (long k = 0; k < KINDS; k++)
            if (pthread_create(&t[k], 0, blocker, (void *)k)) fail("pthread_create", k);
        usleep(20000); /* let them block */
        for (int k = 0; k < KINDS; k++) pthread_cancel(t[k]);
        for (int k = 0; k < KINDS; k++) {
            void *res;
            pthread_join(t[k], &res);
            if (res != PTHREAD_CANCELED) fail("a thread was not cancelled; its call", k);
        }
        void *p[100];
        for (int i = 0; i < 100; i++) {
            p[i] = malloc((size_t)i * 37 + 1);
            if (!p[i]) fail("malloc after the cancellations", errno);
            memset(p[i], i, (size_t)i * 37 + 1);
        }
        for (int i = 0; i < 100; i++) free(p[i]);
    }
    kill(child, SIGKILL);
    waitpid(child, 0, 0);
    msgctl(queue, IPC_RMID, 0);
    unlink(addr.sun_path);
    if (cleaned != rounds * KINDS) fail("cleanup handlers run", cleaned);
    printf("OK %d\n", cleaned);
    return 0;
}
