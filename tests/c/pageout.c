/*
 * System calls on live heap objects whose pages the kernel paged out.
 *
 * A pageout (swap, a DAMON scheme, MADV_PAGEOUT) drops the page-table entries of the pages it
 * takes; under the C library's malloc the kernel brings an anonymous page back when a system
 * call touches it. Each case fills heap objects, pages them out with MADV_PAGEOUT, and hands
 * them to a system call that must behave as it would on any memory: the full count, the
 * right bytes.
 *
 * Usage: pageout [CASE]   every case (or the one named: pipe, file, vector, socket, epoll,
 *                         path, exec, stdio, userbuf, dir, walk, spawn, signals, results,
 *                         process, waits, coroutine, restarted, cancelled, churn, listing, bad); prints "<case> OK" for each, or "FAIL <case>:
 *                         ..." and exits 1
 *        pageout freed    read(2) into a freed page object (5000 bytes): prints "EFAULT" when
 *                         the call fails with it, "READ n" otherwise
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <ftw.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/select.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/inotify.h>
#include <sys/xattr.h>
#include <limits.h>
#include <sys/uio.h>
#include <mqueue.h>
#include <semaphore.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <grp.h>
#include <sched.h>
#include <sys/sendfile.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/utsname.h>
#include <utime.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>
#include "raw_signals.h"

#define PAGE 4096UL

extern ssize_t __read_chk(int fd, void *buf, size_t n, size_t size);
extern size_t __fread_chk(void *buf, size_t room, size_t size, size_t n, FILE *f);

static const char *current = "";

static void fail(const char *what, long a, long b) {
    printf("FAIL %s: %s (%ld, %ld; errno %d)\n", current, what, a, b, errno);
    fflush(stdout);
    exit(1);
}

static void page_out(const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p & ~(PAGE - 1), e = ((uintptr_t)p + n + PAGE - 1) & ~(PAGE - 1);
    if (madvise((void *)a, e - a, MADV_PAGEOUT) != 0)
        fail("madvise(MADV_PAGEOUT)", (long)a, (long)(e - a));
}

static unsigned char pat(int tag, size_t i) { return (unsigned char)(tag * 31 + i * 7 + 3); }

static void fill(unsigned char *p, size_t n, int tag) {
    for (size_t i = 0; i < n; i++)
        p[i] = pat(tag, i);
}

static void check(const unsigned char *p, size_t n, int tag) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(tag, i))
            fail("wrong byte", (long)i, p[i]);
}

static void expect(ssize_t got, size_t want, const char *call) {
    if (got != (ssize_t)want)
        fail(call, (long)got, (long)want);
}

static unsigned char scratch[1 << 20];

/* read(2) into, and write(2) from, paged-out objects, through a pipe (made as big as the
 * object). */
static void pipe_case(size_t n) {
    int p[2];
    if (pipe(p) != 0 || fcntl(p[1], F_SETPIPE_SZ, (int)n) < (int)n)
        fail("pipe", (long)n, 0);
    unsigned char *b = malloc(n);
    fill(b, n, 1);
    fill(scratch, n, 2);
    expect(write(p[1], scratch, n), n, "write to the pipe");
    page_out(b, n);
    expect(read(p[0], b, n), n, "read(2) into a paged-out object");
    check(b, n, 2);
    fill(b, n, 3);
    page_out(b, n);
    expect(write(p[1], b, n), n, "write(2) from a paged-out object");
    expect(read(p[0], scratch, n), n, "read from the pipe");
    check(scratch, n, 3);
    /* A length far past the object (the kernel copies what the pipe holds). */
    expect(write(p[1], scratch, 5), 5, "write to the pipe");
    page_out(b, n);
    expect(read(p[0], b, 1UL << 30), 5, "read(2) of 5 bytes into a paged-out object, asking for 1 GiB");
    check(b, 5, 3);
    free(b);
    close(p[0]);
    close(p[1]);
}

/* A regular file: the copy stops short at the paged-out page in the middle of the buffer. */
static void file_case(void) {
    size_t n = 5 * PAGE + 100;
    FILE *t = tmpfile();
    if (!t)
        fail("tmpfile", 0, 0);
    int fd = fileno(t);
    fill(scratch, n, 4);
    expect(pwrite(fd, scratch, n, 0), n, "pwrite of the file");
    unsigned char *b = malloc(n);
    memset(b, 0, n);
    page_out(b + 2 * PAGE, PAGE);
    expect(pread(fd, b, n, 0), n, "pread(2) into an object with a paged-out page");
    check(b, n, 4);
    memset(b, 0, n);
    page_out(b + 3 * PAGE, 1);
    if (lseek(fd, 0, SEEK_SET) != 0)
        fail("lseek", 0, 0);
    expect(read(fd, b, n), n, "read(2) of a file into an object with a paged-out page");
    check(b, n, 4);
    fill(b, n, 5);
    page_out(b + PAGE, 2 * PAGE);
    expect(pwrite(fd, b, n, 0), n, "pwrite(2) from an object with paged-out pages");
    fill(b, n, 6);
    page_out(b + 4 * PAGE, 1);
    if (lseek(fd, n, SEEK_SET) != (off_t)n)
        fail("lseek", 0, 0);
    expect(write(fd, b, n), n, "write(2) to a file from an object with a paged-out page");
    expect(pread(fd, scratch, 2 * n, 0), 2 * n, "pread of the file");
    check(scratch, n, 5);
    check(scratch + n, n, 6);
    /* The checked read of programs built with _FORTIFY_SOURCE. */
    memset(b, 0, n);
    page_out(b, n);
    if (lseek(fd, 0, SEEK_SET) != 0)
        fail("lseek", 0, 0);
    expect(__read_chk(fd, b, n, n), n, "__read_chk into a paged-out object");
    check(b, n, 5);
    free(b);
    fclose(t);
}

/* readv/writev with the iovec array and both buffers on the heap, all paged out. */
static void vector_case(void) {
    int p[2];
    if (pipe(p) != 0)
        fail("pipe", 0, 0);
    size_t n1 = 3000, n2 = 9000;
    struct iovec *iov = malloc(2 * sizeof *iov);
    unsigned char *a = malloc(n1), *b = malloc(n2);
    fill(a, n1, 7);
    fill(b, n2, 8);
    iov[0] = (struct iovec){a, n1};
    iov[1] = (struct iovec){b, n2};
    page_out(a, n1);
    page_out(b, n2);
    page_out(iov, 2 * sizeof *iov);
    expect(writev(p[1], iov, 2), n1 + n2, "writev(2) from paged-out objects");
    memset(a, 0, n1);
    memset(b, 0, n2);
    page_out(a, n1);
    page_out(b, n2);
    page_out(iov, 2 * sizeof *iov);
    expect(readv(p[0], iov, 2), n1 + n2, "readv(2) into paged-out objects");
    check(a, n1, 7);
    check(b, n2, 8);
    free(iov);
    free(a);
    free(b);
    close(p[0]);
    close(p[1]);
}

/* Pages out a message, its iovec array and its one buffer. */
static void page_out_message(const struct msghdr *m) {
    page_out(m->msg_iov[0].iov_base, m->msg_iov[0].iov_len);
    page_out(m->msg_iov, sizeof m->msg_iov[0]);
    page_out(m, sizeof *m);
}

/* Sockets: recv/send, recvfrom/sendto, recvmsg/sendmsg with everything on the heap. */
/* The calls that set a socket up or ask about it, their addresses, options and events in
 * paged-out heap objects: bind, connect (a client reconnecting to an address it resolved long
 * before: getaddrinfo's results are heap objects), setsockopt, getsockopt (SO_ERROR, which
 * reading clears, and a 4-byte option), getsockname, getpeername, pipe, pipe2, socketpair,
 * epoll_ctl. */
static void socket_setup(void) {
    char path[] = "/tmp/nevermore-pageout-sock-XXXXXX";
    int tmp = mkstemp(path);
    if (tmp < 0)
        fail("mkstemp", 0, 0);
    close(tmp);
    unlink(path);
    struct sockaddr_un *addr = calloc(1, sizeof *addr);
    addr->sun_family = AF_UNIX;
    strcpy(addr->sun_path, path);
    int srv = socket(AF_UNIX, SOCK_STREAM, 0), cli = socket(AF_UNIX, SOCK_STREAM, 0);
    if (srv < 0 || cli < 0)
        fail("socket", srv, cli);
    page_out(addr, sizeof *addr);
    if (bind(srv, (struct sockaddr *)addr, sizeof *addr) != 0 || listen(srv, 4) != 0)
        fail("bind(2) of a paged-out address", -1, 0);
    page_out(addr, sizeof *addr);
    if (connect(cli, (struct sockaddr *)addr, sizeof *addr) != 0)
        fail("connect(2) to a paged-out address", -1, 0);
    int *opt = malloc(sizeof *opt);
    *opt = 65536;
    page_out(opt, sizeof *opt);
    if (setsockopt(cli, SOL_SOCKET, SO_SNDBUF, opt, sizeof *opt) != 0)
        fail("setsockopt(2) of a paged-out option", -1, 0);
    socklen_t *len = malloc(sizeof *len);
    *len = sizeof *opt;
    *opt = -1;
    page_out(opt, sizeof *opt);
    page_out(len, sizeof *len);
    if (getsockopt(cli, SOL_SOCKET, SO_ERROR, opt, len) != 0 || *opt != 0 || *len != sizeof *opt)
        fail("getsockopt(2) SO_ERROR into a paged-out object", *opt, *len);
    *opt = 0;
    page_out(opt, sizeof *opt);
    page_out(len, sizeof *len);
    if (getsockopt(cli, SOL_SOCKET, SO_SNDBUF, opt, len) != 0 || *opt < 65536)
        fail("getsockopt(2) SO_SNDBUF into a paged-out object", *opt, *len);
    struct sockaddr_un *name = malloc(sizeof *name);
    *len = sizeof *name;
    memset(name, 0, sizeof *name);
    page_out(name, sizeof *name);
    page_out(len, sizeof *len);
    if (getsockname(srv, (struct sockaddr *)name, len) != 0 || strcmp(name->sun_path, path) != 0)
        fail("getsockname(2) into a paged-out object", -1, *len);
    *len = sizeof *name;
    memset(name, 0, sizeof *name);
    page_out(name, sizeof *name);
    page_out(len, sizeof *len);
    if (getpeername(cli, (struct sockaddr *)name, len) != 0 || strcmp(name->sun_path, path) != 0)
        fail("getpeername(2) into a paged-out object", -1, *len);
    /* pipe, pipe2, socketpair: their two descriptors written into a paged-out object. */
    int *two = malloc(2 * sizeof *two);
    for (int k = 0; k < 3; k++) {
        two[0] = two[1] = -1;
        page_out(two, 2 * sizeof *two);
        int r = k == 0 ? pipe(two) : k == 1 ? pipe2(two, O_CLOEXEC) : socketpair(AF_UNIX, SOCK_STREAM, 0, two);
        if (r != 0 || two[0] < 0 || two[1] < 0 || write(two[1], "x", 1) != 1)
            fail("pipe, pipe2 or socketpair into a paged-out object (0, 1, 2)", k, r);
        close(two[0]);
        close(two[1]);
    }
    free(two);
    int ep = epoll_create1(0);
    struct epoll_event *ev = malloc(sizeof *ev);
    *ev = (struct epoll_event){.events = EPOLLOUT, .data.u64 = 99};
    page_out(ev, sizeof *ev);
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, cli, ev) != 0)
        fail("epoll_ctl(2) of a paged-out event", -1, 0);
    struct epoll_event out;
    if (epoll_wait(ep, &out, 1, 1000) != 1 || out.data.u64 != 99)
        fail("the event epoll_ctl added", (long)out.data.u64, 99);
    close(ep);
    close(cli);
    close(srv);
    unlink(path);
    free(ev);
    free(name);
    free(len);
    free(opt);
    free(addr);
}

static void socket_case(void) {
    int s[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, s) != 0)
        fail("socketpair", 0, 0);
    size_t n = 6000;
    unsigned char *b = malloc(n);
    fill(b, n, 9);
    page_out(b, n);
    expect(send(s[0], b, n, 0), n, "send(2) from a paged-out object");
    memset(b, 0, n);
    page_out(b, n);
    expect(recv(s[1], b, n, MSG_WAITALL), n, "recv(2) into a paged-out object");
    check(b, n, 9);
    fill(b, n, 10);
    page_out(b, n);
    expect(sendto(s[0], b, n, 0, NULL, 0), n, "sendto(2) from a paged-out object");
    memset(b, 0, n);
    page_out(b, n);
    expect(recvfrom(s[1], b, n, MSG_WAITALL, NULL, NULL), n, "recvfrom(2) into a paged-out object");
    check(b, n, 10);
    struct msghdr *m = calloc(1, sizeof *m);
    struct iovec *iov = malloc(sizeof *iov);
    *iov = (struct iovec){b, n};
    m->msg_iov = iov;
    m->msg_iovlen = 1;
    fill(b, n, 11);
    page_out_message(m);
    expect(sendmsg(s[0], m, 0), n, "sendmsg(2) from paged-out objects");
    memset(b, 0, n);
    page_out_message(m);
    expect(recvmsg(s[1], m, MSG_WAITALL), n, "recvmsg(2) into paged-out objects");
    check(b, n, 11);
    /* sendmmsg/recvmmsg: two messages, their array, iovecs and buffers on the heap. */
    struct mmsghdr *mm = calloc(2, sizeof *mm);
    struct iovec *iv = malloc(2 * sizeof *iv);
    unsigned char *b1 = malloc(3000), *b2 = malloc(3000);
    iv[0] = (struct iovec){b1, 3000};
    iv[1] = (struct iovec){b2, 3000};
    for (int i = 0; i < 2; i++) {
        mm[i].msg_hdr.msg_iov = &iv[i];
        mm[i].msg_hdr.msg_iovlen = 1;
    }
    for (int round = 0; round < 2; round++) {
        if (round == 0) {
            fill(b1, 3000, 15);
            fill(b2, 3000, 16);
        } else {
            memset(b1, 0, 3000);
            memset(b2, 0, 3000);
        }
        page_out(b1, 3000);
        page_out(b2, 3000);
        page_out(iv, 2 * sizeof *iv);
        page_out(mm, 2 * sizeof *mm);
        int got = round == 0 ? sendmmsg(s[0], mm, 2, 0) : recvmmsg(s[1], mm, 2, MSG_WAITALL, NULL);
        expect(got, 2, round == 0 ? "sendmmsg(2) from paged-out objects" : "recvmmsg(2) into paged-out objects");
    }
    check(b1, 3000, 15);
    check(b2, 3000, 16);
    free(mm);
    free(iv);
    free(b1);
    free(b2);
    free(m);
    free(iov);
    free(b);
    close(s[0]);
    close(s[1]);
    socket_setup();
}

