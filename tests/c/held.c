/*
 * Dead memory that threads hold back from reuse (prevent mode batches revocations per thread).
 *
 * Usage: held idle | held many THREADS | held threads THREADS
 *
 * idle: 8 threads each allocate 256 objects of 32 KiB, write them, free them all and then
 *   wait, idle, on a condition variable. The main thread then allocates and frees small
 *   objects for 400 ms. Prints RSS_IDLE and HWM_IDLE (VmRSS and VmHWM in KiB right after the
 *   threads went idle) and RSS_LATER (VmRSS after the main thread's 400 ms), then wakes and
 *   joins the threads.
 * many THREADS: THREADS threads start together; each replaces a random one of 32 objects of
 *   2100..2999 bytes (one page each) 3000 times, checking the pattern every object was
 *   stamped with. Prints POOL_KIB (the memory file of the heap, which holds every page the
 *   heap ever used at once until the dirty decay gives it back) and RSS_PEAK (VmHWM).
 * threads THREADS: THREADS threads (64 KiB stacks) each allocate one object of each of 8 sizes
 *   (16..716 bytes) and wait for the others; with all of them alive, prints RSS_ALL (VmRSS in
 *   KiB), then they free their objects and end.
 *
 * Prints OK and exits 0, or prints what failed and exits 1.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "pool_probe.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int idle_threads, wake;
static pthread_barrier_t start;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *idle_worker(void *arg) {
    (void)arg;
    void *p[256];
    for (int i = 0; i < 256; i++) {
        p[i] = malloc(32 << 10);
        if (!p[i]) {
            printf("FAIL: malloc\n");
            exit(1);
        }
        memset(p[i], i, 32 << 10);
    }
    for (int i = 0; i < 256; i++) free(p[i]);
    pthread_mutex_lock(&mu);
    idle_threads++;
    pthread_cond_broadcast(&cv);
    while (!wake) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return 0;
}

static int idle(void) {
    pthread_t t[8];
    for (int i = 0; i < 8; i++) pthread_create(&t[i], 0, idle_worker, 0);
    pthread_mutex_lock(&mu);
    while (idle_threads < 8) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    printf("RSS_IDLE %ld\nHWM_IDLE %ld\n", status_kib("VmRSS:"), status_kib("VmHWM:"));
    void *slot[512] = {0};
    uint64_t seed = 88172645463325252ull;
    double t0 = now_s();
    while (now_s() - t0 < 0.4) {
        for (int k = 0; k < 1000; k++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            size_t i = seed % 512;
            free(slot[i]);
            slot[i] = malloc(16 + (seed >> 20) % 1009);
            memset(slot[i], 1, 16);
        }
    }
    printf("RSS_LATER %ld\n", status_kib("VmRSS:"));
    for (int i = 0; i < 512; i++) free(slot[i]);
    pthread_mutex_lock(&mu);
    wake = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < 8; i++) pthread_join(t[i], 0);
    return 0;
}

static unsigned char pattern(uintptr_t p, size_t i) { return (unsigned char)((p >> 12) * 13 + i * 7 + 1); }

static void *many_worker(void *arg) {
    uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 7;
    unsigned char *p[32] = {0};
    size_t len[32] = {0};
    pthread_barrier_wait(&start);
    for (int step = 0; step < 3000; step++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        int k = (int)(seed % 32);
        if (p[k]) {
            for (size_t b = 0; b < len[k]; b += 61)
                if (p[k][b] != pattern((uintptr_t)p[k], b)) {
                    printf("FAIL: object %p damaged at %zu\n", (void *)p[k], b);
                    exit(1);
                }
            free(p[k]);
        }
        len[k] = 2100 + (seed >> 24) % 900;
        p[k] = malloc(len[k]);
        if (!p[k]) {
            printf("FAIL: malloc\n");
            exit(1);
        }
        for (size_t b = 0; b < len[k]; b += 61) p[k][b] = pattern((uintptr_t)p[k], b);
    }
    for (int k = 0; k < 32; k++) free(p[k]);
    return 0;
}

static int many(int n) {
    pthread_t *t = calloc((size_t)n, sizeof *t);
    pthread_barrier_init(&start, 0, (unsigned)n);
    for (long i = 0; i < n; i++)
        if (pthread_create(&t[i], 0, many_worker, (void *)i)) {
            printf("FAIL: pthread_create %ld\n", i);
            return 1;
        }
    for (int i = 0; i < n; i++) pthread_join(t[i], 0);
    free(t);
    printf("POOL_KIB %ld\nRSS_PEAK %ld\n", pool_kib(), status_kib("VmHWM:"));
    return 0;
}

static void *few_worker(void *arg) {
    (void)arg;
    void *p[8];
    for (int i = 0; i < 8; i++) {
        p[i] = malloc(16 + (size_t)i * 100);
        if (!p[i]) {
            printf("FAIL: malloc\n");
            exit(1);
        }
        memset(p[i], i, 16);
    }
    pthread_barrier_wait(&start);
    pthread_barrier_wait(&start);
    for (int i = 0; i < 8; i++) free(p[i]);
    return 0;
}

static int few(int n) {
    pthread_t *t = calloc((size_t)n, sizeof *t);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    pthread_barrier_init(&start, 0, (unsigned)n + 1);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], &attr, few_worker, 0)) {
            printf("FAIL: pthread_create %d\n", i);
            return 1;
        }
    pthread_barrier_wait(&start);
    printf("RSS_ALL %ld\n", status_kib("VmRSS:"));
    pthread_barrier_wait(&start);
    for (int i = 0; i < n; i++) pthread_join(t[i], 0);
    free(t);
    return 0;
}

int main(int argc, char **argv) {
    int rc = 1;
    if (argc >= 2 && !strcmp(argv[1], "idle")) rc = idle();
    else if (argc >= 3 && !strcmp(argv[1], "many")) rc = many(atoi(argv[2]));
    else if (argc >= 3 && !strcmp(argv[1], "threads")) rc = few(atoi(argv[2]));
    else printf("usage: held idle | held many THREADS | held threads THREADS\n");
    if (rc == 0) printf("OK\n");
    return rc;
}
