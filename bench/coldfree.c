/* coldfree: frees of cold pointers, as a server with a big heap makes them. N objects of
 * 16..515 bytes are allocated, shuffled, and freed in random order, each after a
 * malloc_usable_size (Redis's zmalloc asks it before every free); best of ROUNDS rounds.
 * usage: coldfree [N [ROUNDS]]   prints: RESULT ns_per_free=<float> */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    void **p = malloc((size_t)n * sizeof *p);
    unsigned s = 1;
    double best = 1e99;
    size_t sum = 0;
    for (int r = 0; r < rounds; r++) {
        for (long i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            p[i] = malloc(16 + (s >> 16) % 500);
        }
        for (long i = n - 1; i > 0; i--) {
            s = s * 1103515245u + 12345u;
            long j = (long)(s % (unsigned long)(i + 1));
            void *t = p[i];
            p[i] = p[j];
            p[j] = t;
        }
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++) {
            sum += malloc_usable_size(p[i]);
            free(p[i]);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        double t = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
        if (t < best) best = t;
    }
    printf("RESULT ns_per_free=%.1f (checksum %zu)\n", best, sum % 7);
    free(p);
    return 0;
}
