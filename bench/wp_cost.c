/* wp_cost: what tracking writes to alias pages would cost, for a sweep that reads the heap
 * while the program runs and then reads again, with the program stopped, only the pages
 * written meanwhile. A memfd of NP pages is mapped twice (a canonical view and a mirror); the
 * mirror is registered with userfaultfd in MINOR|WP mode with asynchronous write protection
 * (UFFD_FEATURE_WP_ASYNC: the kernel resolves a write to a protected page by itself, no
 * message, no signal) and installed whole. Then, REPS times:
 *   protect   PAGEMAP_SCAN with PM_SCAN_WP_MATCHING over the whole mirror (every page written)
 *   writes    one write to every STRIDE-th page (each a write-protect fault the kernel resolves)
 *   collect   PAGEMAP_SCAN of the written pages, protecting them again at once
 *   clean     PAGEMAP_SCAN of the whole mirror when nothing was written
 * and once, after the reps: a revoked page (MADV_DONTNEED) installed again with UFFDIO_CONTINUE
 * and written (must not fault), and a revoked page touched (must raise SIGBUS: the minor fault
 * the alias engine's handler relies on still comes).
 * Needs Linux 6.7 (PAGEMAP_SCAN, UFFD_FEATURE_WP_ASYNC); says so and exits 2 without.
 * usage: wp_cost [NP [STRIDE [REPS]]] (100000 pages, every 10th, 5 reps) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Linux 6.7's <linux/fs.h> and <linux/userfaultfd.h>, which older headers lack. */
struct page_region { uint64_t start, end, categories; };
struct pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_WRITTEN (1 << 1)
#define PM_SCAN_WP_MATCHING (1 << 0)
#define PM_SCAN_CHECK_WPASYNC (1 << 1)
#define FEATURE_WP_HUGETLBFS_SHMEM (1 << 12)
#define FEATURE_WP_UNPOPULATED (1 << 13)
#define FEATURE_WP_ASYNC (1 << 15)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static sigjmp_buf back;
static void on_bus(int sig) { siglongjmp(back, sig); }

int main(int argc, char **argv) {
    size_t np = argc > 1 ? strtoul(argv[1], 0, 10) : 100000;
    size_t stride = argc > 2 ? strtoul(argv[2], 0, 10) : 10;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    size_t len = np * 4096;
    int fd = memfd_create("wp_cost", 0);
    if (fd < 0 || ftruncate(fd, len)) return perror("memfd"), 1;
    char *canon = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (canon == MAP_FAILED || p == MAP_FAILED) return perror("mmap"), 1;
    memset(canon, 1, len);
    int u = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | 1 /* UFFD_USER_MODE_ONLY */);
    if (u < 0) return perror("userfaultfd"), 1;
    struct uffdio_api api = {.api = UFFD_API,
                             .features = UFFD_FEATURE_SIGBUS | UFFD_FEATURE_MINOR_SHMEM | FEATURE_WP_HUGETLBFS_SHMEM |
                                         FEATURE_WP_UNPOPULATED | FEATURE_WP_ASYNC};
    if (ioctl(u, UFFDIO_API, &api)) {
        printf("no asynchronous write protection of shared memory here (UFFDIO_API: %s)\n", strerror(errno));
        return 2;
    }
    struct uffdio_register r = {.range = {(uintptr_t)p, len}, .mode = UFFDIO_REGISTER_MODE_MINOR | UFFDIO_REGISTER_MODE_WP};
    if (ioctl(u, UFFDIO_REGISTER, &r)) return perror("UFFDIO_REGISTER"), 1;
    struct uffdio_continue c = {.range = {(uintptr_t)p, len}};
    if (ioctl(u, UFFDIO_CONTINUE, &c)) return perror("UFFDIO_CONTINUE"), 1;
    for (size_t i = 0; i < np; i++) p[i * 4096] = 2;
    int pm = open("/proc/self/pagemap", O_RDONLY);
    struct page_region *v = malloc(sizeof *v * np);
    struct pm_scan_arg a = {.size = sizeof a, .start = (uintptr_t)p, .end = (uintptr_t)p + len, .vec = (uintptr_t)v,
                            .vec_len = np, .category_mask = PAGE_IS_WRITTEN, .return_mask = PAGE_IS_WRITTEN};
    printf("%zu pages (%zu MiB), a write to every %zu-th page\n", np, len >> 20, stride);
    for (int rep = 0; rep < reps; rep++) {
        for (size_t i = 0; i < np; i++) p[i * 4096] = 3;
        a.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC;
        double t0 = now();
        long k = ioctl(pm, PAGEMAP_SCAN, &a);
        double t1 = now();
        if (k < 0) {
            printf("no PAGEMAP_SCAN here (%s)\n", strerror(errno));
            return 2;
        }
        for (size_t i = 0; i < np; i += stride) p[i * 4096] = 4;
        double t2 = now();
        k = ioctl(pm, PAGEMAP_SCAN, &a);
        double t3 = now();
        size_t pages = 0;
        for (long i = 0; i < k; i++) pages += (v[i].end - v[i].start) / 4096;
        a.flags = PM_SCAN_CHECK_WPASYNC;
        long clean = ioctl(pm, PAGEMAP_SCAN, &a);
        double t4 = now();
        size_t w = (np + stride - 1) / stride;
        printf("protect %.2f ms | writes %.2f ms, %.0f ns each | collect %.2f ms, %zu pages | clean %.2f ms, %ld regions\n",
               (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t2 - t1) * 1e9 / w, (t3 - t2) * 1e3, pages, (t4 - t3) * 1e3, clean);
        if (pages != w || clean != 0) return printf("written pages miscounted\n"), 1;
    }
    /* A revoked page comes back with UFFDIO_CONTINUE and takes writes; one not installed
     * again still raises SIGBUS. */
    struct sigaction sa = {.sa_handler = on_bus};
    sigaction(SIGBUS, &sa, 0);
    if (madvise(p, 2 * 4096, MADV_DONTNEED)) return perror("madvise"), 1;
    struct uffdio_continue one = {.range = {(uintptr_t)p, 4096}};
    if (ioctl(u, UFFDIO_CONTINUE, &one)) return perror("UFFDIO_CONTINUE after a revocation"), 1;
    if (sigsetjmp(back, 1) == 0) p[0] = 5;
    else return printf("a write to a page installed again faulted\n"), 1;
    volatile int sig = sigsetjmp(back, 1);
    if (sig == 0) {
        p[4096] = 6;
        return printf("a revoked page took a write without a fault\n"), 1;
    }
    printf("revoked and installed again: written; revoked: SIGBUS\n");
    return 0;
}