/* epoll_wait(2) into a paged-out array of events, and poll(2) of a paged-out array. */
static void epoll_case(void) {
    int ep = epoll_create1(0), ev = eventfd(1, 0);
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = 77};
    if (ep < 0 || ev < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e) != 0)
        fail("epoll", 0, 0);
    struct epoll_event *out = calloc(64, sizeof *out);
    page_out(out, 64 * sizeof *out);
    expect(epoll_wait(ep, out, 64, 1000), 1, "epoll_wait(2) into a paged-out object");
    if (out[0].data.u64 != 77)
        fail("wrong event", (long)out[0].data.u64, 77);
    free(out);
    /* poll(2) with its array on the heap. */
    struct pollfd *fds = calloc(2, sizeof *fds);
    fds[0] = (struct pollfd){.fd = ev, .events = POLLIN};
    fds[1] = (struct pollfd){.fd = ep, .events = POLLIN};
    page_out(fds, 2 * sizeof *fds);
    expect(poll(fds, 2, 1000), 2, "poll(2) of a paged-out array");
    if (!(fds[0].revents & POLLIN))
        fail("poll: no POLLIN", fds[0].revents, POLLIN);
    free(fds);
    /* Many: epoll_wait asked for 512 events (the library takes at most 256 at a time through
     * its local), poll of 300 entries (more than its local holds). */
    int pipes_[300][2];
    for (int i = 0; i < 300; i++) {
        if (pipe(pipes_[i]) != 0 || write(pipes_[i][1], "x", 1) != 1)
            fail("pipe", i, 0);
        struct epoll_event e2 = {.events = EPOLLIN, .data.u64 = 1000 + i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, pipes_[i][0], &e2) != 0)
            fail("epoll_ctl", i, 0);
    }
    out = calloc(512, sizeof *out);
    page_out(out, 512 * sizeof *out);
    int seen = 0, got;
    unsigned char found[301] = {0};
    while (seen < 301 && (got = epoll_wait(ep, out, 512, 0)) > 0) {
        for (int i = 0; i < got; i++) {
            if (out[i].data.u64 == 77 && !found[300]) {
                found[300] = 1;
                seen++;
            } else if (out[i].data.u64 >= 1000 && out[i].data.u64 < 1300 && !found[out[i].data.u64 - 1000]) {
                found[out[i].data.u64 - 1000] = 1;
                seen++;
            }
        }
        page_out(out, 512 * sizeof *out);
        if (seen == 301)
            break;
    }
    if (seen != 301)
        fail("epoll_wait into a paged-out array of 512 events: events seen", seen, 301);
    /* Level-triggered: every one is ready each time; one wait returns 256 at least. */
    got = epoll_wait(ep, out, 512, 0);
    if (got < 256)
        fail("epoll_wait into a paged-out array of 512 events", got, 256);
    fds = calloc(300, sizeof *fds);
    for (int i = 0; i < 300; i++)
        fds[i] = (struct pollfd){.fd = pipes_[i][0], .events = POLLIN};
    page_out(fds, 300 * sizeof *fds);
    expect(poll(fds, 300, 1000), 300, "poll(2) of a paged-out array of 300 entries");
    for (int i = 0; i < 300; i++) {
        if (!(fds[i].revents & POLLIN))
            fail("poll: no POLLIN", i, fds[i].revents);
        close(pipes_[i][0]);
        close(pipes_[i][1]);
    }
    free(fds);
    free(out);
    close(ev);
    close(ep);
}

/* ---- results ---- */

/* A child that exits with STATUS, left a zombie (waited for without being reaped). */
static pid_t zombie(int status) {
    pid_t pid = fork();
    if (pid == 0)
        _exit(status);
    siginfo_t si;
    if (pid < 0 || waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) != 0)
        fail("fork/waitid(WNOWAIT)", pid, 0);
    return pid;
}

/* select, pselect and ppoll with their sets and masks in heap objects paged out; the wait
 * calls and accept, whose results the kernel writes after reaping the child or taking the
 * connection, with those results in heap objects paged out. */
static void results_case(void) {
    int p[2];
    if (pipe(p) != 0 || write(p[1], "x", 1) != 1)
        fail("pipe", 0, 0);
    fd_set *set = malloc(sizeof *set);
    FD_ZERO(set);
    FD_SET(p[0], set);
    page_out(set, sizeof *set);
    struct timeval *tv = malloc(sizeof *tv);
    *tv = (struct timeval){1, 0};
    page_out(tv, sizeof *tv);
    if (select(p[0] + 1, set, NULL, NULL, tv) != 1 || !FD_ISSET(p[0], set))
        fail("select", -1, 0);
    sigset_t *mask = malloc(sizeof *mask);
    sigemptyset(mask);
    page_out(set, sizeof *set);
    page_out(mask, sizeof *mask);
    if (pselect(p[0] + 1, set, NULL, NULL, NULL, mask) != 1 || !FD_ISSET(p[0], set))
        fail("pselect", -1, 0);
    struct pollfd *pfd = malloc(sizeof *pfd);
    *pfd = (struct pollfd){.fd = p[0], .events = POLLIN};
    struct timespec *ts = malloc(sizeof *ts);
    *ts = (struct timespec){1, 0};
    page_out(pfd, sizeof *pfd);
    page_out(ts, sizeof *ts);
    page_out(mask, sizeof *mask);
    if (ppoll(pfd, 1, ts, mask) != 1 || !(pfd->revents & POLLIN))
        fail("ppoll with a paged-out mask", -1, 0);
    close(p[0]), close(p[1]);

    int *status = malloc(sizeof *status);
    struct rusage *ru = malloc(sizeof *ru);
    for (int how = 0; how < 4; how++) {
        pid_t pid = zombie(how + 3);
        *status = -1;
        page_out(status, sizeof *status);
        page_out(ru, sizeof *ru);
        pid_t got = how == 0 ? waitpid(pid, status, 0) : how == 1 ? wait4(pid, status, 0, ru) : how == 2 ? wait3(status, 0, ru) : wait(status);
        if (got != pid || !WIFEXITED(*status) || WEXITSTATUS(*status) != how + 3)
            fail("a wait call with its status paged out (the child reaped, its status lost)", how, got);
    }
    siginfo_t *si = malloc(sizeof *si);
    pid_t pid = zombie(9);
    page_out(si, sizeof *si);
    if (waitid(P_PID, (id_t)pid, si, WEXITED) != 0 || si->si_pid != pid || si->si_status != 9)
        fail("waitid with its siginfo paged out", pid, 0);

    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "/tmp/nevermore-pageout-%d.sock", (int)getpid());
    unlink(a.sun_path);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 4) != 0)
        fail("listen", l, 0);
    for (int how = 0; how < 2; how++) {
        int c = socket(AF_UNIX, SOCK_STREAM, 0);
        if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0 || write(c, "hello", 5) != 5)
            fail("connect", c, 0);
        struct sockaddr_un *peer = malloc(sizeof *peer);
        socklen_t *len = malloc(sizeof *len);
        *len = sizeof *peer;
        page_out(peer, sizeof *peer);
        page_out(len, sizeof *len);
        int s = how == 0 ? accept(l, (struct sockaddr *)peer, len) : accept4(l, (struct sockaddr *)peer, len, SOCK_CLOEXEC);
        char got[8] = {0};
        if (s < 0 || *len < sizeof(sa_family_t) || peer->sun_family != AF_UNIX || read(s, got, 5) != 5 ||
            strcmp(got, "hello") != 0)
            fail("accept with the peer's address paged out (the connection lost)", how, s);
        close(s), close(c), free(peer), free(len);
    }
    close(l);
    unlink(a.sun_path);
}

/* ---- signals ---- */

extern void (*__sysv_signal(int, void (*)(int)))(int);
extern void (*sysv_signal(int, void (*)(int)))(int);
extern void (*bsd_signal(int, void (*)(int)))(int);
extern int sigblock(int);
extern int sigsetmask(int);

static volatile sig_atomic_t program_handler_ran, usr1_ran, sending;

/* The program's handler of SIGBUS: only a SIGBUS the test sends may reach it (a fault's would
 * come back at once when it returns). */
static void program_handler(int sig) {
    (void)sig;
    if (!sending) {
        static const char msg[] = "FAIL signals: a fault on a paged-out page reached the program's handler\n";
        write(1, msg, sizeof msg - 1);
        _exit(1);
    }
    program_handler_ran++;
}

/* A heap object, paged out, read: the library's handler maps the page again whatever the
 * program did with SIGBUS; the program's handler never sees that fault. */
static void touch_paged_out(const char *how) {
    size_t n = 3 * PAGE;
    unsigned char *p = malloc(n);
    fill(p, n, 5);
    page_out(p, n);
    program_handler_ran = 0;
    check(p, n, 5);
    if (program_handler_ran)
        fail(how, program_handler_ran, 0);
    free(p);
}

static void usr1(int sig) {
    (void)sig;
    /* On the alternate stack, and a heap page paged out read here too. */
    usr1_ran++;
}

/* Whether alternate stacks are set with syscall(SYS_sigaltstack) rather than sigaltstack (as
 * programs that skip the C library's wrappers do). */
static int altstack_raw;

static int set_altstack(const stack_t *ss, stack_t *old) {
    return altstack_raw ? (int)syscall(SYS_sigaltstack, ss, old) : sigaltstack(ss, old);
}

/* A thread's alternate signal stack in a heap object, paged out before each signal. */
static void *altstack_thread(void *arg) {
    size_t n = 64 * 1024;
    char *stack = malloc(n);
    stack_t ss = {.ss_sp = stack, .ss_size = n, .ss_flags = 0}, got;
    if (set_altstack(&ss, NULL) != 0)
        fail("sigaltstack", errno, 0);
    if (set_altstack(NULL, &got) != 0 || got.ss_sp != stack || got.ss_size != n || got.ss_flags != 0)
        fail("sigaltstack tells of another stack than the program's", (long)got.ss_size, (long)n);
    for (int i = 0; i < 20; i++) {
        page_out(stack, n);
        int before = usr1_ran;
        raise(SIGUSR1);
        if (usr1_ran != before + 1)
            fail("the handler on the alternate stack", usr1_ran, before + 1);
    }
    touch_paged_out("a fault in a thread with an alternate stack went to the program's handler");
    ss.ss_flags = SS_DISABLE;
    if (set_altstack(&ss, NULL) != 0 || set_altstack(NULL, &got) != 0 || !(got.ss_flags & SS_DISABLE))
        fail("sigaltstack(SS_DISABLE)", got.ss_flags, 0);
    free(stack);
    if (arg) { /* the next stack is left on, for the thread's exit */
        char *again = malloc(n);
        ss = (stack_t){.ss_sp = again, .ss_size = n, .ss_flags = 0};
        if (set_altstack(&ss, NULL) != 0)
            fail("sigaltstack again", errno, 0);
        page_out(again, n);
        raise(SIGUSR1);
    }
    return NULL;
}

/* Every way of installing a handler of SIGBUS, ignoring it or blocking it: the library's
 * handler stays, and mends a paged-out page; a SIGBUS sent to the process still reaches the
 * program's handler. And alternate signal stacks in heap objects. */
static void signals_case(void) {
    static const char *names[] = {"signal", "bsd_signal", "sysv_signal", "__sysv_signal", "sigset"};
    for (int how = 0; how < 5; how++) {
        void (*old)(int) = how == 0   ? signal(SIGBUS, program_handler)
                           : how == 1 ? bsd_signal(SIGBUS, program_handler)
                           : how == 2 ? sysv_signal(SIGBUS, program_handler)
                           : how == 3 ? __sysv_signal(SIGBUS, program_handler)
                                      : sigset(SIGBUS, program_handler);
        if (old == SIG_ERR)
            fail(names[how], how, 0);
        touch_paged_out(names[how]);
        program_handler_ran = 0;
        sending = 1;
        raise(SIGBUS);
        sending = 0;
        if (program_handler_ran != 1)
            fail("a SIGBUS sent did not reach the program's handler", how, program_handler_ran);
    }
    struct sigaction sa;
    if (sigaction(SIGBUS, NULL, &sa) != 0 || sa.sa_handler != program_handler)
        fail("sigaction tells of another handler", 0, 0);
    if (sigignore(SIGBUS) != 0)
        fail("sigignore", errno, 0);
    touch_paged_out("sigignore");
    if (sighold(SIGBUS) != 0)
        fail("sighold", errno, 0);
    touch_paged_out("sighold");
    sigrelse(SIGBUS);
    sigblock(1 << (SIGBUS - 1));
    touch_paged_out("sigblock");
    sigsetmask(1 << (SIGBUS - 1));
    touch_paged_out("sigsetmask");
    sigsetmask(0);
    /* Every signal blocked with the system call itself (an 8-byte kernel set). */
    unsigned long all = ~0UL, was = 0;
    if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &was, 8) != 0)
        fail("rt_sigprocmask", errno, 0);
    touch_paged_out("rt_sigprocmask");
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &was, NULL, 8);
    signal(SIGBUS, SIG_DFL);

    struct sigaction on_stack = {.sa_handler = usr1, .sa_flags = SA_ONSTACK};
    sigemptyset(&on_stack.sa_mask);
    if (sigaction(SIGUSR1, &on_stack, NULL) != 0)
        fail("sigaction(SIGUSR1)", errno, 0);
    for (altstack_raw = 0; altstack_raw < 2; altstack_raw++) {
        altstack_thread(NULL);
        for (int i = 0; i < 4; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, altstack_thread, (void *)1) != 0 || pthread_join(t, NULL) != 0)
                fail("pthread_create", i, 0);
        }
    }
}

