/* formatcall: what short formatting and scanning calls cost through the allocator's exported
 * ones (crates/nevermore/src/formats.rs, which bound a heap buffer's text by its object's end,
 * and check the strings a scan wrote into one). N rounds of, with "print", a sprintf then an
 * snprintf of "%ld:%s" (about 12 bytes), or, with "scan", an sscanf of "%d %s" from "12345
 * round", or, with "time", a strftime of "%Y-%m-%d %H:%M:%S" and a swprintf of L"%ld" (into the
 * buffer's first 16 wide characters), into a 64-byte heap object or, with "stack", a 64-byte
 * stack buffer, or, with "dup", a strdup of a 31-byte string in that buffer and a free of the
 * copy (copies.rs's duplicates), or, with "read", a strlen of that string, a strcmp and a
 * memcmp of its 32 bytes with a copy on the stack (reads.rs), or, with "sort", a qsort of the
 * 16 ints the buffer holds, put back in descending order first (copies.rs's sorts); prints the
 * nanoseconds per round.
 * usage: formatcall [N] [heap|stack] [print|scan|time|dup|read|sort]   (5000000, heap and print
 * by default) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>

static int ascending(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 5000000;
    char on_stack[64];
    char *b = argc > 2 && !strcmp(argv[2], "stack") ? on_stack : malloc(64);
    int scan = argc > 3 && !strcmp(argv[3], "scan"), times = argc > 3 && !strcmp(argv[3], "time");
    int dup = argc > 3 && !strcmp(argv[3], "dup"), reads = argc > 3 && !strcmp(argv[3], "read");
    int sorts = argc > 3 && !strcmp(argv[3], "sort");
    char same[64];
    if (dup || reads) {
        memset(b, 'd', 31);
        b[31] = 0;
        memcpy(same, b, 32);
    }
    struct tm tm = {.tm_year = 126, .tm_mon = 11, .tm_mday = 5};
    volatile long sum = 0;
    int x = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        if (sorts) {
            int *v = (int *)b;
            for (int k = 0; k < 16; k++)
                v[k] = 16 - k;
            qsort(v, 16, sizeof *v, ascending);
            sum += v[(int)(i & 15)];
        } else if (reads) {
            sum += (long)strlen(b);
            sum += strcmp(b, same);
            sum += memcmp(b, same, 32);
        } else if (dup) {
            char *c = strdup(b);
            sum += c[i % 31];
            free(c);
        } else if (scan) {
            sum += sscanf("12345 round", "%d %s", &x, b);
        } else if (times) {
            tm.tm_sec = (int)(i % 60);
            sum += strftime(b, 64, "%Y-%m-%d %H:%M:%S", &tm);
            sum += swprintf((wchar_t *)b, 16, L"%ld", i);
        } else {
            sum += sprintf(b, "%ld:%s", i, "round");
            sum += snprintf(b, 64, "%ld:%s", i, "round");
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.1f ns per round\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    return 0;
}
