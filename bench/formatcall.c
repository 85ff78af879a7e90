/* formatcall: what a short sprintf(3) and snprintf(3) cost through the allocator's exported
 * formatting calls (crates/nevermore/src/copies.rs, which bound a heap buffer's text by its
 * object's end). N rounds of sprintf then snprintf of "%d:%s" (about 12 bytes) into a 64-byte
 * heap object, or with "stack" into a 64-byte stack buffer; prints the nanoseconds per round.
 * usage: formatcall [N] [heap|stack]   (N 5000000 and heap by default) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 5000000;
    char on_stack[64];
    char *b = argc > 2 && !strcmp(argv[2], "stack") ? on_stack : malloc(64);
    volatile long sum = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        sum += sprintf(b, "%ld:%s", i, "round");
        sum += snprintf(b, 64, "%ld:%s", i, "round");
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.1f ns per round\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    return 0;
}
