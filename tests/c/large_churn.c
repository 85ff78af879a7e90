/* Large-object churn: N allocations of 256 KiB objects, 8 alive at a time, each written.
 * Every large object gets fresh address space that is never reused, so what a freed view
 * leaves behind (page tables, table entries) must be given back, or it grows with N.
 *
 *   large_churn N      prints "SAMPLE <allocations> <VmPTE kB> <VmRSS kB>" four times and at
 *                      the end, then "OK" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 40000;
    void *keep[8] = {0};
    for (long i = 0; i <= n; i++) {
        if (i % (n / 4) == 0) printf("SAMPLE %ld %ld %ld\n", i, status_kb("VmPTE:"), status_kb("VmRSS:"));
        int k = (int)(i % 8);
        free(keep[k]);
        keep[k] = malloc(256 << 10);
        if (!keep[k]) return 2;
        memset(keep[k], (int)i, 4096);
    }
    for (int k = 0; k < 8; k++) free(keep[k]);
    printf("OK\n");
    return 0;
}
