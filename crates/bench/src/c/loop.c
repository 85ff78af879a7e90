/* loop: the heap-protection paper's alloc/free loop. A small array of live slots; each step frees
 * a random slot and allocates a new object of a random size in 0..=1024 into it.
 * usage: loop OPS SLOTS   prints: RESULT ns_per_op=<float> */
#include <string.h>
#include "common.h"

int main(int argc, char **argv) {
    long ops = arg_long(argc, argv, 1, 1L << 22);
    long slots = arg_long(argc, argv, 2, 1024);
    void **live = xmalloc(sizeof(void *) * (size_t)slots);
    uint64_t seed = 0x9E3779B97F4A7C15ULL;
    for (long i = 0; i < slots; i++) {
        size_t n = rng_next(&seed) % 1025;
        live[i] = xmalloc(n);
        if (n) ((volatile char *)live[i])[0] = 1;
    }
    double t0 = now_s();
    for (long i = 0; i < ops; i++) {
        uint64_t r = rng_next(&seed);
        long slot = (long)(r % (uint64_t)slots);
        size_t n = (r >> 32) % 1025;
        free(live[slot]);
        live[slot] = xmalloc(n);
        if (n) ((volatile char *)live[slot])[0] = (char)i;
    }
    double t1 = now_s();
    for (long i = 0; i < slots; i++) free(live[i]);
    free(live);
    printf("RESULT ns_per_op=%.3f\n", (t1 - t0) * 1e9 / (double)ops);
    return 0;
}
