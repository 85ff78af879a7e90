/* sparse: "sparse survivors". Each round allocates many small objects and frees all but one in
 * every 64; survivors accumulate over the rounds. One-time allocators that cannot reuse a page
 * while one object on it lives blow up memory here.
 * usage: sparse OBJECTS_PER_ROUND ROUNDS   prints: RESULT survivors=<n> */
#include <string.h>
#include "common.h"

int main(int argc, char **argv) {
    long per_round = arg_long(argc, argv, 1, 1000000);
    long rounds = arg_long(argc, argv, 2, 6);
    uint64_t seed = 0x0DDC0FFEEULL;
    void **batch = xmalloc(sizeof(void *) * (size_t)per_round);
    size_t cap = (size_t)(per_round / 64 + 1) * (size_t)rounds;
    void **keep = xmalloc(sizeof(void *) * cap);
    size_t kept = 0;
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < per_round; i++) {
            size_t n = 16 + rng_next(&seed) % 113; /* 16..128 bytes */
            batch[i] = xmalloc(n);
            memset(batch[i], (int)i, n);
        }
        for (long i = 0; i < per_round; i++) {
            if (i % 64 == 0)
                keep[kept++] = batch[i];
            else
                free(batch[i]);
        }
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < kept; i++) sum += ((unsigned char *)keep[i])[0];
    for (size_t i = 0; i < kept; i++) free(keep[i]);
    free(keep);
    free(batch);
    printf("RESULT survivors=%zu sum=%llu\n", kept, (unsigned long long)sum);
    return 0;
}
