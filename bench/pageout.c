/* pageout: a steady pageout of other processes, as a host under memory pressure (or a DAMON
 * pageout scheme) gives them: every MS milliseconds, MADV_PAGEOUT over every writable mapping
 * of the process, through process_madvise (root, or CAP_SYS_NICE and ptrace rights over it).
 * usage: pageout PID [MS]        that process (MS 100 by default); ends when it does, printing
 *                                how many rounds it made
 *        pageout -e MARK [MS]    every process whose environment holds the string MARK (e.g.
 *                                NVPO=1), found again each round; runs until killed
 * e.g. a slow pipe into GNU sed, its stdio buffer paged out while it waits in read(2):
 *   (for i in $(seq 150); do echo line $i; sleep 0.01; done) |
 *     LD_PRELOAD=target/release/libnevermore.so sed s/line/LINE/ > /tmp/out &
 *   sleep 0.1; /tmp/pageout $(pgrep -n -x sed) 5; wc -l < /tmp/out
 * and whole programs with their children: bench/pageout-programs.sh */
#define _GNU_SOURCE
#include <dirent.h>
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

/* One round over PID: 0, or -1 when the process is gone. */
static int page_out(int pid) {
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0)
        return -1;
    char maps[64];
    snprintf(maps, sizeof maps, "/proc/%d/maps", pid);
    FILE *m = fopen(maps, "r");
    if (!m) {
        close(pidfd);
        return -1;
    }
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
    close(pidfd);
    return 0;
}

/* Whether the environment of PID holds MARK. */
static int marked(int pid, const char *mark) {
    char path[64];
    static char env[1 << 16];
    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(env, 1, sizeof env - 1, f);
    fclose(f);
    env[n] = 0;
    for (size_t i = 0; i < n; i += strlen(env + i) + 1)
        if (strcmp(env + i, mark) == 0)
            return 1;
    return 0;
}

static void pause_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "-e") == 0 && argc < 3)) {
        fprintf(stderr, "usage: pageout PID [MS] | pageout -e MARK [MS]\n");
        return 2;
    }
    if (strcmp(argv[1], "-e") == 0) {
        long ms = argc > 3 ? atol(argv[3]) : 100;
        for (;;) {
            DIR *d = opendir("/proc");
            if (!d)
                return 1;
            struct dirent *e;
            while ((e = readdir(d))) {
                int pid = atoi(e->d_name);
                if (pid > 0 && pid != getpid() && marked(pid, argv[2]))
                    page_out(pid);
            }
            closedir(d);
            pause_ms(ms);
        }
    }
    int pid = atoi(argv[1]);
    long ms = argc > 2 ? atol(argv[2]) : 100;
    long rounds = 0;
    while (page_out(pid) == 0) {
        rounds++;
        pause_ms(ms);
    }
    fprintf(stderr, "pageout: %ld rounds\n", rounds);
    return 0;
}