/* A bad iovec array, or a bad buffer in a good one: EFAULT, and no crash. */
static void bad_case(void) {
    int p[2];
    if (pipe(p) != 0 || write(p[1], "abc", 3) != 3)
        fail("pipe", 0, 0);
    void *none = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (none == MAP_FAILED)
        fail("mmap", 0, 0);
    errno = 0;
    if (readv(p[0], (struct iovec *)none, 1) != -1 || errno != EFAULT)
        fail("readv(2) with a no-access iovec array", errno, EFAULT);
    struct iovec *iov = malloc(sizeof *iov);
    *iov = (struct iovec){none, 3};
    errno = 0;
    if (readv(p[0], iov, 1) != -1 || errno != EFAULT)
        fail("readv(2) into a no-access buffer", errno, EFAULT);
    struct msghdr m = {.msg_iov = (struct iovec *)none, .msg_iovlen = 1};
    errno = 0;
    if (sendmsg(p[1], &m, 0) != -1 || (errno != EFAULT && errno != ENOTSOCK))
        fail("sendmsg(2) with a no-access iovec array", errno, EFAULT);
    /* execve(2) with a no-access argv array, and with a no-access string in it. */
    char *args[] = {"sh", (char *)none, NULL};
    errno = 0;
    if (execve("/bin/sh", (char **)none, NULL) != -1 || errno != EFAULT)
        fail("execve(2) with a no-access argv array", errno, EFAULT);
    errno = 0;
    if (execve("/bin/sh", args, NULL) != -1 || errno != EFAULT)
        fail("execve(2) with a no-access argument", errno, EFAULT);
    /* The same with the path a heap string at the end of a page object, against its guard
     * page: the examination of the failed call reads the path to its NUL, not a path's
     * longest length (it reported the path as running past its object). So for a second
     * path, after a first one that cannot be read. */
    char *page = malloc(PAGE), *path = page + PAGE - sizeof "/bin/sh";
    strcpy(path, "/bin/sh");
    errno = 0;
    if (execve(path, args, NULL) != -1 || errno != EFAULT)
        fail("execve(2) of a path at its object's end with a no-access argument", errno, EFAULT);
    errno = 0;
    if (rename((char *)none, path) != -1 || errno != EFAULT)
        fail("rename(2) of a no-access path to one at its object's end", errno, EFAULT);
    free(page);
    free(iov);
    close(p[0]);
    close(p[1]);
}

static void freed_case(void) {
    int p[2];
    if (pipe(p) != 0 || write(p[1], "abc", 3) != 3)
        fail("pipe", 0, 0);
    unsigned char *volatile b = malloc(5000);
    memset(b, 1, 5000);
    free(b);
    ssize_t r = read(p[0], b, 3);
    if (r < 0 && errno == EFAULT)
        printf("EFAULT\n");
    else
        printf("READ %zd\n", r);
}

/* A string in a heap object of its own. */
static char *heap_string(const char *s) {
    char *p = malloc(strlen(s) + 1);
    strcpy(p, s);
    return p;
}

/* A path in a heap object of its own, paged out. */
static char *heap_path(const char *dir, const char *name) {
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    page_out(p, strlen(p) + 1);
    return p;
}

extern int __open_2(const char *, int);
extern int __open64_2(const char *, int);
extern int __openat_2(int, const char *, int);
extern int __openat64_2(int, const char *, int);
extern int __xstat(int, const char *, struct stat *);
extern int __lxstat(int, const char *, struct stat *);
extern int __fxstat(int, int, struct stat *);
extern int __fxstatat(int, int, const char *, struct stat *, int);
extern ssize_t __readlink_chk(const char *, char *, size_t, size_t);
extern ssize_t __readlinkat_chk(int, const char *, char *, size_t, size_t);

/* The names the same calls have in programs built with _FORTIFY_SOURCE (tar's __openat_2) or
 * against a C library before 2.33 (node's __xstat64): FILE (in DIR) exists, LINK (in DIR) is a
 * symbolic link to "m". */
static void checked_names(const char *dir, const char *file, const char *link) {
    int fds[4] = {__open_2(heap_path(dir, file), O_RDONLY), __open64_2(heap_path(dir, file), O_RDONLY),
                  __openat_2(AT_FDCWD, heap_path(dir, file), O_RDONLY),
                  __openat64_2(AT_FDCWD, heap_path(dir, file), O_RDONLY)};
    for (int i = 0; i < 4; i++) {
        if (fds[i] < 0)
            fail("__open_2/__open64_2/__openat_2/__openat64_2", i, fds[i]);
        close(fds[i]);
    }
    struct stat *st = malloc(sizeof *st);
    for (int how = 0; how < 4; how++) {
        page_out(st, sizeof *st);
        int fd = -1;
        if (how == 2) {
            fd = open(heap_path(dir, file), O_RDONLY);
            page_out(st, sizeof *st);
        }
        int r = how == 0   ? __xstat(1, heap_path(dir, file), st)
                : how == 1 ? __lxstat(1, heap_path(dir, link), st)
                : how == 2 ? __fxstat(1, fd, st)
                           : __fxstatat(1, AT_FDCWD, heap_path(dir, file), st, 0);
        if (r != 0 || (how == 1 ? !S_ISLNK(st->st_mode) : !S_ISREG(st->st_mode)))
            fail("__xstat/__lxstat/__fxstat/__fxstatat", how, r);
        if (fd >= 0)
            close(fd);
    }
    char *buf = malloc(64);
    page_out(buf, 64);
    if (__readlink_chk(heap_path(dir, link), buf, 64, 64) != 1 || buf[0] != 'm')
        fail("__readlink_chk", -1, 0);
    page_out(buf, 64);
    if (__readlinkat_chk(AT_FDCWD, heap_path(dir, link), buf, 64, 64) != 1 || buf[0] != 'm')
        fail("__readlinkat_chk", -1, 0);
    free(buf), free(st);
}

/* statvfs, inotify_add_watch, getcwd, and the extended attribute calls (by path, without
 * following a link, by descriptor), with their names, values and lists in heap objects paged
 * out. FILE (in DIR) exists. */
static void more_calls(const char *dir, const char *file) {
    struct statvfs sv;
    if (statvfs(heap_path(dir, file), &sv) != 0 || sv.f_bsize == 0)
        fail("statvfs", -1, 0);
    int in = inotify_init1(IN_CLOEXEC);
    if (in < 0 || inotify_add_watch(in, heap_path(dir, file), IN_MODIFY) < 0)
        fail("inotify_add_watch", in, 0);
    close(in);
    char *cwd = malloc(PATH_MAX);
    page_out(cwd, PATH_MAX);
    if (getcwd(cwd, PATH_MAX) != cwd || cwd[0] != '/')
        fail("getcwd into a paged-out object", -1, 0);
    char *path = heap_path(dir, file);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        fail("open", fd, 0);
    static const char text[] = "a value of the attribute";
    for (int how = 0; how < 3; how++) {
        char *name = heap_string("user.nevermore"), *value = heap_string(text);
        page_out(name, sizeof "user.nevermore");
        page_out(value, sizeof text);
        page_out(path, strlen(path) + 1);
        int r = how == 0   ? setxattr(path, name, value, sizeof text, 0)
                : how == 1 ? lsetxattr(path, name, value, sizeof text, 0)
                           : fsetxattr(fd, name, value, sizeof text, 0);
        if (r != 0)
            fail("setxattr", how, r);
        char *got = malloc(64);
        page_out(got, 64);
        page_out(name, sizeof "user.nevermore");
        page_out(path, strlen(path) + 1);
        ssize_t n = how == 0   ? getxattr(path, name, got, 64)
                    : how == 1 ? lgetxattr(path, name, got, 64)
                               : fgetxattr(fd, name, got, 64);
        if (n != (ssize_t)sizeof text || memcmp(got, text, sizeof text) != 0)
            fail("getxattr", how, (long)n);
        char *list = malloc(512);
        page_out(list, 512);
        page_out(path, strlen(path) + 1);
        n = how == 0 ? listxattr(path, list, 512) : how == 1 ? llistxattr(path, list, 512) : flistxattr(fd, list, 512);
        int listed = 0;
        for (ssize_t at = 0; n > 0 && at < n; at += (ssize_t)strlen(list + at) + 1)
            listed |= strcmp(list + at, "user.nevermore") == 0;
        if (!listed)
            fail("listxattr", how, (long)n);
        page_out(name, sizeof "user.nevermore");
        page_out(path, strlen(path) + 1);
        r = how == 0 ? removexattr(path, name) : how == 1 ? lremovexattr(path, name) : fremovexattr(fd, name);
        if (r != 0)
            fail("removexattr", how, r);
        free(name), free(value), free(got), free(list);
    }
    close(fd);
}

/* The other calls that take paths, and calls that fill a buffer of their own (fstat,
 * getrandom, getdents64), everything in heap objects paged out. */
