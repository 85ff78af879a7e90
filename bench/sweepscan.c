/* sweepscan: how fast sweeps read a heap dense with pointers (as a key-value server's is: its
 * hash tables and entries point at one another). LIVE nodes of 48 bytes, each holding five
 * pointers to random other nodes, stay live; meanwhile N allocations replace
 * random ones of 4 096 short-lived objects, one in 64 of them replacing a random node
 * instead, so that survivors pin dead slots and sweeps run (the short-lived ones are of 33–64
 * bytes, as the nodes, so that they share pages). Run with NEVERMORE_OPTIONS=stats=1:
 * the statistics at exit give the bytes the sweeps scanned and the time they took.
 * usage: sweepscan [N] [LIVE]   (N 20000000, LIVE 1000000 by default); prints ns per allocation */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct node {
    struct node *to[5];
    uint64_t key;
};

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    long live = argc > 2 ? atol(argv[2]) : 1000000;
    struct node **nodes = calloc(live, sizeof *nodes);
    static void *short_lived[4096];
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    for (long i = 0; i < live; i++) {
        nodes[i] = malloc(sizeof(struct node));
        nodes[i]->key = i;
    }
    for (long i = 0; i < live; i++)
        for (int k = 0; k < 5; k++)
            nodes[i]->to[k] = nodes[next(&s) % live];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        uint64_t r = next(&s);
        if (r % 64 == 0) {
            long j = (r >> 8) % live;
            struct node *x = malloc(sizeof(struct node));
            memcpy(x, nodes[j], sizeof *x);
            /* Whoever pointed at the old node now points at its copy only through this one. */
            free(nodes[j]);
            nodes[j] = x;
            for (int k = 0; k < 5; k++)
                x->to[k] = nodes[(r >> (8 + 4 * k)) % live];
        } else {
            size_t size = 33 + (r >> 32) % 32;
            void **slot = &short_lived[(r >> 16) % 4096];
            free(*slot);
            *slot = malloc(size);
            memset(*slot, 0, size < 32 ? size : 32);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.1f ns per allocation\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    return 0;
}
