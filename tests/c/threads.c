/*
 * Multi-threaded allocation with cross-thread frees.
 *
 * Rounds of 8 threads are created and joined in a loop (so thread exit runs with blocks still
 * live). Threads allocate blocks, stamp them with a pattern and pass them through a shared queue;
 * whichever thread takes a block out checks its pattern, maybe reallocates it, and frees it. Short
 * lived helper threads allocate a little and exit. Prints OK and exits 0 on success; prints
 * `FAIL: <what>` and exits 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NTHREADS 8
#define ROUNDS 5
#define OPS 12000
#define QCAP 2048
#define NSHORT 40

static void fail(const char *what, unsigned long a, unsigned long b) {
    fprintf(stderr, "FAIL: %s (%lu, %lu)\n", what, a, b);
    fflush(stderr);
    _exit(1);
}

struct hdr {
    uint32_t magic;
    uint32_t size;
    uint64_t seed;
};
#define MAGIC 0x6e65766du

static unsigned char body_byte(uint64_t seed, size_t i) { return (unsigned char)(seed * 131 + i * 7); }

static void stamp(void *p, size_t n, uint64_t seed) {
    struct hdr *h = p;
    h->magic = MAGIC;
    h->size = (uint32_t)n;
    h->seed = seed;
    unsigned char *c = p;
    for (size_t i = sizeof *h; i < n; i++)
        c[i] = body_byte(seed, i);
}

/* Checks the block and returns its size. */
static size_t check(const void *p) {
    const struct hdr *h = p;
    if (h->magic != MAGIC)
        fail("block header magic damaged", (unsigned long)(uintptr_t)p, h->magic);
    const unsigned char *c = p;
    for (size_t i = sizeof *h; i < h->size; i++)
        if (c[i] != body_byte(h->seed, i))
            fail("block body damaged (size, offset)", h->size, i);
    return h->size;
}

static uint64_t next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

static size_t pick_size(uint64_t *rng) {
    uint64_t r = next(rng);
    uint64_t d = r % 100;
    size_t n;
    if (d < 75)
        n = r >> 20 & 255;
    else if (d < 95)
        n = 256 + (r >> 20) % 6000;
    else if (d < 99)
        n = 6256 + (r >> 20) % 60000;
    else
        n = 70000 + (r >> 20) % 200000;
    return n < sizeof(struct hdr) ? sizeof(struct hdr) : n;
}

/* The shared queue. */
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static void *queue[QCAP];
static size_t qhead, qlen;

/* Pushes p; when full, returns the oldest entry for the caller to free instead. */
static void *push(void *p) {
    void *out = NULL;
    pthread_mutex_lock(&qlock);
    if (qlen == QCAP) {
        out = queue[qhead];
        qhead = (qhead + 1) % QCAP;
        qlen--;
    }
    queue[(qhead + qlen) % QCAP] = p;
    qlen++;
    pthread_mutex_unlock(&qlock);
    return out;
}

static void *pop(void) {
    void *p = NULL;
    pthread_mutex_lock(&qlock);
    if (qlen) {
        p = queue[qhead];
        qhead = (qhead + 1) % QCAP;
        qlen--;
    }
    pthread_mutex_unlock(&qlock);
    return p;
}

static void *alloc_stamped(uint64_t *rng) {
    size_t n = pick_size(rng);
    uint64_t how = next(rng) % 8;
    void *p;
    if (how < 5) {
        p = malloc(n);
    } else if (how < 7) {
        p = calloc(1, n);
        if (p) {
            const unsigned char *c = p;
            for (size_t i = 0; i < n; i++)
                if (c[i])
                    fail("calloc memory not zeroed (size, offset)", n, i);
        }
    } else {
        size_t al = (size_t)32 << (next(rng) % 8);
        if (posix_memalign(&p, al, n) != 0)
            p = NULL;
        if (p && ((uintptr_t)p & (al - 1)))
            fail("posix_memalign misaligned (align, addr)", al, (uintptr_t)p);
    }
    if (!p)
        fail("allocation returned NULL (size)", n, 0);
    if ((uintptr_t)p & 15)
        fail("block not 16-byte aligned", (uintptr_t)p, n);
    stamp(p, n, next(rng));
    return p;
}

