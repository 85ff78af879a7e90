/* iocall: what a read(2) and a write(2) cost through the allocator's exported I/O calls
 * (crates/nevermore/src/io.rs). N rounds of write(2) of 64 bytes from a heap buffer to a
 * pipe and read(2) of them back into it; prints the nanoseconds per round.
 * usage: iocall [N]   (N 1000000 by default) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int p[2];
    if (pipe(p) != 0)
        return 2;
    char *b = malloc(64);
    memset(b, 1, 64);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++)
        if (write(p[1], b, 64) != 64 || read(p[0], b, 64) != 64)
            return 1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.1f ns per round\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    free(b);
    return 0;
}
