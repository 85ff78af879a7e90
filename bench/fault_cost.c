/* fault_cost: what mapping alias pages costs without userfaultfd, for comparison with
 * uffd_cost.c (UFFDIO_CONTINUE). A memfd of 8192 pages is mapped again and again (one plain
 * shared mapping per repetition, not registered with userfaultfd); runs of RUN pages every
 * STRIDE pages are mapped by
 *   MODE 0: a write to each page (one write fault per page),
 *   MODE 1: MADV_POPULATE_WRITE over the run,
 *   MODE 2: MADV_POPULATE_READ over the run,
 *   MODE 3: a read of each page (read faults map up to 16 neighbouring pages at once, also
 *           pages outside the run: cheap, but it maps pages nobody asked for),
 * each page then written once, and zapped with MADV_DONTNEED through process_madvise calls of
 * 256 ranges.
 * usage: fault_cost MODE RUN [STRIDE]   e.g. for m in 0 1 2 3; do ./fault_cost $m 4 8; done */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif
#define NP 8192

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    int mode = atoi(argv[1]), run = atoi(argv[2]), stride = argc > 3 ? atoi(argv[3]) : run;
    if (run < 1 || stride < run)
        return 2;
    int fd = memfd_create("pool", 0);
    if (fd < 0 || ftruncate(fd, (long)NP * 4096))
        return 1;
    char *canon = mmap(0, (long)NP * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    memset(canon, 1, (long)NP * 4096);
    int pidfd = syscall(SYS_pidfd_open, getpid(), 0);
    double tmap = 0, tzap = 0;
    long runs = 0, pages = 0;
    for (int rep = 0; rep < 40; rep++) {
        char *m = mmap(0, (long)NP * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        double t0 = now();
        for (long p = 0; p + run <= NP; p += stride) {
            if (mode == 1)
                madvise(m + p * 4096, (long)run * 4096, MADV_POPULATE_WRITE);
            else if (mode == 2)
                madvise(m + p * 4096, (long)run * 4096, MADV_POPULATE_READ);
            else if (mode == 3)
                for (int k = 0; k < run; k++)
                    (void)*(volatile char *)(m + (p + k) * 4096);
            runs++;
            pages += run;
            for (int k = 0; k < run; k++)
                m[(p + k) * 4096]++;
        }
        double t1 = now();
        struct iovec iov[256];
        int n = 0;
        for (long p = 0; p + run <= NP; p += stride) {
            iov[n].iov_base = m + p * 4096;
            iov[n].iov_len = (long)run * 4096;
            if (++n == 256) {
                if (syscall(SYS_process_madvise, pidfd, iov, n, MADV_DONTNEED, 0) < 0)
                    return 1;
                n = 0;
            }
        }
        if (n && syscall(SYS_process_madvise, pidfd, iov, n, MADV_DONTNEED, 0) < 0)
            return 1;
        tmap += t1 - t0;
        tzap += now() - t1;
        munmap(m, (long)NP * 4096);
    }
    printf("mode=%d run=%d stride=%d: map %.0f ns/run %.0f ns/page | zap %.0f ns/range %.0f ns/page\n", mode, run,
           stride, tmap * 1e9 / runs, tmap * 1e9 / pages, tzap * 1e9 / runs, tzap * 1e9 / pages);
    return 0;
}
