/* vmdata_churn: allocates and frees N objects of SIZE bytes one after another, printing the
 * process's VmData (private writable memory, KiB: what strict overcommit accounting and
 * RLIMIT_DATA charge) four times on the way and at the end.
 * usage: vmdata_churn N SIZE   e.g. vmdata_churn 200000 300000 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long vmdata(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmData:", 7)) kib = atol(line + 7);
    if (f) fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 300000;
    if (n < 4 || size < 1) return 64;
    for (long i = 0; i < n; i++) {
        char *p = malloc(size);
        if (!p) {
            printf("malloc failed after %ld\n", i);
            return 1;
        }
        p[0] = 1;
        p[size - 1] = 2;
        free(p);
        if (i % (n / 4) == 0) printf("after %ld: VmData %ld KiB\n", i, vmdata());
    }
    printf("end: VmData %ld KiB\n", vmdata());
    return 0;
}
