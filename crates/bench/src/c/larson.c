/* larson: a larson-style server simulation. Each thread owns an array of live objects and
 * replaces random ones with new objects of random sizes; one replaced object in 8 is handed to
 * the next thread (through a small locked mailbox), which frees it: cross-thread frees.
 * The total work is fixed and split between the threads.
 * usage: larson THREADS TOTAL_OPS SLOTS   prints: RESULT ops_per_sec=<float> */
#include <pthread.h>
#include <string.h>
#include "common.h"

#define BOX 4096

struct mailbox {
    pthread_mutex_t lock;
    size_t n;
    void *items[BOX];
};

static long nthreads, ops_per_thread, slots;
static struct mailbox *boxes;
static pthread_barrier_t start_barrier;

static void drain(struct mailbox *b) {
    void *local[BOX];
    pthread_mutex_lock(&b->lock);
    size_t n = b->n;
    memcpy(local, b->items, n * sizeof(void *));
    b->n = 0;
    pthread_mutex_unlock(&b->lock);
    for (size_t i = 0; i < n; i++) free(local[i]);
}

static void *worker(void *arg) {
    long id = (long)arg;
    uint64_t seed = 0x1234567ULL + (uint64_t)id * 0x9E3779B97F4A7C15ULL;
    void **live = xmalloc(sizeof(void *) * (size_t)slots);
    for (long i = 0; i < slots; i++) {
        size_t n = 8 + rng_next(&seed) % 505;
        live[i] = xmalloc(n);
        memset(live[i], 0, n < 64 ? n : 64);
    }
    struct mailbox *next = &boxes[(id + 1) % nthreads];
    pthread_barrier_wait(&start_barrier);
    for (long i = 0; i < ops_per_thread; i++) {
        uint64_t r = rng_next(&seed);
        long slot = (long)(r % (uint64_t)slots);
        void *old = live[slot];
        int handed = 0;
        if ((r >> 40) % 8 == 0) {
            pthread_mutex_lock(&next->lock);
            if (next->n < BOX) {
                next->items[next->n++] = old;
                handed = 1;
            }
            pthread_mutex_unlock(&next->lock);
        }
        if (!handed) free(old);
        size_t n = 8 + (r >> 16) % 505;
        live[slot] = xmalloc(n);
        memset(live[slot], (int)i, n < 64 ? n : 64);
        if (i % 64 == 0) drain(&boxes[id]);
    }
    pthread_barrier_wait(&start_barrier);
    drain(&boxes[id]);
    for (long i = 0; i < slots; i++) free(live[i]);
    free(live);
    return NULL;
}

int main(int argc, char **argv) {
    nthreads = arg_long(argc, argv, 1, 1);
    long total = arg_long(argc, argv, 2, 4000000);
    slots = arg_long(argc, argv, 3, 1000);
    ops_per_thread = total / nthreads;
    boxes = calloc((size_t)nthreads, sizeof *boxes);
    if (!boxes) return 3;
    for (long i = 0; i < nthreads; i++) pthread_mutex_init(&boxes[i].lock, NULL);
    pthread_barrier_init(&start_barrier, NULL, (unsigned)nthreads + 1);
    pthread_t *tids = xmalloc(sizeof(pthread_t) * (size_t)nthreads);
    for (long i = 0; i < nthreads; i++)
        if (pthread_create(&tids[i], NULL, worker, (void *)i)) return 3;
    pthread_barrier_wait(&start_barrier);
    double t0 = now_s();
    pthread_barrier_wait(&start_barrier);
    double t1 = now_s();
    for (long i = 0; i < nthreads; i++) pthread_join(tids[i], NULL);
    for (long i = 0; i < nthreads; i++) drain(&boxes[i]);
    printf("RESULT ops_per_sec=%.1f\n", (double)(ops_per_thread * nthreads) / (t1 - t0));
    free(tids);
    free(boxes);
    return 0;
}
