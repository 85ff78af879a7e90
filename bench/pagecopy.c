/* pagecopy: copies into many page objects, as a database copies into its pages. N objects of
 * SIZE bytes (default 5000 of 4200: two pages each under nevermore, 20 MiB in all) are filled;
 * then, STEPS times over, one is picked at random and 8 memcpy calls of 40..47 bytes go to
 * random offsets in it. With WORK_MIB, after each copy 16 random bytes of that many MiB of
 * other memory are read, as a program's own work between its copies pushes lines out of the
 * cache. Build with -fno-builtin-memcpy so that every copy is a call.
 * usage: pagecopy [N [STEPS [SIZE [WORK_MIB]]]]   prints: RESULT ns_per_copy=<float> */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 5000;
    long steps = argc > 2 ? atol(argv[2]) : 4000000;
    size_t size = argc > 3 ? (size_t)atol(argv[3]) : 4200;
    size_t work = argc > 4 ? (size_t)atol(argv[4]) << 20 : 0;
    if (n < 1 || size < 256) return 2;
    char *other = work ? malloc(work) : NULL;
    if (work && !other) return 2;
    if (work) memset(other, 1, work);
    char **v = malloc((size_t)n * sizeof *v);
    char src[64];
    memset(src, 7, sizeof src);
    for (long i = 0; i < n; i++) {
        v[i] = malloc(size);
        memset(v[i], 0, size);
    }
    uint64_t x = 88172645463325252ULL;
    volatile char sink = 0;
    double t0 = now_ns();
    for (long s = 0; s < steps; s += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        char *b = v[x % (uint64_t)n];
        for (int k = 0; k < 8; k++) {
            memcpy(b + (x >> (k * 5)) % (size - 128), src, 40 + k);
            for (uint64_t j = 1; work && j <= 16; j++) sink += other[(x * j * 2654435761u + k * 977u) % work];
        }
        sink += b[0];
    }
    printf("RESULT ns_per_copy=%.1f\n", (now_ns() - t0) / steps);
    return 0;
}