static void more_paths(const char *dir) {
    int fd = open(heap_path(dir, "m"), O_CREAT | O_WRONLY, 0600);
    if (fd < 0 || write(fd, "0123456789", 10) != 10)
        fail("open", fd, 0);
    if (chmod(heap_path(dir, "m"), 0640) != 0 || fchmodat(AT_FDCWD, heap_path(dir, "m"), 0600, 0) != 0)
        fail("chmod/fchmodat", -1, 0);
    if (chown(heap_path(dir, "m"), getuid(), getgid()) != 0 || lchown(heap_path(dir, "m"), getuid(), getgid()) != 0 ||
        fchownat(AT_FDCWD, heap_path(dir, "m"), getuid(), getgid(), 0) != 0)
        fail("chown/lchown/fchownat", -1, 0);
    if (truncate(heap_path(dir, "m"), 3) != 0)
        fail("truncate", -1, 0);
    struct timespec *ts = malloc(2 * sizeof *ts);
    ts[0] = ts[1] = (struct timespec){1000000000, 0};
    page_out(ts, 2 * sizeof *ts);
    if (utimensat(AT_FDCWD, heap_path(dir, "m"), ts, 0) != 0)
        fail("utimensat", -1, 0);
    struct stat *st = malloc(sizeof *st);
    page_out(st, sizeof *st);
    if (fstat(fd, st) != 0 || st->st_size != 3 || st->st_mtime != 1000000000 || (st->st_mode & 0777) != 0600)
        fail("fstat into a paged-out object", (long)st->st_size, 3);
    close(fd);
    if (link(heap_path(dir, "m"), heap_path(dir, "h")) != 0 ||
        linkat(AT_FDCWD, heap_path(dir, "h"), AT_FDCWD, heap_path(dir, "h2"), 0) != 0)
        fail("link/linkat", -1, 0);
    char *target = heap_string("m");
    page_out(target, 2);
    if (symlink(target, heap_path(dir, "s")) != 0)
        fail("symlink", -1, 0);
    page_out(target, 2);
    if (symlinkat(target, AT_FDCWD, heap_path(dir, "s2")) != 0)
        fail("symlinkat", -1, 0);
    char *buf = malloc(100);
    page_out(buf, 100);
    if (readlinkat(AT_FDCWD, heap_path(dir, "s2"), buf, 100) != 1 || buf[0] != 'm')
        fail("readlinkat", -1, 0);
    if (renameat(AT_FDCWD, heap_path(dir, "h2"), AT_FDCWD, heap_path(dir, "h3")) != 0 ||
        renameat2(AT_FDCWD, heap_path(dir, "h3"), AT_FDCWD, heap_path(dir, "h4"), 0) != 0)
        fail("renameat/renameat2", -1, 0);
    if (mkdirat(AT_FDCWD, heap_path(dir, "dd"), 0700) != 0 || rmdir(heap_path(dir, "dd")) != 0)
        fail("mkdirat", -1, 0);
    if (mkfifo(heap_path(dir, "f"), 0600) != 0 || mknod(heap_path(dir, "n"), S_IFREG | 0600, 0) != 0)
        fail("mkfifo/mknod", -1, 0);
    struct statfs *sf = malloc(sizeof *sf);
    page_out(sf, sizeof *sf);
    if (statfs(heap_path(dir, "m"), sf) != 0 || sf->f_bsize <= 0)
        fail("statfs", -1, 0);
    more_calls(dir, "m");
    checked_names(dir, "m", "s");
    static const char *names[] = {"m", "h", "h4", "s", "s2", "f", "n"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (unlink(heap_path(dir, names[i])) != 0)
            fail("unlink", (long)i, 0);
    size_t n = 5000;
    unsigned char *r = calloc(1, n);
    page_out(r, n);
    if (getrandom(r, n, 0) != (ssize_t)n)
        fail("getrandom into a paged-out object", -1, (long)n);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    char *d = malloc(8192);
    page_out(d, 8192);
    if (dfd < 0 || getdents64(dfd, d, 8192) <= 0)
        fail("getdents64 into a paged-out object", dfd, 0);
    close(dfd);
}

/* Calls that take paths (and stat buffers, readlink's buffer) in heap objects paged out. */
static void path_case(void) {
    char dir[] = "/tmp/nevermore-pageout-XXXXXX";
    if (!mkdtemp(dir))
        fail("mkdtemp", 0, 0);
    int fd = open(heap_path(dir, "a"), O_CREAT | O_WRONLY | O_EXCL, 0600);
    if (fd < 0 || write(fd, "12345", 5) != 5)
        fail("open(O_CREAT) of a paged-out path", fd, 0);
    close(fd);
    struct stat *st = malloc(sizeof *st);
    page_out(st, sizeof *st);
    if (stat(heap_path(dir, "a"), st) != 0 || st->st_size != 5)
        fail("stat", -1, 0);
    page_out(st, sizeof *st);
    if (lstat(heap_path(dir, "a"), st) != 0 || st->st_size != 5)
        fail("lstat", -1, 0);
    page_out(st, sizeof *st);
    if (fstatat(AT_FDCWD, heap_path(dir, "a"), st, 0) != 0 || st->st_size != 5)
        fail("fstatat", -1, 0);
    struct statx *sx = malloc(sizeof *sx);
    page_out(sx, sizeof *sx);
    if (statx(AT_FDCWD, heap_path(dir, "a"), 0, STATX_SIZE, sx) != 0 || sx->stx_size != 5)
        fail("statx", -1, 0);
    if (access(heap_path(dir, "a"), R_OK) != 0 || faccessat(AT_FDCWD, heap_path(dir, "a"), R_OK, 0) != 0)
        fail("access/faccessat", -1, 0);
    fd = openat(AT_FDCWD, heap_path(dir, "a"), O_RDONLY);
    if (fd < 0)
        fail("openat", fd, 0);
    close(fd);
    fd = creat(heap_path(dir, "b"), 0600);
    if (fd < 0)
        fail("creat", fd, 0);
    close(fd);
    char link[64];
    snprintf(link, sizeof link, "%s/l", dir);
    if (symlink("a-target", link) != 0)
        fail("symlink", -1, 0);
    char *buf = malloc(100);
    page_out(buf, 100);
    if (readlink(heap_path(dir, "l"), buf, 100) != 8 || memcmp(buf, "a-target", 8) != 0)
        fail("readlink", -1, 0);
    if (rename(heap_path(dir, "b"), heap_path(dir, "c")) != 0)
        fail("rename", -1, 0);
    if (mkdir(heap_path(dir, "d"), 0700) != 0 || rmdir(heap_path(dir, "d")) != 0)
        fail("mkdir/rmdir", -1, 0);
    if (unlink(heap_path(dir, "c")) != 0 || unlinkat(AT_FDCWD, heap_path(dir, "l"), 0) != 0 ||
        unlink(heap_path(dir, "a")) != 0)
        fail("unlink/unlinkat", -1, 0);
    char here[256];
    if (!getcwd(here, sizeof here) || chdir(heap_path(dir, ".")) != 0 || chdir(here) != 0)
        fail("chdir", -1, 0);
    more_paths(dir);
    if (rmdir(dir) != 0)
        fail("rmdir of the directory", -1, 0);
}


/* `sh -c SCRIPT` with everything on the heap: the path, the name, argv, envp (which sets
 * NEVERMORE_EXEC_STATUS=7) and their strings. */
struct command {
    char **argv, **envp, *sh, *name;
};

static struct command heap_command(const char *script) {
    struct command c = {malloc(4 * sizeof(char *)), malloc(2 * sizeof(char *)), heap_string("/bin/sh"),
                        heap_string("sh")};
    c.argv[0] = heap_string("sh");
    c.argv[1] = heap_string("-c");
    c.argv[2] = heap_string(script);
    c.argv[3] = NULL;
    c.envp[0] = heap_string("NEVERMORE_EXEC_STATUS=7");
    c.envp[1] = NULL;
    return c;
}

static void page_out_command(const struct command *c) {
    page_out(c->argv, 4 * sizeof *c->argv);
    page_out(c->envp, 2 * sizeof *c->envp);
    for (int i = 0; i < 3; i++)
        page_out(c->argv[i], strlen(c->argv[i]) + 1);
    page_out(c->envp[0], strlen(c->envp[0]) + 1);
    page_out(c->sh, 8);
    page_out(c->name, 3);
}

/* execve, execv, execvp and execvpe with the path, the argv and envp arrays and their strings
 * in heap objects paged out (the child pages them out: its copies of the pages are its own).
 * The program run exits with the status its argument names. */
static void exec_case(void) {
    struct command c = heap_command("exit $NEVERMORE_EXEC_STATUS");
    char **argv = c.argv, **envp = c.envp, *sh = c.sh, *name = c.name;
    setenv("NEVERMORE_EXEC_STATUS", "7", 1);
    for (int how = 0; how < 4; how++) {
        pid_t pid = fork();
        if (pid < 0)
            fail("fork", how, 0);
        if (pid == 0) {
            page_out_command(&c);
            if (how == 0)
                execve(sh, argv, envp);
            else if (how == 1)
                execv(sh, argv);
            else if (how == 2)
                execvp(name, argv);
            else
                execvpe(name, argv, envp);
            _exit(errno == EFAULT ? 98 : 99);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
            fail("the program run did not exit with 7 (98: EFAULT)", how, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    /* execl, execlp and execle: their arguments as a list, past the registers onto the stack
     * (the script checks the last two), and the environment (execl, execlp) or envp after the
     * list (execle). */
    extern char **environ;
    struct command l = heap_command("[ \"$2$3\" = x3x4 ] && exit $NEVERMORE_EXEC_STATUS; exit 5");
    char *x[4] = {heap_string("x1"), heap_string("x2"), heap_string("x3"), heap_string("x4")};
    for (int how = 0; how < 3; how++) {
        pid_t pid = fork();
        if (pid < 0)
            fail("fork", how, 0);
        if (pid == 0) {
            page_out_command(&l);
            for (int i = 0; i < 4; i++)
                page_out(x[i], 3);
            for (char **e = environ; *e; e++)
                page_out(*e, strlen(*e) + 1);
            if (how == 0)
                execl(l.sh, l.argv[0], l.argv[1], l.argv[2], x[0], x[1], x[2], x[3], (char *)NULL);
            else if (how == 1)
                execlp(l.name, l.argv[0], l.argv[1], l.argv[2], x[0], x[1], x[2], x[3], (char *)NULL);
            else
                execle(l.sh, l.argv[0], l.argv[1], l.argv[2], x[0], x[1], x[2], x[3], (char *)NULL, l.envp);
            _exit(errno == EFAULT ? 98 : 99);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
            fail("the program run by execl, execlp or execle did not exit with 7 (98: EFAULT, 5: arguments)", how,
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
}

/* Pages out a stream's buffer (glibc's FILE keeps it between _IO_buf_base and _IO_buf_end). */
static void page_out_buffer(FILE *f) {
    if (!f->_IO_buf_base || f->_IO_buf_end <= f->_IO_buf_base)
        fail("the stream has no buffer", 0, 0);
    page_out(f->_IO_buf_base, (size_t)(f->_IO_buf_end - f->_IO_buf_base));
}

/* Streams: the C library reads and writes a stream's buffer with its own system calls, and
 * reads or writes a big request straight into or from the caller's buffer. The path given to
 * fopen, the stream's buffer and the caller's buffers are heap objects, paged out. */
static void stdio_case(void) {
    char dir[] = "/tmp/nevermore-pageout-XXXXXX";
    if (!mkdtemp(dir))
        fail("mkdtemp", 0, 0);
    char *name = heap_path(dir, "s");
    FILE *f = fopen(name, "w+");
    if (!f)
        fail("fopen of a paged-out path", 0, 0);
    /* Small writes gather in the stream's buffer; the flush writes it out. */
    size_t small = 3000;
    fill(scratch, small, 12);
    if (fwrite(scratch, 1, small, f) != small)
        fail("fwrite into the stream's buffer", 0, 0);
    page_out_buffer(f);
    if (fflush(f) != 0)
        fail("fflush of a paged-out stream buffer", -1, 0);
    /* A big write goes from the caller's buffer straight to the file. */
    size_t big = 5 * PAGE + 123;
    unsigned char *b = malloc(big);
    fill(b, big, 13);
    page_out(b, big);
    if (fwrite(b, 1, big, f) != big || fflush(f) != 0)
        fail("fwrite from a paged-out object", -1, 0);
    /* In items: the count of whole items, as the C library gives it. */
    fill(b, big, 14);
    page_out(b, big);
    if (fwrite(b, 100, big / 100, f) != big / 100 || fflush(f) != 0)
        fail("fwrite of items from a paged-out object", -1, 0);
    size_t total = small + big + big / 100 * 100;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size != (off_t)total)
        fail("the file's size", (long)st.st_size, (long)total);
    /* Reads: a small one fills the stream's buffer, which is then paged out before the next
     * fills it again; a big one goes straight into the caller's buffer. */
    rewind(f);
    unsigned char small_in[100];
    if (fread(small_in, 1, 100, f) != 100)
        fail("fread of the start", 0, 0);
    check(small_in, 100, 12);
    page_out_buffer(f);
    if (fseek(f, 0, SEEK_SET) != 0 || fread(small_in, 1, 100, f) != 100)
        fail("fread through a paged-out stream buffer", -1, 0);
    check(small_in, 100, 12);
    if (fseek(f, (long)small, SEEK_SET) != 0)
        fail("fseek", 0, 0);
    memset(b, 0, big);
    page_out(b, big);
    if (fread(b, 1, big, f) != big)
        fail("fread into a paged-out object", -1, 0);
    check(b, big, 13);
    memset(b, 0, big);
    page_out(b, big);
    if (fread(b, 100, big / 100, f) != big / 100 || ferror(f))
        fail("fread of items into a paged-out object", -1, 0);
    check(b, big / 100 * 100, 14);
    /* The checked fread of programs built with _FORTIFY_SOURCE. */
    if (fseek(f, (long)small, SEEK_SET) != 0)
        fail("fseek", 0, 0);
    memset(b, 0, big);
    page_out(b, big);
    if (__fread_chk(b, big, 1, big, f) != big)
        fail("__fread_chk into a paged-out object", -1, 0);
    check(b, big, 13);
    /* A line read through a paged-out buffer. */
    rewind(f);
    page_out_buffer(f);
    char *line = NULL;
    size_t cap = 0;
    if (getline(&line, &cap, f) < 1 || ferror(f))
        fail("getline through a paged-out stream buffer", -1, 0);
    free(line);
    /* freopen, its path paged out. */
    f = freopen(heap_path(dir, "s"), "r", f);
    if (!f || fread(small_in, 1, 100, f) != 100)
        fail("freopen of a paged-out path", -1, 0);
    check(small_in, 100, 12);
    if (fclose(f) != 0)
        fail("fclose", 0, 0);
    free(b);
    unlink(name);
    free(name);
    if (rmdir(dir) != 0)
        fail("rmdir", 0, 0);
}

/* A buffer of the program's given to a stream (setvbuf, setbuf, setbuffer): the C library
 * writes it out and reads into it with system calls of its own. Each buffer is a heap object,
 * paged out, with whatever buffer the stream uses, before the flush or the refill. */
static void userbuf_case(void) {
    char dir[] = "/tmp/nevermore-pageout-XXXXXX";
    if (!mkdtemp(dir))
        fail("mkdtemp", 0, 0);
    char *name = heap_path(dir, "u");
    unsigned char got[200];
    for (int k = 0; k < 4; k++) {
        FILE *f = fopen(name, "w+");
        if (!f)
            fail("fopen", k, 0);
        size_t size = k == 0 ? 65536 : k == 2 ? 20000 : BUFSIZ;
        unsigned char *mine = malloc(size);
        int r = 0;
        if (k == 0)
            r = setvbuf(f, (char *)mine, _IOFBF, size);
        else if (k == 1)
            setbuf(f, (char *)mine);
        else if (k == 2)
            setbuffer(f, (char *)mine, size);
        else
            r = setvbuf(f, (char *)mine, _IOLBF, size);
        if (r != 0)
            fail("setvbuf", r, k);
        /* Written into the buffer (a line-buffered stream writes out each line as it comes),
         * then paged out before the flush. */
        size_t n = size / 2;
        fill(scratch, n, 20 + k);
        if (fwrite(scratch, 1, n, f) != n)
            fail("fwrite into a buffer of the program's", k, 0);
        page_out(mine, size);
        page_out_buffer(f);
        if (fflush(f) != 0)
            fail("fflush of a paged-out buffer of the program's (0 setvbuf, 1 setbuf, 2 setbuffer, 3 line)", k, -1);
        memset(scratch, 0, n);
        expect(pread(fileno(f), scratch, n, 0), n, "pread of what the stream wrote");
        check(scratch, n, 20 + k);
        /* Read back: each refill goes into the paged-out buffer. */
        rewind(f);
        page_out(mine, size);
        page_out_buffer(f);
        int c = fgetc(f);
        if (c != pat(20 + k, 0) || ferror(f))
            fail("fgetc through a paged-out buffer of the program's (0 setvbuf, 1 setbuf, 2 setbuffer, 3 line)", k, c);
        page_out(mine, size);
        page_out_buffer(f);
        if (fseek(f, 0, SEEK_SET) != 0 || fread(got, 1, sizeof got, f) != sizeof got || ferror(f))
            fail("fread through a paged-out buffer of the program's", k, -1);
        check(got, sizeof got, 20 + k);
        if (fclose(f) != 0)
            fail("fclose", k, 0);
        free(mine);
    }
    unlink(name);
    free(name);
    if (rmdir(dir) != 0)
        fail("rmdir", 0, 0);
}

/* The entries of the directory stream d whose names start with `first`, read to its end;
 * minus the error number when readdir fails. */
static int entries_starting(DIR *d, char first) {
    int seen = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)))
        seen += e->d_name[0] == first;
    return errno ? -errno : seen;
}

/* A directory read after its stream (the DIR, with the buffer the kernel fills) was paged
 * out, opened through a paged-out path. */
static void dir_case(void) {
    char dir[] = "/tmp/nevermore-pageout-XXXXXX";
    if (!mkdtemp(dir))
        fail("mkdtemp", 0, 0);
    enum { FILES = 300 };
    for (int i = 0; i < FILES; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        int fd = open(heap_path(dir, name), O_CREAT | O_WRONLY, 0600);
        if (fd < 0)
            fail("open", i, 0);
        close(fd);
    }
    DIR *d = opendir(heap_path(dir, "."));
    if (!d)
        fail("opendir of a paged-out path", -1, 0);
    page_out(d, malloc_usable_size(d));
    int seen = entries_starting(d, 'f');
    if (seen != FILES)
        fail("readdir of a paged-out directory stream", seen, FILES);
    struct dirent *e;
    /* readdir_r: the entry in a heap object of the program's, paged out too. */
    rewinddir(d);
    page_out(d, malloc_usable_size(d));
    struct dirent *entry = malloc(sizeof *entry);
    page_out(entry, sizeof *entry);
    seen = 0;
    int r;
    while ((r = readdir_r(d, entry, &e)) == 0 && e)
        seen += e == entry && e->d_name[0] == 'f';
    if (r != 0 || seen != FILES)
        fail("readdir_r of a paged-out directory stream", r, seen);
    free(entry);
    closedir(d);
    /* A path across two pages, the second paged out: the C library's opendir reads the first
     * byte before its own open, which reads the rest. */
    char *two = malloc(3 * PAGE);
    char *start = (char *)(((uintptr_t)two + PAGE) & ~(PAGE - 1)) - 8;
    snprintf(start, 2 * PAGE, "%s/.", dir);
    page_out(start + 8, 1);
    d = opendir(start);
    if (!d)
        fail("opendir of a path whose second page was paged out", -1, 0);
    closedir(d);
    free(two);
    for (int i = 0; i < FILES; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        unlink(heap_path(dir, name));
    }
    if (rmdir(dir) != 0)
        fail("rmdir", 0, 0);
}

/* Pages out every writable mapping of the process (what a pageout of the whole process does). */
static void page_out_everything(void) {
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        fail("fopen /proc/self/maps", 0, 0);
    char line[512];
    while (fgets(line, sizeof line, maps)) {
        unsigned long a, e;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &a, &e, perms) == 3 && perms[1] == 'w')
            madvise((void *)a, e - a, MADV_PAGEOUT); /* some mappings refuse it: no matter */
    }
    fclose(maps);
}

static volatile int pager_stop;

/* Pages out every writable mapping of the process, again and again, until told to stop. */
static void *pager(void *arg) {
    (void)arg;
    while (!pager_stop)
        page_out_everything();
    return NULL;
}

/* A thread running `fn` (a pager) until stop_pager. */
static pthread_t start_paging(void *(*fn)(void *)) {
    pthread_t t;
    pager_stop = 0;
    if (pthread_create(&t, NULL, fn, NULL) != 0)
        fail("pthread_create", 0, 0);
    return t;
}

/* A thread that pages the process out until stop_pager. */
static pthread_t start_pager(void) {
    return start_paging(pager);
}

static void stop_pager(pthread_t t) {
    pager_stop = 1;
    pthread_join(t, NULL);
}

enum { WALK_FILES = 1500 };
static int walked;

/* scandir's filter and nftw's callback run while the C library's own directory stream is
 * open, between two of its refills: everything is paged out every 250 entries. */
static int walk_filter(const struct dirent *e) {
    if (++walked % 250 == 0)
        page_out_everything();
    return e->d_name[0] == 'w';
}

static int walk_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)path, (void)st, (void)ftw;
    if (type == FTW_F && ++walked % 250 == 0)
        page_out_everything();
    return 0;
}

