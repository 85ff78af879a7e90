/* pageout: a steady pageout of another process, as a host under memory pressure (or a DAMON
 * pageout scheme) gives it: every MS milliseconds, MADV_PAGEOUT over every writable mapping
 * of PID, through process_madvise (root, or CAP_SYS_NICE and ptrace rights over PID). Ends
 * when PID does, printing how many rounds it made.
 * usage: pageout PID [MS]   (MS 100 by default)
 * e.g. a slow pipe into GNU sed, its stdio buffer paged out while it waits in read(2):
 *   (for i in $(seq 150); do echo line $i; sleep 0.01; done) |
 *     LD_PRELOAD=target/release/libnevermore.so sed s/line/LINE/ > /tmp/out &
 *   sleep 0.1; /tmp/pageout $(pgrep -n -x sed) 5; wc -l < /tmp/out */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: pageout PID [MS]\n");
        return 2;
    }
    int pid = atoi(argv[1]);
    long ms = argc > 2 ? atol(argv[2]) : 100;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        perror("pidfd_open");
        return 1;
    }
    char maps[64];
    snprintf(maps, sizeof maps, "/proc/%d/maps", pid);
    long rounds = 0;
    for (;;) {
        FILE *m = fopen(maps, "r");
        if (!m)
            break;
        char line[512];
        struct iovec iov[8];
        int n = 0;
        while (fgets(line, sizeof line, m)) {
            unsigned long a, b;
            char perms[8];
            if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) != 3 || perms[1] != 'w' || strstr(line, "[vvar]"))
                continue;
            iov[n++] = (struct iovec){(void *)a, b - a};
            if (n == 8) {
                syscall(SYS_process_madvise, pidfd, iov, n, MADV_PAGEOUT, 0);
                n = 0;
            }
        }
        if (n)
            syscall(SYS_process_madvise, pidfd, iov, n, MADV_PAGEOUT, 0);
        fclose(m);
        rounds++;
        struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&t, NULL);
    }
    fprintf(stderr, "pageout: %ld rounds\n", rounds);
    return 0;
}
