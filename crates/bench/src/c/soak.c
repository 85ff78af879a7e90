/* soak: a long run with survivors. N allocations of random sizes in 0..=1024; each replaces a
 * random one of 1 024 short-lived objects, or, for 1 % of them, a random one of 100 000
 * long-lived objects (which then live ~10^7 allocations), so that survivors end up scattered
 * among the short-lived objects allocated with them. The objects are left to the exit, so that
 * an allocator's exit statistics show the state at the end of the run.
 * usage: soak N   prints: RESULT ns_per_op=<float> */
#include "common.h"

#define SHORT 1024
#define LONG 100000

int main(int argc, char **argv) {
    long n = arg_long(argc, argv, 1, 100000000L);
    static void *short_lived[SHORT], *long_lived[LONG];
    uint64_t seed = 0x243F6A8885A308D3ULL;
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        uint64_t r = rng_next(&seed);
        size_t size = (r >> 40) % 1025;
        void *p = xmalloc(size);
        if (size) ((volatile char *)p)[0] = (char)i;
        void **slot = (r & 0xffff) % 100 == 0 ? &long_lived[(r >> 16) % LONG] : &short_lived[(r >> 16) % SHORT];
        free(*slot);
        *slot = p;
    }
    double t1 = now_s();
    printf("RESULT ns_per_op=%.3f\n", (t1 - t0) * 1e9 / (double)n);
    return 0;
}