/* The C library's own directory streams, which it reads with its own readdir inside scandir
 * and nftw: 1500 entries of 64-byte names fill a stream's 32 KiB buffer four times, and the
 * buffer is paged out between refills. */
static void walk_case(void) {
    char dir[] = "/tmp/nevermore-pageout-XXXXXX";
    if (!mkdtemp(dir))
        fail("mkdtemp", 0, 0);
    char path[256];
    for (int i = 0; i < WALK_FILES; i++) {
        snprintf(path, sizeof path, "%s/w%04d-%050d", dir, i, 0);
        int fd = open(path, O_CREAT | O_WRONLY, 0600);
        if (fd < 0)
            fail("open", i, 0);
        close(fd);
    }
    struct dirent **v;
    walked = 0;
    int n = scandir(dir, &v, walk_filter, alphasort);
    if (n != WALK_FILES)
        fail("scandir of a directory paged out while read", n, WALK_FILES);
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
    walked = 0;
    if (nftw(dir, walk_entry, 4, FTW_PHYS) != 0 || walked != WALK_FILES)
        fail("nftw of a directory paged out while read", walked, WALK_FILES);
    for (int i = 0; i < WALK_FILES; i++) {
        snprintf(path, sizeof path, "%s/w%04d-%050d", dir, i, 0);
        unlink(path);
    }
    if (rmdir(dir) != 0)
        fail("rmdir", 0, 0);
}

/* posix_spawn, posix_spawnp, system and popen: the child reads the file actions, and its
 * execve reads the path, argv and envp, where no fault can be mended (the child runs with every
 * signal blocked; the kernel's reads reach no handler). Everything on the heap, paged out. */
/* posix_spawn of a path, and posix_spawnp of a name looked up in a PATH set by setenv (heap
 * strings both), while another thread pages the whole process out: the child reads the path,
 * the environment and the file actions with every signal blocked, where a page taken after
 * the parent read it killed the child with SIGBUS (posix_spawn said it started). The file
 * actions' array comes from realloc, and the padding of a dup2 action holds whatever the heap
 * held there: here a freed object's address, which must not keep the actions from being
 * copied for the child. */
static void spawn_while_paged_out(void) {
    char *gone = malloc(64);
    free(gone);
    posix_spawn_file_actions_t fa;
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0 || posix_spawn_file_actions_init(&fa) != 0 || posix_spawn_file_actions_adddup2(&fa, null, 1) != 0)
        fail("file actions", null, 0);
    uintptr_t *words = (uintptr_t *)(void *)fa.__actions;
    words[2] = words[3] = (uintptr_t)gone;
    const char *old_path = getenv("PATH");
    char *saved = old_path ? heap_string(old_path) : NULL;
    setenv("PATH", "/nonexistent-dir:/usr/bin:/bin", 1);
    char *path = heap_string("/bin/true"), *name = heap_string("true");
    char *argv[] = {"true", NULL}, *envp[] = {NULL};
    pthread_t t = start_pager();
    int failed = 0, died = 0;
    for (int i = 0; i < 400; i++) {
        pid_t pid;
        int r = i % 2 ? posix_spawnp(&pid, name, &fa, NULL, argv, envp) : posix_spawn(&pid, path, &fa, NULL, argv, envp);
        int st;
        if (r != 0)
            failed++;
        else if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            died++;
    }
    stop_pager(t);
    if (failed || died)
        fail("posix_spawn(p) while the process is paged out (failed, children killed)", failed, died);
    char *missing = heap_string("nevermore-no-such-program");
    pid_t pid;
    int r = posix_spawnp(&pid, missing, NULL, NULL, argv, envp);
    if (r != ENOENT)
        fail("posix_spawnp of a name in no directory of PATH", r, ENOENT);
    if (saved)
        setenv("PATH", saved, 1);
    else
        unsetenv("PATH");
    posix_spawn_file_actions_destroy(&fa);
    close(null);
    free(saved), free(path), free(name), free(missing);
}

static void spawn_case(void) {
    extern char **environ;
    char dir[] = "/tmp/nevermore-pageout-XXXXXX";
    if (!mkdtemp(dir))
        fail("mkdtemp", 0, 0);
    struct command c = heap_command("echo spawned; exit $NEVERMORE_EXEC_STATUS");
    char **argv = c.argv, **envp = c.envp, *sh = c.sh, *name = c.name;
    char *out = heap_path(dir, "out");
    for (int how = 0; how < 2; how++) {
        posix_spawn_file_actions_t fa;
        if (posix_spawn_file_actions_init(&fa) != 0 ||
            posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600) != 0)
            fail("file actions", how, 0);
        page_out(fa.__actions, (size_t)fa.__used * 32);
        page_out_command(&c);
        page_out(out, strlen(out) + 1);
        /* The pid and the attributes in heap objects too: the C library writes the pid with
         * every signal blocked (a SIGBUS there killed the parent), and the child reads the
         * attributes so. */
        pid_t *pid = malloc(sizeof *pid);
        posix_spawnattr_t *attr = malloc(sizeof *attr);
        if (posix_spawnattr_init(attr) != 0 || posix_spawnattr_setflags(attr, POSIX_SPAWN_SETPGROUP) != 0)
            fail("attributes", how, 0);
        page_out(pid, sizeof *pid);
        page_out(attr, sizeof *attr);
        int r = how == 0 ? posix_spawn(pid, sh, &fa, attr, argv, envp)
                         : posix_spawnp(pid, name, &fa, attr, argv, envp);
        if (r != 0)
            fail("posix_spawn", how, r);
        int st;
        if (waitpid(*pid, &st, 0) != *pid || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
            fail("the program spawned did not exit with 7", how, WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(attr);
        free(attr), free(pid);
        char buf[16] = {0};
        int fd = open(out, O_RDONLY);
        if (fd < 0 || read(fd, buf, sizeof buf - 1) != 8 || strcmp(buf, "spawned\n") != 0)
            fail("the spawned program's output", how, fd);
        close(fd);
    }
    spawn_while_paged_out();
    /* system and popen, with the command and the environment on the heap (setenv's). */
    setenv("NEVERMORE_EXEC_STATUS", "7", 1);
    char *cmd = heap_string("exit $NEVERMORE_EXEC_STATUS");
    page_out(cmd, strlen(cmd) + 1);
    for (char **e = environ; *e; e++)
        page_out(*e, strlen(*e) + 1);
    int st = system(cmd);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 7)
        fail("system", st, 7 << 8);
    char *pcmd = heap_string("echo $NEVERMORE_EXEC_STATUS");
    page_out(pcmd, strlen(pcmd) + 1);
    for (char **e = environ; *e; e++)
        page_out(*e, strlen(*e) + 1);
    FILE *p = popen(pcmd, "r");
    char line[16] = {0};
    if (!p || !fgets(line, sizeof line, p) || strcmp(line, "7\n") != 0)
        fail("popen", 0, 0);
    if ((st = pclose(p)) != 0)
        fail("pclose", st, 0);
    unlink(out);
    if (rmdir(dir) != 0)
        fail("rmdir", 0, 0);
}

/* A coroutine whose stack is a heap object (makecontext; Boost.Context's default allocator
 * mallocs its stacks too), paged out whenever it is switched away from: resumed, its first
 * access faults on a stack the kernel cannot write a signal frame on. */
static ucontext_t co_caller, co_self;
static volatile long co_steps;

static void co_body(void) {
    for (;;) {
        volatile char local[600];
        memset((char *)local, (int)(co_steps & 0x7f), sizeof local);
        co_steps += local[599] == (char)(co_steps & 0x7f);
        swapcontext(&co_self, &co_caller);
    }
}

static void run_coroutine(size_t size) {
    char *stack = malloc(size);
    co_steps = 0;
    if (getcontext(&co_self) != 0)
        fail("getcontext", 0, 0);
    co_self.uc_stack.ss_sp = stack;
    co_self.uc_stack.ss_size = size;
    co_self.uc_link = NULL;
    makecontext(&co_self, co_body, 0);
    for (int i = 0; i < 40; i++) {
        if (swapcontext(&co_caller, &co_self) != 0)
            fail("swapcontext", i, 0);
        page_out(stack, size);
    }
    if (co_steps != 40)
        fail("the coroutine's steps", co_steps, 40);
    free(stack);
}

/* The program is told it has no alternate stack until it sets one of its own. */
static void expect_no_altstack(const char *when) {
    stack_t old;
    if (sigaltstack(NULL, &old) != 0 || !(old.ss_flags & SS_DISABLE))
        fail(when, old.ss_flags, (long)old.ss_size);
}

static void *coroutine_thread(void *arg) {
    (void)arg;
    free(malloc(10)); /* the thread's first allocation */
    expect_no_altstack("a thread that set no alternate stack is told of one");
    run_coroutine(16384);
    return NULL;
}

