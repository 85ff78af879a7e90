/* Shared helpers of the nevermore-bench workloads (compiled with cc at run time). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t rng_next(uint64_t *s) {
    /* xorshift64*: fast, good enough to pick sizes and slots */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline long arg_long(int argc, char **argv, int i, long dflt) {
    if (argc > i) {
        long v = strtol(argv[i], NULL, 10);
        if (v > 0) return v;
    }
    return dflt;
}

static inline void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p && n) {
        fprintf(stderr, "malloc(%zu) failed\n", n);
        exit(3);
    }
    return p;
}
