/* Large-object churn: N allocations of 256 KiB objects, 8 alive at a time, each written.
 * Every large object gets fresh address space that is never reused (until `large_space` is
 * used up), so what a freed view leaves behind (page tables, table entries, the tables
 * themselves) must be given back, or it grows with N.
 *
 *   large_churn N [read|free]
 *                      prints "SAMPLE <allocations> <VmPTE kB> <VmRSS kB> <VmData kB>" four
 *                      times and at the end, then "OK"; with "read" or "free", then reads or
 *                      frees object N/2 again (freed N/2 allocations ago)
 *   large_churn reuse N PIN [uaf]
 *                      first allocates PIN objects that live to the end, then churns N objects
 *                      as above, each filled with its own number and checked before it is
 *                      freed; remembers the first 64 churned objects' addresses and prints
 *                      "FIRST_REUSE <i>", the first allocation that got an address within one
 *                      of them (-1: none), "CORRUPT <i>" for an object that did not hold its
 *                      number, "PINNED OK" when the PIN objects kept theirs, then "OK".
 *                      With "uaf", then frees one more object and reads it: a use after free
 *                      of the newest object, which must still trap. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE (256 << 10)

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, k)) v = atol(line + k + 1);
    if (f) fclose(f);
    return v;
}

/* Fills the first and last 4 KiB of an object with `v`. */
static void fill(unsigned char *p, int v) {
    memset(p, v, 4096);
    memset(p + SIZE - 4096, v, 4096);
}

static int holds(const unsigned char *p, int v) {
    for (int i = 0; i < 4096; i++)
        if (p[i] != (unsigned char)v || p[SIZE - 4096 + i] != (unsigned char)v) return 0;
    return 1;
}

static int reuse(long n, int pin, int uaf) {
    unsigned char *pinned[64];
    if (pin > 64) pin = 64;
    for (int k = 0; k < pin; k++) {
        pinned[k] = malloc(SIZE);
        if (!pinned[k]) return 2;
        fill(pinned[k], 0xA0 + k);
    }
    uintptr_t early[64];
    int nearly = 0;
    long first_reuse = -1;
    unsigned char *keep[8] = {0};
    long num[8] = {0};
    for (long i = 0; i < n; i++) {
        int k = (int)(i % 8);
        if (keep[k]) {
            if (!holds(keep[k], (int)(num[k] % 251))) printf("CORRUPT %ld\n", num[k]);
            free(keep[k]);
        }
        unsigned char *p = malloc(SIZE);
        if (!p) {
            printf("malloc failed at %ld\n", i);
            return 2;
        }
        uintptr_t a = (uintptr_t)p;
        if (first_reuse < 0)
            for (int e = 0; e < nearly; e++)
                if (a < early[e] + SIZE && early[e] < a + SIZE) first_reuse = i;
        if (nearly < 64) early[nearly++] = a;
        keep[k] = p;
        num[k] = i;
        fill(p, (int)(i % 251));
    }
    printf("FIRST_REUSE %ld\n", first_reuse);
    for (int k = 0; k < 8; k++) {
        if (!holds(keep[k], (int)(num[k] % 251))) printf("CORRUPT %ld\n", num[k]);
        free(keep[k]);
    }
    int ok = 1;
    for (int k = 0; k < pin; k++) {
        ok &= holds(pinned[k], 0xA0 + k);
        free(pinned[k]);
    }
    if (ok) printf("PINNED OK\n");
    printf("OK\n");
    fflush(stdout);
    if (uaf) {
        volatile unsigned char *p = malloc(SIZE);
        if (!p) return 2;
        p[100] = 1;
        free((void *)p);
        printf("READ %d\n", p[100]);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 3 && !strcmp(argv[1], "reuse"))
        return reuse(atol(argv[2]), atoi(argv[3]), argc > 4 && !strcmp(argv[4], "uaf"));
    long n = argc > 1 ? atol(argv[1]) : 40000;
    void *keep[8] = {0};
    volatile char *first = NULL;
    for (long i = 0; i <= n; i++) {
        if (i % (n / 4) == 0)
            printf("SAMPLE %ld %ld %ld %ld\n", i, status_kb("VmPTE:"), status_kb("VmRSS:"), status_kb("VmData:"));
        int k = (int)(i % 8);
        free(keep[k]);
        keep[k] = malloc(SIZE);
        if (!keep[k]) return 2;
        memset(keep[k], (int)i, 4096);
        if (i == n / 2) first = keep[k];
    }
    for (int k = 0; k < 8; k++) free(keep[k]);
    printf("OK\n");
    fflush(stdout);
    if (argc > 2 && !strcmp(argv[2], "read")) printf("READ %d\n", first[100]);
    if (argc > 2 && !strcmp(argv[2], "free")) free((void *)first);
    return 0;
}
