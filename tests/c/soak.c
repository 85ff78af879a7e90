/* Soak: N allocations with a mix of lifetimes (99% short-lived in a ring of 4096 slots replaced
 * at random, 1% long-lived in a ring of 65536 slots replaced at random, i.e. living ~6.5 M
 * allocations), sizes 1..2048 mostly, 1 in 64 of 2 KiB..64 KiB, 1 in 4096 of 256 KiB.
 *
 *   soak N EVERY [MAX_MAPS MAX_PTE_KB [LONG]]
 *
 * LONG (default 65536, at most 65536) sets the long-lived ring, i.e. their lifetime.
 *
 * Every EVERY allocations prints
 *   SAMPLE <allocations> <maps lines> <pool mappings> <VmPTE kB> <VmRSS kB> <seconds>
 * (pool mappings: lines of /proc/self/maps naming the allocator's pool memfd, i.e. live
 * mirrors + the canonical view + large-object views; under glibc 0). With MAX_MAPS and
 * MAX_PTE_KB, exceeding either at a sample prints "SOAK FAIL" and exits 2. Ends with "OK". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long maps_lines(long *pool) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    long n = 0;
    *pool = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        if (strstr(line, "nevermore-pool")) ++*pool;
    }
    fclose(f);
    return n;
}

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, k)) v = atol(line + k + 1);
    fclose(f);
    return v;
}

#define SHORT 4096
#define LONG 65536
static void *shorts[SHORT], *longs[LONG];

int main(int argc, char **argv) {
    if (argc < 3) return 64;
    long long n = atoll(argv[1]), every = atoll(argv[2]);
    long max_maps = argc > 3 ? atol(argv[3]) : 0, max_pte = argc > 4 ? atol(argv[4]) : 0;
    long nlong = argc > 5 ? atol(argv[5]) : LONG;
    if (nlong < 1 || nlong > LONG) return 64;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long peak_maps = 0, peak_pte = 0, peak_pool = 0;
    for (long long i = 1; i <= n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t size = 1 + (x >> 8) % 2048;
        if ((x >> 40) % 64 == 0) size = 2048 + (x >> 20) % (62 << 10);
        if ((x >> 40) % 4096 == 1) size = 256 << 10;
        void *p = malloc(size);
        if (!p) {
            printf("SOAK FAIL: malloc(%zu) failed at %lld\n", size, i);
            return 2;
        }
        *(volatile char *)p = (char)i;
        ((volatile char *)p)[size - 1] = (char)i;
        void **slot = (x >> 32) % 100 == 0 ? &longs[(x >> 44) % nlong] : &shorts[(x >> 44) % SHORT];
        free(*slot);
        *slot = p;
        if (i % every == 0) {
            long pool, maps = maps_lines(&pool), pte = status_kb("VmPTE:"), rss = status_kb("VmRSS:");
            clock_gettime(CLOCK_MONOTONIC, &t);
            printf("SAMPLE %lld %ld %ld %ld %ld %.1f\n", i, maps, pool, pte, rss,
                   (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9);
            fflush(stdout);
            if (maps > peak_maps) peak_maps = maps;
            if (pte > peak_pte) peak_pte = pte;
            if (pool > peak_pool) peak_pool = pool;
            if ((max_maps && maps > max_maps) || (max_pte && pte > max_pte)) {
                printf("SOAK FAIL: %ld maps (max %ld), VmPTE %ld kB (max %ld)\n", maps, max_maps, pte, max_pte);
                return 2;
            }
        }
    }
    for (int k = 0; k < SHORT; k++) free(shorts[k]);
    for (int k = 0; k < LONG; k++) free(longs[k]);
    printf("PEAK maps %ld pool-mappings %ld VmPTE %ld kB\nOK\n", peak_maps, peak_pool, peak_pte);
    return 0;
}
