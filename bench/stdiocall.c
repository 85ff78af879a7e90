/* stdiocall: what a small fwrite(3) and fread(3) cost through the allocator's exported stdio
 * calls (crates/nevermore/src/io.rs, which hold a heap buffer to its object's bounds). N rounds
 * of fwrite of 16 bytes from a heap buffer to /dev/null and fread of 16 bytes from /dev/zero
 * into it, both buffered by the C library; prints the nanoseconds per round.
 * usage: stdiocall [N]   (N 5000000 by default) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 5000000;
    char *b = malloc(64);
    memset(b, 'a', 64);
    FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/zero", "r");
    if (!out || !in)
        return 2;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        if (fwrite(b, 1, 16, out) != 16 || fread(b, 1, 16, in) != 16)
            return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.1f ns per round\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    return 0;
}
