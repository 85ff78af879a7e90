/*
 * Revocation batches of several threads revoked together (prevent mode).
 *
 * Usage: stage THREADS
 * THREADS threads (the main one included) each run 200000 steps over 512 slots of their own:
 * free the object in a random slot (checking the pattern it was stamped with) and allocate
 * 16..1024 bytes into it, stamped with a pattern of its own. Then the other threads end and
 * the main thread runs as many steps again, alone. Prints OK and exits 0, or prints what
 * failed and exits 1.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 512
#define STEPS 200000

static unsigned char pattern(uintptr_t p, size_t i) { return (unsigned char)((p >> 4) * 29 + i * 11 + 3); }

static void *run(void *arg) {
    uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
    unsigned char *slot[SLOTS] = {0};
    size_t len[SLOTS] = {0};
    for (long i = 0; i < STEPS; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        size_t k = (size_t)(seed % SLOTS);
        if (slot[k]) {
            for (size_t b = 0; b < len[k]; b++)
                if (slot[k][b] != pattern((uintptr_t)slot[k], b)) {
                    printf("CORRUPTED object %p (%zu bytes)\n", (void *)slot[k], len[k]);
                    exit(1);
                }
            free(slot[k]);
        }
        len[k] = 16 + (size_t)((seed >> 20) % 1009);
        slot[k] = malloc(len[k]);
        if (!slot[k]) {
            printf("MALLOC FAILED\n");
            exit(1);
        }
        for (size_t b = 0; b < len[k]; b++)
            slot[k][b] = pattern((uintptr_t)slot[k], b);
    }
    for (size_t k = 0; k < SLOTS; k++)
        free(slot[k]);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2;
    pthread_t t[64];
    if (n < 1 || n > 64)
        return 2;
    for (int i = 1; i < n; i++)
        if (pthread_create(&t[i], NULL, run, (void *)(uintptr_t)i) != 0) {
            printf("THREAD FAILED\n");
            return 1;
        }
    run((void *)(uintptr_t)0);
    for (int i = 1; i < n; i++)
        pthread_join(t[i], NULL);
    run((void *)(uintptr_t)n);
    printf("OK\n");
    return 0;
}
