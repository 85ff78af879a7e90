/* forkcost: the cost of fork with a heap of MIB MiB (objects of 64 KiB, filled): the time
 * fork takes in the parent, the time until the child ran and exited, and the parent's
 * resident memory (VmRSS) before and after; best of ROUNDS rounds. With "half", every other
 * object is freed before the forks (a heap with as much free memory as live). With "small",
 * the heap is of small objects instead (16–215 bytes, MIB MiB of them allocated, every other
 * one freed): the child then has many live objects to map again.
 * usage: forkcost [MIB [ROUNDS [half|small]]]
 * prints: RESULT fork_ms=<float> child_ms=<float> rss_before_kib=<n> rss_after_kib=<n> */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tests/c/pool_probe.h"

static double ms_since(const struct timespec *a) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 256;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    int small = argc > 3 && !strcmp(argv[3], "small");
    size_t n = small ? mib * (1 << 20) / 115 : mib * 16;
    char **obj = malloc(n * sizeof *obj);
    for (size_t i = 0; i < n; i++) {
        size_t size = small ? 16 + i * 37 % 200 : 65536;
        obj[i] = malloc(size);
        memset(obj[i], (int)(i & 0x7F) + 1, size);
    }
    if (argc > 3 && (small || !strcmp(argv[3], "half")))
        for (size_t i = 0; i + 1 < n; i += 2) {
            free(obj[i]);
            obj[i] = NULL;
        }
    long before = rss_kib();
    double best_fork = 1e99, best_child = 1e99;
    for (int r = 0; r < rounds; r++) {
        struct timespec a;
        clock_gettime(CLOCK_MONOTONIC, &a);
        pid_t pid = fork();
        if (pid == 0) {
            /* The child sees the parent's heap. */
            _exit(obj[n - 1][10] == (char)(((n - 1) & 0x7F) + 1) ? 0 : 3);
        }
        double f = ms_since(&a);
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "forkcost: the child failed\n");
            return 1;
        }
        double c = ms_since(&a);
        if (f < best_fork) best_fork = f;
        if (c < best_child) best_child = c;
    }
    printf("RESULT fork_ms=%.2f child_ms=%.2f rss_before_kib=%ld rss_after_kib=%ld\n", best_fork, best_child,
           before, rss_kib());
    return 0;
}
