/* A program that lowers its own address-space limit (RLIMIT_AS) once it runs, as vsftpd does
 * (100-200 MiB): it reads back what it set, its own mappings and small allocations go on
 * working, and the heap stays bounded by the limit (an allocation beyond fails with ENOMEM).
 * Then it raises the limit to 512 MiB (the kernel allows it with privileges only) and prints
 * what it got and what it reads back ("RAISE ...", "NOW soft hard" in MiB).
 * usage: as_limit   prints AS LIMIT OK (exit 0) or the first check that failed (exit 1)
 *        as_limit report   prints the limit it was started under and whether 1500 MiB fit */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define MIB (1UL << 20)
#define FAIL(...) do { printf(__VA_ARGS__); printf("\n"); return 1; } while (0)

int main(int argc, char **argv) {
    if (argc > 1) {
        /* "report": the limit this program was started under, and whether 1500 MiB fit. */
        struct rlimit r;
        getrlimit(RLIMIT_AS, &r);
        void *p = malloc(1500 * MIB);
        printf("limit %lu MiB, malloc(1500 MiB) %s\n", (unsigned long)(r.rlim_cur / MIB), p ? "ok" : "failed");
        return 0;
    }
    struct rlimit lim = {256 * MIB, 256 * MIB}, got;
    if (setrlimit(RLIMIT_AS, &lim)) FAIL("setrlimit failed: errno %d", errno);
    if (getrlimit(RLIMIT_AS, &got) || got.rlim_cur != lim.rlim_cur || got.rlim_max != lim.rlim_max)
        FAIL("getrlimit: %lu/%lu", (unsigned long)got.rlim_cur, (unsigned long)got.rlim_max);
    if (prlimit(0, RLIMIT_AS, NULL, &got) || got.rlim_cur != lim.rlim_cur)
        FAIL("prlimit: %lu", (unsigned long)got.rlim_cur);
    struct rlimit bad = {512 * MIB, 256 * MIB};
    if (setrlimit(RLIMIT_AS, &bad) == 0 || errno != EINVAL) FAIL("soft above hard accepted (errno %d)", errno);
    /* The program's own mappings. */
    void *m = mmap(NULL, 32 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) FAIL("mmap of 32 MiB failed: errno %d", errno);
    memset(m, 1, 32 * MIB);
    munmap(m, 32 * MIB);
    /* The heap: small objects, and a big one within the limit. */
    void *keep[1000];
    for (int round = 0; round < 200; round++)
        for (int i = 0; i < 1000; i++) {
            if (round) free(keep[i]);
            keep[i] = malloc((size_t)(i * 7919 + round) % 1025);
            if (!keep[i] && (i * 7919 + round) % 1025) FAIL("small malloc failed in round %d", round);
        }
    for (int i = 0; i < 1000; i++) free(keep[i]);
    char *big = malloc(64 * MIB);
    if (!big) FAIL("malloc(64 MiB) failed: errno %d", errno);
    memset(big, 2, 64 * MIB);
    free(big);
    /* Beyond the limit. */
    errno = 0;
    void *huge = malloc(300 * MIB);
    if (huge || errno != ENOMEM) FAIL("malloc(300 MiB) under a 256 MiB limit: %p, errno %d", huge, errno);
    /* Raising the hard limit again: allowed with privileges only, as the kernel decides. */
    struct rlimit up = {512 * MIB, 512 * MIB};
    if (setrlimit(RLIMIT_AS, &up) == 0)
        printf("RAISE ok\n");
    else
        printf("RAISE errno %d\n", errno);
    if (getrlimit(RLIMIT_AS, &got)) FAIL("getrlimit after raising failed");
    printf("NOW %lu %lu\n", (unsigned long)(got.rlim_cur / MIB), (unsigned long)(got.rlim_max / MIB));
    printf("AS LIMIT OK\n");
    return 0;
}