static void coroutine_case(void) {
    free(malloc(10));
    expect_no_altstack("the main thread that set no alternate stack is told of one");
    run_coroutine(65536);
    run_coroutine(16384);
    pthread_t t;
    if (pthread_create(&t, NULL, coroutine_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
        fail("pthread_create", 0, 0);
    /* A stack of the program's own (not in the heap) is the kernel's; turned off, the
     * program is told it has none, and coroutines still survive. */
    static char mine[65536];
    stack_t ss = {.ss_sp = mine, .ss_flags = 0, .ss_size = sizeof mine}, old;
    if (sigaltstack(&ss, NULL) != 0 || sigaltstack(NULL, &old) != 0 || old.ss_sp != mine ||
        old.ss_size != sizeof mine || (old.ss_flags & SS_DISABLE))
        fail("sigaltstack of a static stack", (long)old.ss_size, old.ss_flags);
    run_coroutine(65536);
    ss.ss_flags = SS_DISABLE;
    if (sigaltstack(&ss, NULL) != 0)
        fail("sigaltstack(SS_DISABLE)", 0, 0);
    expect_no_altstack("a program that turned its alternate stack off is told of one");
    run_coroutine(65536);
}

/* ---- the process's attributes, file times, locks, offsets ---- */

/* A copy of N bytes at P in a heap object of its own, paged out. */
static void *heap_copy(const void *p, size_t n) {
    void *h = malloc(n);
    memcpy(h, p, n);
    page_out(h, n);
    return h;
}


/* The groups: setgroups from, getgroups into a paged-out list (a process without the
 * privilege gets EPERM, never EFAULT, and has fewer groups to read); initgroups, whose list
 * is the C library's own heap object, while another thread pages out the whole process. */
static void groups_case(void) {
    gid_t mine[256], want[3] = {0, 1, 2};
    int n = getgroups(256, mine);
    if (n < 0)
        fail("getgroups", n, 0);
    int privileged = geteuid() == 0;
    gid_t *list = malloc(sizeof mine);
    memcpy(list, want, sizeof want);
    page_out(list, sizeof want);
    int r = setgroups(3, list);
    if (privileged ? r != 0 : r != -1 || errno != EPERM)
        fail("setgroups from a paged-out list", r, privileged);
    int now = privileged ? 3 : n;
    memset(list, 0xff, sizeof mine);
    page_out(list, sizeof mine);
    if (getgroups(256, list) != now || memcmp(list, privileged ? want : mine, (size_t)now * sizeof *list) != 0)
        fail("getgroups into a paged-out list", now, 0);
    free(list);
    pthread_t t = start_pager();
    int efault = 0, other = 0;
    for (int i = 0; i < 300; i++) {
        errno = 0;
        r = initgroups("root", 0);
        efault += r != 0 && errno == EFAULT;
        other += privileged ? r != 0 && errno != EFAULT : r != -1 || errno != EPERM;
    }
    stop_pager(t);
    if (efault || other)
        fail("initgroups while the process is paged out (EFAULT, other)", efault, other);
    if (privileged && setgroups((size_t)n, mine) != 0)
        fail("setgroups", n, 0);
}

static void affinity_case(void) {
    int cpus = (int)sysconf(_SC_NPROCESSORS_CONF) + 64;
    size_t size = CPU_ALLOC_SIZE(cpus);
    cpu_set_t *mine = CPU_ALLOC(cpus), *set = CPU_ALLOC(cpus);
    if (sched_getaffinity(0, size, mine) != 0)
        fail("sched_getaffinity", 0, 0);
    memset(set, 0xff, size);
    page_out(set, size);
    if (sched_getaffinity(0, size, set) != 0 || !CPU_EQUAL_S(size, set, mine))
        fail("sched_getaffinity into a paged-out set", 0, 0);
    page_out(set, size);
    if (sched_setaffinity(0, size, set) != 0)
        fail("sched_setaffinity from a paged-out set", 0, 0);
    memset(set, 0xff, size);
    page_out(set, size);
    int e = pthread_getaffinity_np(pthread_self(), size, set);
    if (e != 0 || !CPU_EQUAL_S(size, set, mine))
        fail("pthread_getaffinity_np into a paged-out set", e, 0);
    page_out(set, size);
    e = pthread_setaffinity_np(pthread_self(), size, set);
    if (e != 0)
        fail("pthread_setaffinity_np from a paged-out set", e, 0);
    CPU_FREE(mine), CPU_FREE(set);
}

static void figures_case(void) {
    struct utsname u, *hu = malloc(sizeof u);
    page_out(hu, sizeof u);
    if (uname(&u) != 0 || uname(hu) != 0 || strcmp(u.release, hu->release) != 0)
        fail("uname into a paged-out object", 0, 0);
    struct sysinfo *si = malloc(sizeof *si);
    page_out(si, sizeof *si);
    if (sysinfo(si) != 0 || si->mem_unit == 0)
        fail("sysinfo into a paged-out object", 0, 0);
    struct rusage *ru = malloc(sizeof *ru);
    memset(ru, 0, sizeof *ru);
    page_out(ru, sizeof *ru);
    if (getrusage(RUSAGE_SELF, ru) != 0 || ru->ru_maxrss == 0)
        fail("getrusage into a paged-out object", 0, 0);
    /* The C library's times, on EFAULT, returns -14 as the time and leaves the object. */
    struct tms *tm = malloc(sizeof *tm);
    memset(tm, 0xff, sizeof *tm);
    page_out(tm, sizeof *tm);
    clock_t ticks = times(tm);
    if (ticks == (clock_t)-14 || tm->tms_utime == (clock_t)-1)
        fail("times into a paged-out object", (long)ticks, (long)tm->tms_utime);
    struct rlimit now, *rl = malloc(sizeof *rl), *old = malloc(sizeof *old);
    if (getrlimit(RLIMIT_NOFILE, &now) != 0)
        fail("getrlimit", 0, 0);
    page_out(rl, sizeof *rl);
    if (getrlimit(RLIMIT_NOFILE, rl) != 0 || rl->rlim_cur != now.rlim_cur || rl->rlim_max != now.rlim_max)
        fail("getrlimit into a paged-out object", 0, 0);
    page_out(rl, sizeof *rl);
    if (setrlimit(RLIMIT_NOFILE, rl) != 0)
        fail("setrlimit from a paged-out object", 0, 0);
    page_out(rl, sizeof *rl);
    page_out(old, sizeof *old);
    /* prlimit sets the new limit before it writes the old one. */
    if (prlimit(0, RLIMIT_NOFILE, rl, old) != 0 || old->rlim_cur != now.rlim_cur || old->rlim_max != now.rlim_max)
        fail("prlimit with the new and old limits paged out", 0, 0);
    free(hu), free(si), free(ru), free(tm), free(rl), free(old);
}

/* File times, locks and offsets: futimens, utimes, lutimes, futimes, utime with their times
 * paged out; fcntl's locks; sendfile, copy_file_range and splice, which write their offsets
 * after they moved the bytes. */
static void file_times_case(void) {
    char path[] = "/tmp/nevermore-pageout-times-XXXXXX";
    int fd = mkstemp(path);
    enum { N = 3 * PAGE };
    if (fd < 0 || write(fd, scratch, N) != N)
        fail("mkstemp", fd, 0);
    struct stat st;
    struct timespec ts[2] = {{1000000, 5}, {2000000, 7}};
    if (futimens(fd, heap_copy(ts, sizeof ts)) != 0 || fstat(fd, &st) != 0 || st.st_mtime != 2000000)
        fail("futimens with paged-out times", 0, 0);
    struct timeval tv[2] = {{3000000, 0}, {4000000, 0}};
    if (utimes(path, heap_copy(tv, sizeof tv)) != 0 || stat(path, &st) != 0 || st.st_mtime != 4000000)
        fail("utimes with paged-out times", 0, 0);
    tv[1].tv_sec = 5000000;
    if (lutimes(path, heap_copy(tv, sizeof tv)) != 0 || stat(path, &st) != 0 || st.st_mtime != 5000000)
        fail("lutimes with paged-out times", 0, 0);
    tv[1].tv_sec = 6000000;
    if (futimes(fd, heap_copy(tv, sizeof tv)) != 0 || fstat(fd, &st) != 0 || st.st_mtime != 6000000)
        fail("futimes with paged-out times", 0, 0);
    struct utimbuf ub = {7000000, 8000000};
    if (utime(path, heap_copy(&ub, sizeof ub)) != 0 || stat(path, &st) != 0 || st.st_mtime != 8000000)
        fail("utime with paged-out times", 0, 0);

    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10};
    if (fcntl(fd, F_SETLK, heap_copy(&lk, sizeof lk)) != 0)
        fail("fcntl(F_SETLK) with a paged-out lock", 0, 0);
    struct flock *q = heap_copy(&lk, sizeof lk);
    if (fcntl(fd, F_GETLK, q) != 0 || q->l_type != F_UNLCK)
        fail("fcntl(F_GETLK) into a paged-out lock", q->l_type, 0);
    lk.l_type = F_UNLCK;
    if (fcntl(fd, F_SETLKW, heap_copy(&lk, sizeof lk)) != 0)
        fail("fcntl(F_SETLKW) with a paged-out lock", 0, 0);
    lk = (struct flock){.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_len = 0};
    if (fcntl(fd, F_OFD_SETLK, heap_copy(&lk, sizeof lk)) != 0)
        fail("fcntl(F_OFD_SETLK) with a paged-out lock", 0, 0);

    int out = open("/dev/null", O_WRONLY);
    off_t *off = malloc(sizeof *off);
    *off = 100;
    page_out(off, sizeof *off);
    if (sendfile(out, fd, off, PAGE) != (ssize_t)PAGE || *off != 100 + (off_t)PAGE)
        fail("sendfile with its offset paged out", 0, *off);
    char copy_path[] = "/tmp/nevermore-pageout-copy-XXXXXX";
    int to = mkstemp(copy_path);
    loff_t *in_off = malloc(sizeof *in_off), *out_off = malloc(sizeof *out_off);
    *in_off = 0, *out_off = 0;
    page_out(in_off, sizeof *in_off);
    page_out(out_off, sizeof *out_off);
    ssize_t got = copy_file_range(fd, in_off, to, out_off, N, 0);
    if (got != N || *in_off != N || *out_off != N)
        fail("copy_file_range with its offsets paged out", got, *in_off);
    int p[2];
    if (pipe(p) != 0)
        fail("pipe", 0, 0);
    *in_off = 8;
    page_out(in_off, sizeof *in_off);
    got = splice(fd, in_off, p[1], NULL, 100, 0);
    unsigned char back[100];
    if (got != 100 || *in_off != 108 || read(p[0], back, 100) != 100 || memcmp(back, scratch + 8, 100) != 0)
        fail("splice with its offset paged out", got, *in_off);
    close(p[0]), close(p[1]), close(out), close(to), close(fd);
    unlink(path), unlink(copy_path);
    free(off), free(in_off), free(out_off);
}

static void process_case(void) {
    groups_case();
    affinity_case();
    figures_case();
    file_times_case();
}

/* ---- signals, sleeps, timers, eventfd counters, System V messages and semaphores ---- */

static volatile sig_atomic_t alarms;
static void on_alarm(int sig) { (void)sig, alarms++; }

/* A signal SIG sent to this thread, blocked. */
static void pending(int sig) {
    if (raise(sig) != 0)
        fail("raise", sig, 0);
}

static void signal_waits(void) {
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    sigprocmask(SIG_BLOCK, &usr2, NULL);
    siginfo_t *info = malloc(sizeof *info);
    struct timespec zero = {0, 0};
    /* sigtimedwait and sigwaitinfo take the signal before they write its siginfo. */
    pending(SIGUSR2);
    page_out(info, sizeof *info);
    int got = sigtimedwait(heap_copy(&usr2, sizeof usr2), info, heap_copy(&zero, sizeof zero));
    if (got != SIGUSR2 || info->si_signo != SIGUSR2)
        fail("sigtimedwait with its set, siginfo and timeout paged out", got, 0);
    pending(SIGUSR2);
    page_out(info, sizeof *info);
    got = sigwaitinfo(heap_copy(&usr2, sizeof usr2), info);
    if (got != SIGUSR2 || info->si_signo != SIGUSR2)
        fail("sigwaitinfo with its set and siginfo paged out", got, 0);
    pending(SIGUSR2);
    int *sig = malloc(sizeof *sig);
    page_out(sig, sizeof *sig);
    int e = sigwait(heap_copy(&usr2, sizeof usr2), sig);
    if (e != 0 || *sig != SIGUSR2)
        fail("sigwait with its set and number paged out", e, 0);
    pending(SIGUSR2);
    sigset_t *set = malloc(sizeof *set);
    page_out(set, sizeof *set);
    if (sigpending(set) != 0 || !sigismember(set, SIGUSR2))
        fail("sigpending into a paged-out set", 0, 0);
    int fd = signalfd(-1, heap_copy(&usr2, sizeof usr2), SFD_CLOEXEC);
    struct signalfd_siginfo ssi;
    if (fd < 0 || read(fd, &ssi, sizeof ssi) != sizeof ssi || ssi.ssi_signo != SIGUSR2)
        fail("signalfd with a paged-out mask", fd, 0);
    close(fd);
    free(info), free(sig), free(set);
}

/* An interval timer of MS milliseconds, once (SIGALRM, a handler without SA_RESTART). */
static void alarm_in(long ms) {
    struct itimerval it = {{0, 0}, {ms / 1000, (ms % 1000) * 1000}};
    if (setitimer(ITIMER_REAL, &it, NULL) != 0)
        fail("setitimer", ms, 0);
}

static void sleeps(void) {
    struct sigaction sa = {.sa_handler = on_alarm};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct timespec short_sleep = {0, 1000}, long_sleep = {2, 0};
    struct timespec *rest = malloc(sizeof *rest);
    page_out(rest, sizeof *rest);
    if (nanosleep(heap_copy(&short_sleep, sizeof short_sleep), rest) != 0)
        fail("nanosleep of a paged-out time", 0, 0);
    /* Interrupted: the time left is written (EFAULT instead of EINTR when it cannot be). */
    alarm_in(20);
    rest->tv_sec = -1;
    page_out(rest, sizeof *rest);
    int r = nanosleep(heap_copy(&long_sleep, sizeof long_sleep), rest);
    if (r != -1 || errno != EINTR || rest->tv_sec < 1 || rest->tv_sec > 2)
        fail("nanosleep interrupted, its time left paged out", r, (long)rest->tv_sec);
    alarm_in(20);
    rest->tv_sec = -1;
    page_out(rest, sizeof *rest);
    r = clock_nanosleep(CLOCK_MONOTONIC, 0, heap_copy(&long_sleep, sizeof long_sleep), rest);
    if (r != EINTR || rest->tv_sec < 1 || rest->tv_sec > 2)
        fail("clock_nanosleep interrupted, its time left paged out", r, (long)rest->tv_sec);
    free(rest);
}

/* timerfd_settime and timer_settime (as SET) of the timer at HANDLE, with their new value
 * paged out, then their old value (written after the new one is set); the gettime (GET). */
typedef int (*timer_set_fn)(void *handle, const struct itimerspec *new, struct itimerspec *old);
typedef int (*timer_get_fn)(void *handle, struct itimerspec *value);
static int timerfd_set(void *h, const struct itimerspec *n, struct itimerspec *o) { return timerfd_settime(*(int *)h, 0, n, o); }
static int timerfd_get(void *h, struct itimerspec *v) { return timerfd_gettime(*(int *)h, v); }
static int timer_set(void *h, const struct itimerspec *n, struct itimerspec *o) { return timer_settime(*(timer_t *)h, 0, n, o); }
static int timer_get(void *h, struct itimerspec *v) { return timer_gettime(*(timer_t *)h, v); }

static void timer_steps(const char *what, void *handle, timer_set_fn set, timer_get_fn get) {
    struct itimerspec in100 = {{0, 0}, {100, 0}}, in200 = {{0, 0}, {200, 0}};
    struct itimerspec *was = malloc(sizeof *was);
    if (set(handle, heap_copy(&in100, sizeof in100), NULL) != 0)
        fail(what, 1, 0);
    page_out(was, sizeof *was);
    if (set(handle, heap_copy(&in200, sizeof in200), was) != 0 || was->it_value.tv_sec < 99 || was->it_value.tv_sec > 100)
        fail(what, 2, (long)was->it_value.tv_sec);
    page_out(was, sizeof *was);
    if (get(handle, was) != 0 || was->it_value.tv_sec < 199)
        fail(what, 3, (long)was->it_value.tv_sec);
    free(was);
}

static void timers(void) {
    struct itimerval later = {{0, 0}, {100, 0}}, *old = malloc(sizeof *old);
    setitimer(ITIMER_REAL, &later, NULL);
    later.it_value.tv_sec = 200;
    page_out(old, sizeof *old);
    /* setitimer sets the new value before it writes the old one. */
    if (setitimer(ITIMER_REAL, heap_copy(&later, sizeof later), old) != 0 || old->it_value.tv_sec < 99 ||
        old->it_value.tv_sec > 100)
        fail("setitimer with its values paged out", (long)old->it_value.tv_sec, 0);
    page_out(old, sizeof *old);
    if (getitimer(ITIMER_REAL, old) != 0 || old->it_value.tv_sec < 199)
        fail("getitimer into a paged-out value", (long)old->it_value.tv_sec, 0);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);

    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (fd < 0)
        fail("timerfd_create", fd, 0);
    timer_steps("timerfd_settime, timerfd_gettime with paged-out values (step, seconds)", &fd, timerfd_set, timerfd_get);
    close(fd);
    timer_t t;
    struct sigevent none = {.sigev_notify = SIGEV_NONE};
    if (timer_create(CLOCK_MONOTONIC, &none, &t) != 0)
        fail("timer_create", 0, 0);
    timer_steps("timer_settime, timer_gettime with paged-out values (step, seconds)", &t, timer_set, timer_get);
    timer_delete(t);
    free(old);

    /* eventfd_read: the kernel resets the counter before it writes it out. */
    int efd = eventfd(5, EFD_NONBLOCK | EFD_CLOEXEC);
    eventfd_t *value = malloc(sizeof *value);
    page_out(value, sizeof *value);
    if (efd < 0 || eventfd_read(efd, value) != 0 || *value != 5)
        fail("eventfd_read into a paged-out value (the count lost)", efd, 0);
    close(efd);
    free(value);
}

