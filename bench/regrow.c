/* regrow: a buffer grown by realloc in small steps, as a string builder or a log buffer
 * without a doubling strategy grows it. Grows one buffer from STEP bytes to MIB MiB, STEP
 * bytes at a time, writing the new bytes each time; checks the content at the end; best of
 * ROUNDS rounds.
 * usage: regrow [MIB [STEP [ROUNDS]]]   prints: RESULT seconds=<float> steps=<n> */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
    size_t step = argc > 2 ? strtoul(argv[2], NULL, 0) : 4096;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    size_t want = mib << 20;
    if (!step) return 2;
    double best = 1e99;
    size_t steps = 0;
    for (int r = 0; r < rounds; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        char *p = NULL;
        size_t len = 0;
        steps = 0;
        while (len < want) {
            char *q = realloc(p, len + step);
            if (!q) {
                fprintf(stderr, "regrow: realloc to %zu bytes failed\n", len + step);
                return 1;
            }
            p = q;
            memset(p + len, (int)(steps & 0x7F) + 1, step);
            len += step;
            steps++;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        for (size_t i = 0; i < len; i += step)
            if (p[i] != (char)(((i / step) & 0x7F) + 1)) {
                fprintf(stderr, "regrow: byte %zu lost\n", i);
                return 1;
            }
        free(p);
        double t = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
        if (t < best) best = t;
    }
    printf("RESULT seconds=%.4f steps=%zu\n", best, steps);
    return 0;
}
