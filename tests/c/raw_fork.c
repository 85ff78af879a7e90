/* Processes made with the C library's syscall() instead of fork(): syscall(SYS_fork),
 * syscall(SYS_clone, SIGCHLD, 0) (vsftpd makes its per-connection processes so, with
 * namespace flags) and syscall(SYS_clone3) without CLONE_VM; and with _Fork() (glibc 2.34,
 * POSIX 2024: a fork that runs no fork handlers and may be called in a signal handler;
 * reached through a weak reference, so that the program also builds against an older C
 * library, where "_Fork" exits 3). Parent and child must each have
 * a heap of their own: objects allocated before, written by both afterwards, keep each
 * process's own contents, and objects allocated afterwards do too.
 * usage: raw_fork fork|clone|clone3|_Fork   prints RAW FORK OK (exit 0) or what went wrong */
#define _GNU_SOURCE
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 2000

extern pid_t _Fork(void) __attribute__((weak));

static unsigned char *before[N], *after[N];
static size_t len[N];

static int filled(unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

/* Writes `v` into every object made before the fork, and makes and fills new ones; then
 * checks both sets a few times while the other process does the same. */
static int work(unsigned char v) {
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < N; i++) {
            memset(before[i], v, len[i]);
            free(after[i]);
            after[i] = malloc(len[i]);
            if (!after[i]) return 0;
            memset(after[i], v, len[i]);
        }
        usleep(1000);
        for (int i = 0; i < N; i++)
            if (!filled(before[i], len[i], v) || !filled(after[i], len[i], v)) return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    for (int i = 0; i < N; i++) {
        len[i] = 16 + (size_t)(i * 37) % 3000 + (i % 100 == 0 ? 200000 : 0);
        before[i] = malloc(len[i]);
        memset(before[i], 0x11, len[i]);
    }
    long pid;
    if (!strcmp(argv[1], "fork")) {
        pid = syscall(SYS_fork);
    } else if (!strcmp(argv[1], "clone")) {
        pid = syscall(SYS_clone, (unsigned long)SIGCHLD, 0UL, 0UL, 0UL, 0UL);
    } else if (!strcmp(argv[1], "_Fork")) {
        if (!_Fork) {
            printf("NO _Fork IN THIS C LIBRARY\n");
            return 3;
        }
        pid = _Fork();
    } else {
        struct clone_args ca;
        memset(&ca, 0, sizeof ca);
        ca.exit_signal = SIGCHLD;
        pid = syscall(SYS_clone3, &ca, sizeof ca);
    }
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) _exit(work(0xCC) ? 0 : 1);
    int ok = work(0x77);
    int st = 0;
    waitpid((pid_t)pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("CHILD FAILED (status %#x)\n", st);
        return 1;
    }
    if (!ok) {
        printf("PARENT SAW OTHER WRITES\n");
        return 1;
    }
    for (int i = 0; i < N; i++) free(before[i]), free(after[i]);
    printf("RAW FORK OK\n");
    return 0;
}