struct message {
    long type;
    char text[200];
};

static void system_v(void) {
    int q = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    if (q < 0)
        fail("msgget", q, 0);
    struct message m = {7, "a message through paged-out objects"};
    if (msgsnd(q, heap_copy(&m, sizeof m), sizeof m.text, 0) != 0)
        fail("msgsnd of a paged-out message", 0, 0);
    struct message *in = malloc(sizeof *in);
    page_out(in, sizeof *in);
    /* msgrcv takes the message off the queue before it copies it out. */
    ssize_t got = msgrcv(q, in, sizeof in->text, 0, IPC_NOWAIT);
    if (got != sizeof m.text || in->type != 7 || strcmp(in->text, m.text) != 0)
        fail("msgrcv into a paged-out buffer (the message lost)", got, 0);
    /* The same into a buffer longer than the library's local: a 64 KiB record. */
    if (msgsnd(q, heap_copy(&m, sizeof m), sizeof m.text, 0) != 0)
        fail("msgsnd of a paged-out message", 0, 0);
    size_t big = 65536;
    struct message *wide = malloc(sizeof(long) + big);
    page_out(wide, sizeof(long) + big);
    got = msgrcv(q, wide, big, 0, IPC_NOWAIT);
    if (got != sizeof m.text || wide->type != 7 || strcmp(wide->text, m.text) != 0)
        fail("msgrcv into a paged-out 64 KiB buffer (the message lost)", got, 0);
    free(wide);
    struct msqid_ds *ds = malloc(sizeof *ds);
    page_out(ds, sizeof *ds);
    if (msgctl(q, IPC_STAT, ds) != 0 || ds->msg_qnum != 0)
        fail("msgctl(IPC_STAT) into a paged-out record", 0, 0);
    msgctl(q, IPC_RMID, NULL);
    int shm = shmget(IPC_PRIVATE, PAGE, IPC_CREAT | 0600);
    struct shmid_ds *sds = malloc(sizeof *sds);
    page_out(sds, sizeof *sds);
    if (shm < 0 || shmctl(shm, IPC_STAT, sds) != 0 || sds->shm_segsz != PAGE)
        fail("shmctl(IPC_STAT) into a paged-out record", shm, 0);
    shmctl(shm, IPC_RMID, NULL);
    int sem = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
    struct sembuf up = {0, 2, 0}, down = {0, -1, 0};
    struct timespec second = {1, 0};
    if (sem < 0 || semop(sem, heap_copy(&up, sizeof up), 1) != 0)
        fail("semop of paged-out operations", sem, 0);
    if (semtimedop(sem, heap_copy(&down, sizeof down), 1, heap_copy(&second, sizeof second)) != 0 ||
        semctl(sem, 0, GETVAL) != 1)
        fail("semtimedop of paged-out operations", 0, 0);
    semctl(sem, 0, IPC_RMID);
    /* semctl's record and arrays of values. */
    int set = semget(IPC_PRIVATE, 3, IPC_CREAT | 0600);
    unsigned short values[3] = {4, 5, 6}, *got_values = malloc(sizeof values);
    struct semid_ds *semds = malloc(sizeof *semds);
    if (set < 0 || semctl(set, 0, SETALL, heap_copy(values, sizeof values)) != 0 || semctl(set, 2, GETVAL) != 6)
        fail("semctl(SETALL) of paged-out values", set, 0);
    page_out(got_values, sizeof values);
    if (semctl(set, 0, GETALL, got_values) != 0 || memcmp(got_values, values, sizeof values) != 0)
        fail("semctl(GETALL) into paged-out values", 0, 0);
    page_out(semds, sizeof *semds);
    if (semctl(set, 0, IPC_STAT, semds) != 0 || semds->sem_nsems != 3)
        fail("semctl(IPC_STAT) into a paged-out record", 0, 0);
    semctl(set, 0, IPC_RMID);
    free(in), free(ds), free(sds), free(got_values), free(semds);
}

/* POSIX message queues: mq_receive takes the message off the queue before it copies it and
 * its priority out. */
static void posix_queues(void) {
    char name[64];
    snprintf(name, sizeof name, "/nevermore-pageout-%d", (int)getpid());
    struct mq_attr attr = {.mq_maxmsg = 4, .mq_msgsize = 256};
    /* Non-blocking, so that a receive after a lost send fails instead of waiting. */
    mqd_t q = mq_open(name, O_CREAT | O_RDWR | O_EXCL | O_NONBLOCK, 0600, &attr);
    if (q == (mqd_t)-1)
        fail("mq_open", 0, 0);
    mq_unlink(name);
    const char text[] = "a message on a POSIX queue";
    struct timespec later;
    clock_gettime(CLOCK_REALTIME, &later);
    later.tv_sec += 5;
    if (mq_send(q, heap_copy(text, sizeof text), sizeof text, 3) != 0 ||
        mq_timedsend(q, heap_copy(text, sizeof text), sizeof text, 2, heap_copy(&later, sizeof later)) != 0)
        fail("mq_send, mq_timedsend of paged-out messages", 0, 0);
    struct mq_attr *now = malloc(sizeof *now);
    page_out(now, sizeof *now);
    if (mq_getattr(q, now) != 0 || now->mq_curmsgs != 2)
        fail("mq_getattr into a paged-out record", 0, 0);
    char *buf = malloc(256);
    unsigned *priority = malloc(sizeof *priority);
    page_out(buf, 256);
    page_out(priority, sizeof *priority);
    ssize_t got = mq_receive(q, buf, 256, priority);
    if (got != sizeof text || strcmp(buf, text) != 0 || *priority != 3)
        fail("mq_receive into paged-out objects (the message lost)", got, 0);
    page_out(buf, 256);
    page_out(priority, sizeof *priority);
    got = mq_timedreceive(q, buf, 256, priority, heap_copy(&later, sizeof later));
    if (got != sizeof text || strcmp(buf, text) != 0 || *priority != 2)
        fail("mq_timedreceive into paged-out objects (the message lost)", got, 0);
    /* A receive buffer longer than the library's local. */
    if (mq_send(q, heap_copy(text, sizeof text), sizeof text, 4) != 0)
        fail("mq_send of a paged-out message", 0, 0);
    size_t big = 20000;
    char *wide = malloc(big);
    page_out(wide, big);
    page_out(priority, sizeof *priority);
    got = mq_receive(q, wide, big, priority);
    if (got != sizeof text || strcmp(wide, text) != 0 || *priority != 4)
        fail("mq_receive into a paged-out 20000-byte buffer (the message lost)", got, 0);
    free(wide);
    struct mq_attr blocking = {.mq_flags = 0};
    page_out(now, sizeof *now);
    if (mq_setattr(q, heap_copy(&blocking, sizeof blocking), now) != 0 || now->mq_flags != O_NONBLOCK)
        fail("mq_setattr with its attributes paged out", 0, 0);
    mq_close(q);
    free(now), free(buf), free(priority);
}

static sem_t named_go;
static void *named_thread(void *arg) {
    (void)arg;
    sem_wait(&named_go);
    return NULL;
}

static void names_and_scheduling(void) {
    char *name = heap_copy("nm-own", 7), *buf = malloc(16);
    if (prctl(PR_SET_NAME, name, 0, 0, 0) != 0)
        fail("prctl(PR_SET_NAME) of a paged-out name", 0, 0);
    page_out(buf, 16);
    if (prctl(PR_GET_NAME, buf, 0, 0, 0) != 0 || strcmp(buf, "nm-own") != 0)
        fail("prctl(PR_GET_NAME) into a paged-out buffer", 0, 0);
    page_out(buf, 16);
    int e = pthread_getname_np(pthread_self(), buf, 16);
    if (e != 0 || strcmp(buf, "nm-own") != 0)
        fail("pthread_getname_np into a paged-out buffer", e, 0);
    pthread_t t;
    sem_init(&named_go, 0, 0);
    if (pthread_create(&t, NULL, named_thread, NULL) != 0)
        fail("pthread_create", 0, 0);
    /* Another thread's name goes through /proc with the C library's own write and read. */
    e = pthread_setname_np(t, heap_copy("nm-other", 9));
    page_out(buf, 16);
    int e2 = pthread_getname_np(t, buf, 16);
    if (e != 0 || e2 != 0 || strcmp(buf, "nm-other") != 0)
        fail("pthread_setname_np and pthread_getname_np of another thread, paged out", e, e2);
    sem_post(&named_go);
    pthread_join(t, NULL);

    struct sched_param *param = malloc(sizeof *param), zero = {0};
    page_out(param, sizeof *param);
    if (sched_getparam(0, param) != 0 || param->sched_priority != 0)
        fail("sched_getparam into a paged-out record", 0, 0);
    if (sched_setparam(0, heap_copy(&zero, sizeof zero)) != 0)
        fail("sched_setparam of a paged-out record", 0, 0);
    if (sched_setscheduler(0, SCHED_OTHER, heap_copy(&zero, sizeof zero)) != 0)
        fail("sched_setscheduler of a paged-out record", 0, 0);
    struct timespec *slice = malloc(sizeof *slice);
    page_out(slice, sizeof *slice);
    if (sched_rr_get_interval(0, slice) != 0)
        fail("sched_rr_get_interval into a paged-out time", 0, 0);
    free(param), free(slice), free(buf);
}

static void waits_case(void) {
    signal_waits();
    sleeps();
    timers();
    system_v();
    posix_queues();
    names_and_scheduling();
}

/* Waits that a signal handler interrupts and the kernel makes again (SA_RESTART): threads wait
 * on a semaphore, a condition variable and a contended mutex in one heap object; each time,
 * the object's pages are paged out, then a waiter gets SIGUSR1, whose handler returns. The
 * kernel reads the futex word when it makes the wait again; glibc aborted the process when
 * that failed ("The futex facility returned an unexpected error code"). The handler is set
 * four ways: sigaction with SA_RESTART, signal (which restarts), an SA_SIGINFO one, and that
 * one again with syscall(SYS_rt_sigaction) and a restorer of the program's own (as programs
 * that skip the C library's sigaction do); each is what sigaction reads back. The pages are
 * paged out again only once every waiter is back in its wait (the kernel read its word): a
 * page taken between the library's mapping it and the kernel's read is lost (docs/usage.md),
 * and on a busy machine the last waiter signalled could still be on its way back. */
struct restarted {
    sem_t sem;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int go;
    pthread_mutex_t held;
};
static struct restarted *rs;
static volatile sig_atomic_t restarted_handled;
static volatile pid_t restarted_tids[3];

/* Waits (up to 10 s) until the thread whose id `*tid` holds (once set) is blocked in a futex
 * call. */
static void wait_blocked_in_futex(volatile pid_t *tid, int w) {
    char path[64], line[64];
    for (int k = 0; k < 100000; k++) {
        if (*tid == 0) {
            usleep(100);
            continue;
        }
        snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)*tid);
        int fd = open(path, O_RDONLY);
        ssize_t n = fd < 0 ? -1 : read(fd, line, sizeof line - 1);
        if (fd >= 0)
            close(fd);
        if (n > 0) {
            line[n] = 0;
            if (atol(line) == SYS_futex && strncmp(line, "running", 7) != 0)
                return;
        }
        usleep(100);
    }
    fail("waiter back in its futex wait", w, *tid);
}

