/* callcost: what single malloc and free calls cost, as a distribution: the alloc/free loop of
 * loop.c (SLOTS live objects, each step frees a random one and allocates a new one of a random
 * size in MIN..=MAX), each call timed with the time-stamp counter. The median shows the
 * common path (user-space work only); the calls over 3 000 counter ticks are those that made
 * system calls (a refill installing alias pages, a revocation batch), and the share of all
 * the time they took shows what the common path leaves to them.
 * usage: callcost [OPS [SLOTS [MIN [MAX]]]]   (2^22 steps, 1024 slots, sizes 0..=1024)
 * prints, for free and malloc: mean, p50, p90, p99 in ns, and the share of the time spent in
 * calls over 3 000 ticks. The counter reads in steps of some ticks on a VM: medians are
 * coarse (about 10 ns here). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int by_value(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void summary(const char *what, uint32_t *t, long ops, double ns_per_tick) {
    double sum = 0, slow = 0;
    long nslow = 0;
    for (long i = 0; i < ops; i++) {
        sum += t[i];
        if (t[i] >= 3000) {
            slow += t[i];
            nslow++;
        }
    }
    qsort(t, (size_t)ops, sizeof *t, by_value);
    printf("%-6s mean %6.1f ns  p50 %6.1f  p90 %6.1f  p99 %7.1f  calls over 3000 ticks: %.2f%% of "
           "calls, %.0f%% of the time\n",
           what, sum / ops * ns_per_tick, t[ops / 2] * ns_per_tick, t[ops * 9 / 10] * ns_per_tick,
           t[ops * 99 / 100] * ns_per_tick, 100.0 * nslow / ops, sum > 0 ? 100 * slow / sum : 0);
}

int main(int argc, char **argv) {
    long ops = argc > 1 ? atol(argv[1]) : 1L << 22;
    long slots = argc > 2 ? atol(argv[2]) : 1024;
    long min = argc > 3 ? atol(argv[3]) : 0;
    long max = argc > 4 ? atol(argv[4]) : 1024;
    if (ops < 1 || slots < 1 || min < 0 || max < min)
        return 2;
    void **live = malloc(sizeof(void *) * (size_t)slots);
    uint32_t *tf = malloc(sizeof(uint32_t) * (size_t)ops), *tm = malloc(sizeof(uint32_t) * (size_t)ops);
    if (!live || !tf || !tm)
        return 2;
    uint64_t seed = 0x9E3779B97F4A7C15ULL;
    for (long i = 0; i < slots; i++) {
        size_t n = (size_t)(min + (long)(rng(&seed) % (uint64_t)(max - min + 1)));
        live[i] = malloc(n);
        if (n)
            ((volatile char *)live[i])[0] = 1;
    }
    for (long i = 0; i < ops; i++) /* the tables' pages in place before timing */
        tf[i] = tm[i] = 0;
    double t0 = now();
    uint64_t c0 = __rdtsc();
    for (long i = 0; i < ops; i++) {
        uint64_t r = rng(&seed);
        long k = (long)(r % (uint64_t)slots);
        size_t n = (size_t)(min + (long)((r >> 32) % (uint64_t)(max - min + 1)));
        uint64_t a = __rdtsc();
        free(live[k]);
        uint64_t b = __rdtsc();
        live[k] = malloc(n);
        uint64_t c = __rdtsc();
        if (n)
            ((volatile char *)live[k])[0] = (char)i;
        tf[i] = (uint32_t)(b - a > UINT32_MAX ? UINT32_MAX : b - a);
        tm[i] = (uint32_t)(c - b > UINT32_MAX ? UINT32_MAX : c - b);
    }
    double ns_per_tick = (now() - t0) * 1e9 / (double)(__rdtsc() - c0);
    summary("free", tf, ops, ns_per_tick);
    summary("malloc", tm, ops, ns_per_tick);
    for (long i = 0; i < slots; i++)
        free(live[i]);
    return 0;
}