static void release(void *p, uint64_t *rng) {
    check(p);
    if (next(rng) % 4 == 0) {
        size_t n = pick_size(rng);
        size_t old = ((struct hdr *)p)->size;
        uint64_t seed = ((struct hdr *)p)->seed;
        void *q = realloc(p, n);
        if (!q)
            fail("realloc returned NULL (size)", n, 0);
        /* the kept prefix must be intact */
        size_t keep = old < n ? old : n;
        const unsigned char *c = q;
        for (size_t i = sizeof(struct hdr); i < keep; i++)
            if (c[i] != body_byte(seed, i))
                fail("realloc lost contents (old, new)", old, n);
        stamp(q, n, next(rng));
        p = q;
        check(p);
    }
    free(p);
}

struct worker_arg {
    int id;
    int round;
};

static void *worker(void *argp) {
    struct worker_arg *a = argp;
    uint64_t rng = 0x1234567ull + (uint64_t)a->id * 7919 + (uint64_t)a->round * 104729;
    enum { LOCAL = 64 };
    void *local[LOCAL] = {0};
    for (int op = 0; op < OPS; op++) {
        uint64_t r = next(&rng) % 10;
        if (r < 4) {
            void *old = push(alloc_stamped(&rng));
            if (old)
                release(old, &rng);
        } else if (r < 7) {
            void *p = pop();
            if (p)
                release(p, &rng);
        } else {
            int s = (int)(next(&rng) % LOCAL);
            if (local[s]) {
                release(local[s], &rng);
                local[s] = NULL;
            } else {
                local[s] = alloc_stamped(&rng);
            }
        }
    }
    for (int s = 0; s < LOCAL; s++)
        if (local[s]) {
            /* Leave some of our blocks to other threads, free the rest here. */
            if (s % 2) {
                void *old = push(local[s]);
                if (old)
                    release(old, &rng);
            } else {
                release(local[s], &rng);
            }
        }
    return NULL;
}

static void *short_lived(void *argp) {
    uint64_t rng = (uint64_t)(uintptr_t)argp * 2654435761u + 1;
    void *mine[8];
    for (int i = 0; i < 8; i++)
        mine[i] = alloc_stamped(&rng);
    for (int i = 0; i < 8; i++) {
        if (i < 4) {
            release(mine[i], &rng);
        } else {
            void *old = push(mine[i]);
            if (old)
                release(old, &rng);
        }
    }
    void *p = pop();
    if (p)
        release(p, &rng);
    return NULL;
}

int main(void) {
    alarm(60);
    uint64_t rng = 99;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_t th[NTHREADS];
        struct worker_arg args[NTHREADS];
        for (int i = 0; i < NTHREADS; i++) {
            args[i].id = i;
            args[i].round = round;
            int rc = pthread_create(&th[i], NULL, worker, &args[i]);
            if (rc)
                fail("pthread_create", (unsigned long)rc, 0);
        }
        /* Meanwhile, many short-lived threads come and go. */
        for (int i = 0; i < NSHORT; i++) {
            pthread_t t;
            int rc = pthread_create(&t, NULL, short_lived, (void *)(uintptr_t)(round * 1000 + i + 1));
            if (rc)
                fail("pthread_create", (unsigned long)rc, 0);
            pthread_join(t, NULL);
        }
        for (int i = 0; i < NTHREADS; i++)
            pthread_join(th[i], NULL);
        /* The main thread frees a share of what the exited threads left behind. */
        for (int i = 0; i < 200; i++) {
            void *p = pop();
            if (!p)
                break;
            release(p, &rng);
        }
    }
    /* A burst of many threads alive at the same time. */
    enum { BURST = 64 };
    pthread_t burst[BURST];
    for (int i = 0; i < BURST; i++) {
        int rc = pthread_create(&burst[i], NULL, short_lived, (void *)(uintptr_t)(900000 + i));
        if (rc)
            fail("pthread_create", (unsigned long)rc, 0);
    }
    for (int i = 0; i < BURST; i++)
        pthread_join(burst[i], NULL);
    void *p;
    size_t left = 0;
    while ((p = pop()) != NULL) {
        release(p, &rng);
        left++;
    }
    if (left == 0)
        fail("queue unexpectedly empty at the end", 0, 0);
    printf("OK\n");
    return 0;
}