static void restarted_wait_blocked(int w) { wait_blocked_in_futex(&restarted_tids[w], w); }

static void restarted_handler(int sig) {
    (void)sig;
    restarted_handled++;
}

static void restarted_info_handler(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    if (si->si_signo == sig)
        restarted_handled++;
}

/* Sends SIGUSR1 to `t` and waits (up to 1 s) until its handler ran: handled before the next
 * one (a second SIGUSR1 pending would be merged). */
static void signal_and_wait_handled(pthread_t t) {
    int want = restarted_handled + 1;
    pthread_kill(t, SIGUSR1);
    for (int k = 0; k < 10000 && restarted_handled < want; k++)
        usleep(100);
    if (restarted_handled != want)
        fail("signal handled", restarted_handled, want);
}

static void *restarted_sem(void *arg) {
    (void)arg;
    restarted_tids[0] = (pid_t)syscall(SYS_gettid);
    while (sem_wait(&rs->sem) != 0)
        ;
    return NULL;
}

static void *restarted_cond(void *arg) {
    (void)arg;
    restarted_tids[1] = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&rs->lock);
    while (!rs->go)
        pthread_cond_wait(&rs->cond, &rs->lock);
    pthread_mutex_unlock(&rs->lock);
    return NULL;
}

static void *restarted_mutex(void *arg) {
    (void)arg;
    restarted_tids[2] = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&rs->held);
    pthread_mutex_unlock(&rs->held);
    return NULL;
}

static void restarted_case(void) {
    enum { ROUNDS = 20 };
    rs = calloc(1, sizeof *rs);
    sem_init(&rs->sem, 0, 0);
    pthread_mutex_init(&rs->lock, NULL);
    pthread_cond_init(&rs->cond, NULL);
    pthread_mutex_init(&rs->held, NULL);
    pthread_mutex_lock(&rs->held);
    pthread_t t[3];
    void *(*f[3])(void *) = {restarted_sem, restarted_cond, restarted_mutex};
    for (int j = 0; j < 3; j++)
        if (pthread_create(&t[j], NULL, f[j], NULL) != 0)
            fail("pthread_create", j, 0);
    usleep(20000);
    for (int way = 0; way < 4; way++) {
        struct sigaction sa, back;
        memset(&sa, 0, sizeof sa);
        if (way == 3) {
            struct kernel_action kback;
            memset(&kback, 0, sizeof kback);
            if (raw_action(SIGUSR1, (void *)restarted_info_handler, SA_RESTART | SA_SIGINFO, NULL) != 0 ||
                syscall(SYS_rt_sigaction, SIGUSR1, NULL, &kback, 8) != 0 ||
                kback.handler != (void *)restarted_info_handler ||
                !(kback.flags & SA_SIGINFO))
                fail("rt_sigaction read back another handler", way, (long)kback.flags);
        } else if (way == 0) {
            sa.sa_handler = restarted_handler;
            sa.sa_flags = SA_RESTART;
            sigaction(SIGUSR1, &sa, NULL);
        } else if (way == 1) {
            signal(SIGUSR1, restarted_handler);
        } else {
            sa.sa_sigaction = restarted_info_handler;
            sa.sa_flags = SA_RESTART | SA_SIGINFO;
            sigaction(SIGUSR1, &sa, NULL);
        }
        if (sigaction(SIGUSR1, NULL, &back) != 0 ||
            (way < 2 ? back.sa_handler != restarted_handler || (back.sa_flags & SA_SIGINFO)
                     : back.sa_sigaction != restarted_info_handler || !(back.sa_flags & SA_SIGINFO)) ||
            !(back.sa_flags & SA_RESTART))
            fail("sigaction read back another handler", way, back.sa_flags);
        for (int i = 0; i < ROUNDS; i++)
            for (int j = 0; j < 3; j++) {
                for (int w = 0; w < 3; w++)
                    restarted_wait_blocked(w);
                page_out(rs, sizeof *rs);
                signal_and_wait_handled(t[j]);
            }
    }
    sem_post(&rs->sem);
    pthread_mutex_lock(&rs->lock);
    rs->go = 1;
    pthread_cond_signal(&rs->cond);
    pthread_mutex_unlock(&rs->lock);
    pthread_mutex_unlock(&rs->held);
    for (int j = 0; j < 3; j++)
        pthread_join(t[j], NULL);
    signal(SIGUSR1, SIG_DFL);
    free(rs);
}

/* `cancelled`: a thread waiting in sem_wait and one in pthread_cond_wait on a heap object,
 * each interrupted by a signal handler after the object was paged out (the library makes
 * such a wait again itself), then cancelled in that wait: each must end cancelled with its
 * cleanup handler run (built with -fexceptions, cleanup handlers run only when the unwinder
 * finds its way through every frame of the wait), and the condition variable's mutex free. */
struct cancelled {
    sem_t sem;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int go;
};
static struct cancelled *cs;
static volatile int cancel_cleaned;
static volatile pid_t cancel_tids[2];

static void cancel_count(void *arg) {
    (void)arg;
    __atomic_add_fetch(&cancel_cleaned, 1, __ATOMIC_SEQ_CST);
}

static void cancel_unlock(void *arg) {
    pthread_mutex_unlock(arg);
    __atomic_add_fetch(&cancel_cleaned, 1, __ATOMIC_SEQ_CST);
}

static void *cancel_sem(void *arg) {
    (void)arg;
    cancel_tids[0] = (pid_t)syscall(SYS_gettid);
    pthread_cleanup_push(cancel_count, NULL);
    while (sem_wait(&cs->sem) != 0)
        ;
    pthread_cleanup_pop(0);
    return NULL;
}

static void *cancel_cond(void *arg) {
    (void)arg;
    cancel_tids[1] = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&cs->lock);
    pthread_cleanup_push(cancel_unlock, &cs->lock);
    while (!cs->go)
        pthread_cond_wait(&cs->cond, &cs->lock);
    pthread_cleanup_pop(1);
    return NULL;
}

static void cancelled_case(void) {
    cs = calloc(1, sizeof *cs);
    sem_init(&cs->sem, 0, 0);
    pthread_mutex_init(&cs->lock, NULL);
    pthread_cond_init(&cs->cond, NULL);
    signal(SIGUSR1, restarted_handler);
    pthread_t t[2];
    void *(*f[2])(void *) = {cancel_sem, cancel_cond};
    for (int j = 0; j < 2; j++)
        if (pthread_create(&t[j], NULL, f[j], NULL) != 0)
            fail("pthread_create", j, 0);
    for (int j = 0; j < 2; j++) {
        wait_blocked_in_futex(&cancel_tids[j], j);
        page_out(cs, sizeof *cs);
        signal_and_wait_handled(t[j]);
    }
    for (int j = 0; j < 2; j++)
        wait_blocked_in_futex(&cancel_tids[j], j);
    for (int j = 0; j < 2; j++)
        if (pthread_cancel(t[j]) != 0)
            fail("pthread_cancel", j, 0);
    for (int j = 0; j < 2; j++) {
        void *r = NULL;
        if (pthread_join(t[j], &r) != 0 || r != PTHREAD_CANCELED)
            fail("the waiter ended cancelled", j, (long)r);
    }
    if (cancel_cleaned != 2)
        fail("cleanup handlers run", cancel_cleaned, 2);
    if (pthread_mutex_trylock(&cs->lock) != 0)
        fail("the condition variable's mutex free", 0, 0);
    pthread_mutex_unlock(&cs->lock);
    signal(SIGUSR1, SIG_DFL);
    free(cs);
}

/* Microseconds heap_pager sleeps between its passes (0: none). */
static unsigned heap_pager_pause;

/* Pages out the heap until stop_pager: only the shared mappings of memfds, read with plain
 * system calls, many passes a second. */
static void *heap_pager(void *arg) {
    (void)arg;
    static char maps[1 << 20];
    while (!pager_stop) {
        int fd = open("/proc/self/maps", O_RDONLY);
        if (fd < 0)
            fail("open /proc/self/maps", errno, 0);
        size_t n = 0;
        ssize_t r;
        while (n < sizeof maps - 1 && (r = read(fd, maps + n, sizeof maps - 1 - n)) > 0)
            n += (size_t)r;
        close(fd);
        maps[n] = 0;
        for (char *line = maps; *line;) {
            char *eol = strchr(line, '\n');
            if (!eol)
                break;
            *eol = 0;
            unsigned long a, e;
            char perms[5];
            if (sscanf(line, "%lx-%lx %4s", &a, &e, perms) == 3 && perms[3] == 's' && strstr(line, "/memfd:"))
                madvise((void *)a, e - a, MADV_PAGEOUT);
            line = eol + 1;
        }
        if (heap_pager_pause)
            usleep(heap_pager_pause);
    }
    return NULL;
}

static pthread_t start_heap_pager(unsigned pause) {
    heap_pager_pause = pause;
    return start_paging(heap_pager);
}

/* A directory of 300 entries (5 pages of the stream's buffer) listed 1 000 times with readdir
 * and 1 000 times with getdents64 while a thread pages the heap out without pause: a call
 * that failed with EFAULT could leave the directory's position past entries the kernel took
 * before a last write failed, and a listing lost them (with no error); refills made again
 * while the pages were taken again each time failed with EFAULT. */
static void listing_case(void) {
    char dir[] = "/tmp/nevermore-pageout-XXXXXX";
    if (!mkdtemp(dir))
        fail("mkdtemp", 0, 0);
    enum { FILES = 300 };
    char name[PATH_MAX];
    for (int i = 0; i < FILES; i++) {
        snprintf(name, sizeof name, "%s/an-entry-with-a-longer-name-%d", dir, i);
        int fd = open(name, O_CREAT | O_WRONLY, 0600);
        if (fd < 0)
            fail("open", i, 0);
        close(fd);
    }
    pthread_t t = start_heap_pager(0);
    for (int round = 0; round < 1000; round++) {
        DIR *d = opendir(dir);
        if (!d)
            fail("opendir", round, 0);
        int seen = entries_starting(d, 'a');
        if (seen != FILES)
            fail("a listing under a steady pageout", seen, FILES);
        closedir(d);
    }
    /* The same with getdents64 into a heap buffer of the program's. */
    enum { BUF = 32768 };
    char *buf = malloc(BUF);
    for (int round = 0; round < 1000; round++) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
            fail("open of the directory", round, 0);
        int seen = 0;
        ssize_t n;
        while ((n = getdents64(fd, buf, BUF)) > 0)
            for (ssize_t at = 0; at < n; at += ((struct dirent64 *)(buf + at))->d_reclen)
                seen += ((struct dirent64 *)(buf + at))->d_name[0] == 'a';
        if (n != 0 || seen != FILES)
            fail("a listing with getdents64 under a steady pageout", seen, n);
        close(fd);
    }
    free(buf);
    stop_pager(t);
    /* Pages locked for a refill were unlocked again (a locked page of a freed stream could not
     * have been revoked). */
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long locked = -1;
    while (status && fgets(line, sizeof line, status))
        if (sscanf(line, "VmLck: %ld", &locked) == 1)
            break;
    if (status)
        fclose(status);
    if (locked != 0)
        fail("locked memory after the listings (KiB)", locked, 0);
    for (int i = 0; i < FILES; i++) {
        snprintf(name, sizeof name, "%s/an-entry-with-a-longer-name-%d", dir, i);
        unlink(name);
    }
    if (rmdir(dir) != 0)
        fail("rmdir", 0, 0);
}

/* The allocator's own writes to the pages it hands out, under a steady pageout: for 5 seconds,
 * 30 000 objects of random sizes up to 1 KiB are allocated, filled, checked and freed, again
 * and again, so that slabs come and go (detect mode fills the free slots of a page when it
 * first issues it, and a page paged out during the fill was reported as a use-after-free). */
static void churn_case(void) {
    enum { N = 30000 };
    static unsigned char *objs[N];
    static size_t lens[N];
    pthread_t t = start_heap_pager(0);
    unsigned seed = 7;
    long rounds = 0;
    time_t end = time(NULL) + 5;
    while (time(NULL) < end) {
        for (int i = 0; i < N; i++) {
            lens[i] = (size_t)rand_r(&seed) % 1025;
            objs[i] = malloc(lens[i]);
            if (!objs[i])
                fail("malloc", (long)lens[i], 0);
            memset(objs[i], (unsigned char)(i + rounds), lens[i]);
        }
        for (int i = 0; i < N; i++) {
            for (size_t k = 0; k < lens[i]; k++)
                if (objs[i][k] != (unsigned char)(i + rounds))
                    fail("an object's bytes", (long)k, (long)lens[i]);
            free(objs[i]);
        }
        rounds++;
    }
    stop_pager(t);
    if (rounds < 1)
        fail("rounds", rounds, 1);
}

static void pipes(void) {
    /* A small object, page objects, a large object. */
    static const size_t sizes[] = {100, 5000, 20000, 60000, 200000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        pipe_case(sizes[i]);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "freed") == 0) {
        freed_case();
        return 0;
    }
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {{"pipe", pipes},     {"file", file_case},   {"vector", vector_case},
                 {"socket", socket_case}, {"epoll", epoll_case}, {"path", path_case},
                 {"exec", exec_case},     {"stdio", stdio_case}, {"userbuf", userbuf_case}, {"dir", dir_case},
                 {"walk", walk_case},     {"spawn", spawn_case}, {"signals", signals_case},
                 {"results", results_case}, {"process", process_case}, {"waits", waits_case},
                 {"coroutine", coroutine_case}, {"restarted", restarted_case},
                 {"cancelled", cancelled_case}, {"churn", churn_case}, {"listing", listing_case},
                 {"bad", bad_case}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
            continue;
        current = cases[i].name;
        cases[i].run();
        printf("%s OK\n", current);
        fflush(stdout); /* a later abort keeps what passed */
    }
    return 0;
}
