/* Sweeps (prevent mode): dead slots of pinned groups are reused only when no pointer to them
 * is left.
 * Usage: sweep <case>
 *   reuse      allocates 40000 objects of 64 bytes, keeps every fourth (each group of a page
 *              then holds a live object, which pins it), frees the rest, and keeps dangling pointers to a few of the freed ones:
 *              in a global, in a local, in a live heap object, in an anonymous mmap (made
 *              read-only afterwards), as an interior pointer, and in a region made PROT_NONE.
 *              Then 200000 new objects are allocated (and freed), each filled with a
 *              pattern; with SWEEP_WAIT_MS=T in the environment, more after them, until
 *              2000 landed on freed slots or T ms passed (a machine busy with other work
 *              may run the first sweep only after the 200000). Checks: no new object is ever placed at a kept dangling address (prints
 *              KEPT NEVER REUSED, or REUSED <where>, exit 1); some new objects reuse freed slots
 *              in place (prints IN PLACE n); writes through every kept pointer leave the live
 *              new objects intact (prints INTACT, or CORRUPTED, exit 1).
 *   threads    the same while other threads run, which sweeps hold still: one keeps dangling
 *              pointers to freed objects only in a register, in a vector register (and in
 *              the upper half of a 256-bit one, where the processor has AVX), on its stack
 *              and in its thread-local storage; one allocates and frees all the time (so it
 *              is often inside the allocator when a sweep begins); others wait in
 *              nanosleep, read(2) on a pipe, poll(2) with a timeout and epoll_wait(2)
 *              without one, none of which may fail with EINTR (prints EINTR <call>, exit 1).
 *              The same checks as `reuse`.
 *   vfork      the same as `reuse` while a second thread waits in vfork(2) for a child that
 *              exits only once the allocations are over: no stop reaches a vfork parent, so
 *              every sweep that tries to hold the threads gives up after a second, and the
 *              program goes on.
 *   sleeping   the same as `reuse` while a second thread sleeps (with sweep_threads=0, no
 *              sweep may run: IN PLACE 0). "undumpable-sleeping": the same in a process that
 *              made itself non-dumpable (unprivileged, it may not hold its threads).
 *   joined     first allocates and frees 4 MiB of small objects while a second thread waits,
 *              then joins it, waits 150 ms and goes on as `reuse`: sweeps must run again
 *              once the process is single-threaded.
 *   shrunk     first builds a 48 MiB heap of small objects (too big to sweep with
 *              sweep_max_live=32) and frees it, then the same as `reuse`: once the heap
 *              shrank, sweeps must run again.
 *   grown      first allocates small objects for 300 ms, 1000 at a time a millisecond apart,
 *              and frees none (checks of the heap find nothing pinned, and are put off while
 *              nothing is freed), then frees them all and goes on as `reuse`: the frees
 *              must bring the checks, and sweeps, back.
 *   undumpable the same in a process that made itself non-dumpable (prctl(PR_SET_DUMPABLE,
 *              0)), with the no-access holder left readable; "undumpable-noaccess" with it
 *              made no-access as in `reuse`; "undumpable-filegap" as "undumpable" with a
 *              no-access private mapping of a file in the page cache besides (a library's gap
 *              between its segments); "undumpable-filenoaccess" as "undumpable-noaccess" with
 *              the holder a private mapping of a file, written (copied on write) then made
 *              no-access.
 *   churn N    N allocations of 0..1024 bytes, 1 % long-lived, every object filled with a
 *              pattern of its own and checked when freed; 64 dangling pointers to freed
 *              objects are kept in a global array (replaced now and then) and no allocation
 *              may return one of them while it is kept; a timer signal (1 ms) allocates and
 *              frees in its handler; the process forks 8 times on the way (each child runs
 *              the same checks for a while). Prints CHURN OK (exit 0) or what failed (exit 1).
 *   churn N signals|nosignals THREADS   the same on THREADS threads (up to 8), each with rings
 *              and kept pointers of its own, N allocations each; the main thread's churn
 *              forks (the others' kept pointers are checked too).
 *   churn N nosignals   the same without the timer: for allocators whose malloc is not
 *              async-signal-safe (glibc's may abort when the handler interrupts it).
 *   queued     three threads churn (2 % long-lived) while the main thread queues 60000
 *              real-time signals to them (rt_tgsigqueueinfo, each naming its target), whose
 *              handler allocates and frees: every signal is handled exactly once, though
 *              sweeps hold the threads meanwhile (a signal that stops a held thread is handed
 *              back to it). Prints SIGNALS OK, or SIGNALS LOST (exit 1).
 *   heap-held  allocates 400000 objects of 64 bytes, keeps every fourth and frees the rest;
 *              each kept object holds the only pointer to the freed object after it (100000
 *              dangling pointers, held only in live heap objects all over the heap, which a
 *              sweep reads partly through a helper task). Then 200000 new objects are
 *              allocated (and freed): none may be placed at a held address (prints HELD NEVER
 *              REUSED, or HELD REUSED, exit 1); the other freed slots are reused in place
 *              (prints IN PLACE n); the kept objects still hold their pointers (else prints
 *              CORRUPTED, exit 1). "heap-held-dropped": the same after the pages of the kept
 *              objects lost their page-table entries (madvise MADV_DONTNEED), so that the
 *              sweep meets them unmapped.
 *              "heap-held-sleeping": the same while a second thread sleeps, so that sweeps
 *              hold it and the holder task reads its share of the heap (or none, with
 *              sweep_helper=0).
 *   chained    allocates 400000 objects of 64 bytes and keeps every fourth; the one after each
 *              kept object is freed, and a dangling pointer to it kept in a global array,
 *              while its stale contents hold the only pointer to the next object, freed too.
 *              Then 200000 new objects are allocated (and freed): none may be placed where a
 *              pointer read through a kept dangling pointer leads (prints CHAINED NEVER REUSED,
 *              or CHAINED REUSED, exit 1); other freed slots are reused in place (IN PLACE n).
 *   chained-page  the same, but the freed objects holding the pointers are page objects
 *              (4096 bytes), fewer than a revocation batch, and the program only allocates
 *              afterwards: sweeps find them freed but not yet revoked, still readable.
 *   unpinned   allocates 40000 objects of 64 bytes and keeps them all (every group whole),
 *              then for 200 ms allocates and frees 64-byte objects at once: no group holds a
 *              dead slot beside a live one for long, so checks find nothing worth a sweep.
 *              Prints UNPINNED OK.
 *   kept N     N allocations of 1..256 bytes, each replacing one of 64 short-lived objects at
 *              random, and after every 1000th one object of 32 bytes kept for ever (a cache
 *              that only grows): nearly every group of their size class holds one for good.
 *              At N/2 and at N prints KEPT <allocations> <pool KiB> <VmPTE KiB>; then KEPT OK.
 *   futex-waits three threads wait on heap objects, whose pages a task sharing the address
 *              space (not a thread: sweeps do not hold it) pages out every 100 µs (madvise
 *              MADV_PAGEOUT) while the main thread allocates as `reuse` does, 12
 *              times over (so that sweeps hold the waiting threads, and let them go to wait
 *              again): one in sem_wait, one in pthread_cond_wait, one in sem_timedwait
 *              with a long timeout, kept in the same heap object (on another page). The
 *              kernel reads the futex word (and the timeout) again when a wait goes on, and
 *              glibc aborts when that fails ("The futex facility returned an unexpected
 *              error code").
 *              Then each is woken and joined; prints FUTEX WAITS OK.
 *   futex-cancel the same, then each waiter is cancelled (pthread_cancel) instead of woken,
 *              while it waits where a sweep let it go on: each must end cancelled, its
 *              cleanup handler run; prints FUTEX CANCEL OK.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "pool_probe.h"

#define N 40000
#define SIZE 64
#define NEW 200000
#define LIVE_NEW 2000

static void *objs[N];
static void *kept_global;
/* Addresses of the freed objects, hidden from the scan (a sweep treats every word that looks
 * like a pointer to a dead slot as one, and would reuse none of them). */
#define HIDE(a) ((uintptr_t)(a) ^ 0xa5a5000000000000ull)
static uintptr_t freed[N];
static size_t nfreed;
/* The kept dangling pointers, hidden the same way, to compare new addresses with: only their
 * holders have them in the clear. */
static uintptr_t kept_hidden[16];
static uintptr_t *volatile holder;

static int cmp(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static int was_freed(uintptr_t p) {
    uintptr_t h = HIDE(p);
    return bsearch(&h, freed, nfreed, sizeof freed[0], cmp) != NULL;
}

static void *sleeper(void *arg) {
    (void)arg;
    sleep(60);
    return NULL;
}

static int gate[2];

/* --- threads: pointers held by a running thread, and threads blocked in system calls --- */
#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>

#define KEY 0x5a5a5a5a00000000ull
static volatile int threads_stop, holder_ready, eintr;
/* The thread-held pointers, hidden until the holder takes them. */
static volatile uintptr_t for_register, for_vector, for_wide, for_stack, for_tls;
static __thread volatile uintptr_t in_tls;

static void *holder_thread(void *arg) {
    (void)arg;
    volatile uintptr_t on_stack = for_stack ^ KEY;
    (void)on_stack;
    in_tls = for_tls ^ KEY;
    int avx = __builtin_cpu_supports("avx");
    /* r12 holds one pointer, xmm9 another, the upper half of ymm11 a third (with AVX); the
     * loop spins until told to stop, touching no register that holds them. */
#define HOLD_IN_R12_AND_XMM9                                                                    \
    "mov %[r], %%r12\n\t"                                                                        \
    "xor %[key], %%r12\n\t"                                                                      \
    "mov %[x], %%rax\n\t"                                                                        \
    "xor %[key], %%rax\n\t"                                                                      \
    "movq %%rax, %%xmm9\n\t"
#define SPIN_UNTIL_STOP                                                                         \
    "xor %%eax, %%eax\n\t"                                                                       \
    "movl $1, %[ready]\n\t"                                                                      \
    "1: pause\n\t"                                                                               \
    "cmpl $0, %[stop]\n\t"                                                                       \
    "je 1b\n\t"                                                                                  \
    "xor %%r12d, %%r12d\n\t"
    if (avx)
        __asm__ volatile(HOLD_IN_R12_AND_XMM9 "mov %[y], %%rax\n\t"
                                              "xor %[key], %%rax\n\t"
                                              "vmovq %%rax, %%xmm10\n\t"
                                              "vinsertf128 $1, %%xmm10, %%ymm11, %%ymm11\n\t"
                                              "vpxor %%xmm10, %%xmm10, %%xmm10\n\t" SPIN_UNTIL_STOP
                                              "vpxor %%xmm9, %%xmm9, %%xmm9\n\t"
                                              "vpxor %%xmm11, %%xmm11, %%xmm11\n\t"
                         : [ready] "=m"(holder_ready)
                         : [r] "r"(for_register), [x] "r"(for_vector), [y] "r"(for_wide), [key] "r"(KEY),
                           [stop] "m"(threads_stop)
                         : "rax", "r12", "xmm9", "xmm10", "xmm11", "memory");
    else
        __asm__ volatile(HOLD_IN_R12_AND_XMM9 SPIN_UNTIL_STOP "pxor %%xmm9, %%xmm9\n\t"
                         : [ready] "=m"(holder_ready)
                         : [r] "r"(for_register), [x] "r"(for_vector), [key] "r"(KEY), [stop] "m"(threads_stop)
                         : "rax", "r12", "xmm9", "memory");
    on_stack = 0;
    in_tls = 0;
    return NULL;
}

static void *churn_thread(void *arg) {
    (void)arg;
    uint64_t seed = 88172645463325252ull;
    void *ring[64] = {0};
    for (unsigned long i = 0; !threads_stop; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        int k = (int)(i % 64);
        free(ring[k]);
        ring[k] = malloc(16 + seed % 500);
    }
    for (int k = 0; k < 64; k++)
        free(ring[k]);
    return NULL;
}

static void *sleep_thread(void *arg) {
    (void)arg;
    while (!threads_stop) {
        struct timespec ts = {0, 200 * 1000 * 1000};
        if (nanosleep(&ts, NULL) != 0 && errno == EINTR)
            eintr = 1;
    }
    return NULL;
}

static int stop_pipe[2], epoll_pipe[2];

static void *read_thread(void *arg) {
    (void)arg;
    char c;
    if (read(stop_pipe[0], &c, 1) != 1)
        eintr = errno == EINTR ? 2 : 4;
    return NULL;
}

static void *poll_thread(void *arg) {
    (void)arg;
    while (!threads_stop) {
        struct pollfd p = {.fd = stop_pipe[0], .events = 0};
        if (poll(&p, 1, 200) < 0 && errno == EINTR)
            eintr = 3;
    }
    return NULL;
}

static void *epoll_thread(void *arg) {
    (void)arg;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, epoll_pipe[0], &ev) != 0)
        exit(2);
    while (!threads_stop)
        if (epoll_wait(ep, &ev, 1, -1) < 0 && errno == EINTR)
            eintr = 5;
    close(ep);
    return NULL;
}

static volatile int vforking;
/* Written when the allocations are over: the vfork child waits for it (at most a minute). */
static int vfork_release[2];

static void *vfork_thread(void *arg) {
    (void)arg;
    vforking = 1;
    pid_t pid = vfork();
    if (pid == 0) {
        struct pollfd p = {.fd = vfork_release[0], .events = POLLIN};
        poll(&p, 1, 60 * 1000);
        _exit(0);
    }
    int st;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? NULL : arg;
}

#define OTHERS 6
static pthread_t others[OTHERS];

static void start_threads(void) {
    void *(*f[OTHERS])(void *) = {holder_thread, churn_thread, sleep_thread, read_thread, poll_thread, epoll_thread};
    if (pipe(stop_pipe) != 0 || pipe(epoll_pipe) != 0)
        exit(2);
    for (int k = 0; k < OTHERS; k++)
        if (pthread_create(&others[k], NULL, f[k], NULL) != 0) {
            perror("thread");
            exit(2);
        }
}

/* Stops the threads; false when a system call failed with EINTR. */
static int stop_threads(void) {
    threads_stop = 1;
    if (write(stop_pipe[1], "x", 1) != 1 || write(epoll_pipe[1], "x", 1) != 1)
        exit(2);
    for (int k = 0; k < OTHERS; k++)
        pthread_join(others[k], NULL);
    const char *call[] = {"", "nanosleep", "read", "poll", "read (other error)", "epoll_wait"};
    if (eintr) {
        printf("EINTR %s\n", call[eintr]);
        return 0;
    }
    return 1;
}

static void *waiter(void *arg) {
    (void)arg;
    char c;
    return read(gate[0], &c, 1) == 1 ? NULL : arg;
}

/* A phase of allocations while a second thread runs; then the thread ends. */
static void with_a_thread_then_alone(void) {
    pthread_t t;
    if (pipe(gate) != 0 || pthread_create(&t, NULL, waiter, NULL) != 0) {
        perror("thread");
        exit(2);
    }
    size_t n = (4u << 20) / SIZE;
    void **objs_then = malloc(n * sizeof *objs_then);
    for (size_t i = 0; i < n; i++)
        objs_then[i] = malloc(SIZE);
    for (size_t i = 0; i < n; i++)
        free(objs_then[i]);
    free(objs_then);
    if (write(gate[1], "x", 1) != 1 || pthread_join(t, NULL) != 0) {
        perror("join");
        exit(2);
    }
    usleep(150000);
}

/* A phase with a big live heap (48 MiB of 64-byte objects), all freed at its end. */
static void swell_and_shrink(void) {
    size_t n = (48u << 20) / SIZE;
    void **big = malloc(n * sizeof *big);
    for (size_t i = 0; i < n; i++) {
        big[i] = malloc(SIZE);
        memset(big[i], 0x22, SIZE);
    }
    for (size_t i = 0; i < n; i++)
        free(big[i]);
    free(big);
}

/* The `grown` case's first phase: for 300 ms, 1000 objects of SIZE at a time, a millisecond
 * apart, none freed (checks of the heap meanwhile find nothing pinned, and nothing freed
 * since makes another worth its time); then all freed at once. */
static void grow_slowly(void) {
    size_t cap = 400000, n = 0;
    void **grown = malloc(cap * sizeof *grown);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 1000 && n < cap; i++, n++) {
            grown[n] = malloc(SIZE);
            memset(grown[n], 0x44, SIZE);
        }
        usleep(1000);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 300);
    for (size_t i = 0; i < n; i++)
        free(grown[i]);
    free(grown);
}

/* --- churn --- */
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>

#define RING 1024
#define LONG_RING 20000
#define KEPT_DANGLING 64
#define MAX_CHURNERS 8
/* One churning thread's state. */
struct churner {
    unsigned char *ring[RING], *long_ring[LONG_RING];
    size_t ring_n[RING], long_n[LONG_RING];
    void *volatile dangling[KEPT_DANGLING]; /* visible to the scan (volatile: never read, but it must be stored) */
    uintptr_t dangling_hidden[KEPT_DANGLING];
    uint64_t seed;
    long n;
    int forks; /* whether this one forks on the way (the first) */
};
static struct churner churners[MAX_CHURNERS];
static volatile sig_atomic_t handled;

static unsigned char pattern(uintptr_t p, size_t i) { return (unsigned char)((p >> 4) * 131 + i * 7 + 1); }

static void fill(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        p[i] = pattern((uintptr_t)p, i);
}

static int intact(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern((uintptr_t)p, i))
            return 0;
    return 1;
}

static void on_alarm(int sig) {
    (void)sig;
    void *p = malloc(48);
    if (p)
        memset(p, 0x33, 48);
    free(p);
    handled++;
}

/* Frees `p` (n bytes) after checking it; sometimes keeps it as a dangling pointer. */
static int retire(struct churner *c, unsigned char *p, size_t n, uint64_t r) {
    if (!p)
        return 1;
    if (!intact(p, n)) {
        printf("CORRUPTED live object %p (%zu bytes)\n", (void *)p, n);
        return 0;
    }
    free(p);
    if (r % 97 == 0) {
        int k = (int)((r >> 8) % KEPT_DANGLING);
        c->dangling[k] = p;
        c->dangling_hidden[k] = HIDE(p);
    }
    return 1;
}

/* Whether `p` is one of the dangling pointers any churner keeps. */
static int kept_by_any(void *p, int nchurners) {
    for (int t = 0; t < nchurners; t++)
        for (int k = 0; k < KEPT_DANGLING; k++)
            if (churners[t].dangling_hidden[k] && HIDE(p) == churners[t].dangling_hidden[k])
                return 1;
    return 0;
}

static int nchurners = 1;

/* One churner's run: 0 when every check held. */
static int churn_one(struct churner *c) {
    int child = 0;
    long n = c->n;
    for (long i = 0; i < n; i++) {
        c->seed ^= c->seed << 13;
        c->seed ^= c->seed >> 7;
        c->seed ^= c->seed << 17;
        uint64_t seed = c->seed;
        size_t sz = (size_t)(seed >> 20) % 1025;
        unsigned char *p = malloc(sz);
        if (sz && !p) {
            printf("MALLOC FAILED\n");
            return 1;
        }
        /* In a forked child only this churner's pointers are known (the others' threads are
         * not there, but their memory is, and so are their kept pointers). */
        if (kept_by_any(p, nchurners)) {
            printf("REUSED a kept dangling pointer %p\n", (void *)p);
            return 1;
        }
        fill(p, sz);
        if ((seed >> 4) % 100 == 0) {
            size_t k = (size_t)(seed >> 12) % LONG_RING;
            if (!retire(c, c->long_ring[k], c->long_n[k], seed))
                return 1;
            c->long_ring[k] = p;
            c->long_n[k] = sz;
        } else {
            size_t k = (size_t)(seed >> 12) % RING;
            if (!retire(c, c->ring[k], c->ring_n[k], seed))
                return 1;
            c->ring[k] = p;
            c->ring_n[k] = sz;
        }
        if (c->forks && !child && i > 0 && i % (n / 9) == 0) {
            pid_t pid = fork();
            if (pid == 0) {
                child = 1;
                n = i + n / 20; /* the child goes on for a while, then checks and exits */
            } else if (pid > 0) {
                int st;
                waitpid(pid, &st, 0);
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                    printf("CHILD FAILED (status %d)\n", st);
                    return 1;
                }
            }
        }
    }
    for (int k = 0; k < RING; k++)
        if (c->ring[k] && !intact(c->ring[k], c->ring_n[k])) {
            printf("CORRUPTED at the end\n");
            return 1;
        }
    for (int k = 0; k < LONG_RING; k++)
        if (c->long_ring[k] && !intact(c->long_ring[k], c->long_n[k])) {
            printf("CORRUPTED at the end\n");
            return 1;
        }
    if (child)
        _exit(0);
    return 0;
}

static void *churn_main(void *arg) { return churn_one(arg) ? arg : NULL; }

/* `threads` churners, the first on the main thread (it forks now and then). */
static int churn(long n, int signals, int threads) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    if (signals)
        setitimer(ITIMER_REAL, &it, NULL);
    nchurners = threads < 1 ? 1 : threads > MAX_CHURNERS ? MAX_CHURNERS : threads;
    pthread_t t[MAX_CHURNERS];
    for (int k = 0; k < nchurners; k++) {
        churners[k].seed = 0x1234567 + 7919 * (uint64_t)k;
        churners[k].n = n;
        churners[k].forks = k == 0;
    }
    for (int k = 1; k < nchurners; k++)
        if (pthread_create(&t[k], NULL, churn_main, &churners[k]) != 0) {
            perror("thread");
            return 2;
        }
    int bad = churn_one(&churners[0]);
    for (int k = 1; k < nchurners; k++) {
        void *r;
        pthread_join(t[k], &r);
        bad |= r != NULL;
    }
    it.it_value.tv_usec = it.it_interval.tv_usec = 0;
    setitimer(ITIMER_REAL, &it, NULL);
    if (bad)
        return 1;
    printf("CHURN OK (%d signals handled)\n", (int)handled);
    return 0;
}

/* --- queued: real-time signals to threads that sweeps hold --- */
#include <sys/syscall.h>
#define QUEUED_THREADS 3
static volatile long queued_got[QUEUED_THREADS];
static pid_t queued_tids[QUEUED_THREADS];
static volatile int queued_stop;

static void on_queued(int sig, siginfo_t *si, void *ctx) {
    (void)sig;
    (void)ctx;
    queued_got[si->si_value.sival_int]++;
    free(malloc(32));
}

static void *queued_worker(void *arg) {
    int me = (int)(intptr_t)arg;
    queued_tids[me] = (pid_t)syscall(SYS_gettid);
    static __thread void *keep[512];
    uint64_t s = 12345 + (uint64_t)me;
    while (!queued_stop) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        void *p = malloc(s % 900);
        if (s % 50 == 0) {
            free(keep[(s >> 9) % 512]);
            keep[(s >> 9) % 512] = p;
        } else {
            free(p);
        }
    }
    return NULL;
}

static int queued(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_queued;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGRTMIN, &sa, NULL);
    pthread_t t[QUEUED_THREADS];
    for (intptr_t i = 0; i < QUEUED_THREADS; i++)
        if (pthread_create(&t[i], NULL, queued_worker, (void *)i) != 0)
            return 2;
    for (int i = 0; i < QUEUED_THREADS; i++)
        while (!__atomic_load_n(&queued_tids[i], __ATOMIC_ACQUIRE))
            usleep(1000);
    usleep(300000);
    long sent[QUEUED_THREADS] = {0};
    for (int k = 0; k < 60000; k++) {
        int i = k % QUEUED_THREADS;
        siginfo_t si;
        memset(&si, 0, sizeof si);
        si.si_signo = SIGRTMIN;
        si.si_code = SI_QUEUE;
        si.si_value.sival_int = i;
        si.si_pid = getpid();
        si.si_uid = getuid();
        if (syscall(SYS_rt_tgsigqueueinfo, getpid(), queued_tids[i], SIGRTMIN, &si) == 0)
            sent[i]++;
        else
            usleep(100); /* the queue is full: let the thread catch up */
        if (k % 64 == 0)
            usleep(50);
    }
    usleep(500000);
    queued_stop = 1;
    for (int i = 0; i < QUEUED_THREADS; i++)
        pthread_join(t[i], NULL);
    int ok = 1;
    for (int i = 0; i < QUEUED_THREADS; i++) {
        if (sent[i] != queued_got[i])
            ok = 0;
        printf("thread %d: %ld sent, %ld handled\n", i, sent[i], (long)queued_got[i]);
    }
    printf(ok ? "SIGNALS OK\n" : "SIGNALS LOST\n");
    return !ok;
}

static void *volatile churned;

static void *kept_list;

/* The `kept` case (see the top). */
static int kept(long n) {
    void *shorts[64] = {0};
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (long i = 1; i <= n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        void **slot = &shorts[x % 64];
        free(*slot);
        size_t size = 1 + (x >> 8) % 256;
        *slot = malloc(size);
        if (!*slot) return 2;
        memset(*slot, 0x44, size);
        if (i % 1000 == 0) {
            void **k = malloc(32);
            if (!k) return 2;
            memset(k, 0x55, 32);
            /* Kept for ever, on a list. */
            *k = kept_list;
            kept_list = k;
        }
        if (i == n / 2 || i == n)
            printf("KEPT %ld %ld %ld\n", i, pool_kib(), status_kib("VmPTE:"));
    }
    printf("KEPT OK\n");
    return 0;
}

static int unpinned(void) {
    for (int i = 0; i < N; i++) {
        objs[i] = malloc(SIZE);
        memset(objs[i], 0x22, SIZE);
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 1000; i++) {
            /* Through a volatile holder, so that the compiler keeps the pair. */
            churned = malloc(SIZE);
            memset(churned, 0x33, SIZE);
            free(churned);
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 200);
    for (int i = 0; i < N; i++)
        free(objs[i]);
    printf("UNPINNED OK\n");
    return 0;
}

/* Step `i` of the new objects' phase: frees the oldest of the LIVE_NEW live new objects and
 * allocates one in its place, filled with 0x5a; returns it. */
static unsigned char *replace_live(unsigned char **live, long i) {
    int slot = (int)(i % LIVE_NEW);
    free(live[slot]);
    unsigned char *p = malloc(SIZE);
    memset(p, 0x5a, SIZE);
    live[slot] = p;
    return p;
}

/* --- heap-held --- */
#define HELD_N 400000
static void *held_objs[HELD_N];
static uintptr_t held_hidden[HELD_N / 4], held_freed[HELD_N / 2];

/* The new objects' phase after a held-pointer setup (`held_hidden` and `held_freed` are
 * sorted first): NEW objects of SIZE, each either
 * replacing one of LIVE_NEW live ones or (`keep_all`) all kept; prints "<what> REUSED" once if
 * one lands on an address of `held_hidden` (else "<what> NEVER REUSED" at the end) and
 * returns 1 then; counts in `*in_place` those landing on `held_freed`. */
static int new_objects(const char *what, size_t nheld, size_t nfree, int keep_all, long *in_place) {
    qsort(held_freed, nfree, sizeof held_freed[0], cmp);
    qsort(held_hidden, nheld, sizeof held_hidden[0], cmp);
    static unsigned char *live[LIVE_NEW];
    static unsigned char *all[NEW];
    int bad = 0;
    *in_place = 0;
    for (long i = 0; i < NEW; i++) {
        unsigned char *p;
        if (keep_all) {
            p = all[i] = malloc(SIZE);
            memset(p, 0x5a, SIZE);
        } else {
            p = replace_live(live, i);
        }
        uintptr_t h = HIDE(p);
        if (bsearch(&h, held_hidden, nheld, sizeof h, cmp)) {
            if (!bad)
                printf("%s REUSED\n", what);
            bad = 1;
        }
        if (bsearch(&h, held_freed, nfree, sizeof h, cmp))
            (*in_place)++;
    }
    if (!bad)
        printf("%s NEVER REUSED\n", what);
    return bad;
}

/* HELD_N objects of SIZE, filled with 0x11, in `held_objs`. */
static void allocate_held(void) {
    for (int i = 0; i < HELD_N; i++) {
        held_objs[i] = malloc(SIZE);
        memset(held_objs[i], 0x11, SIZE);
    }
}

static int heap_held(int dropped) {
    size_t nheld = 0, nfree = 0;
    allocate_held();
    for (int i = 0; i < HELD_N; i += 4) {
        /* The kept object holds the only pointer to the next one, which is freed below. */
        *(void **)held_objs[i] = held_objs[i + 1];
        held_hidden[nheld++] = HIDE(held_objs[i + 1]);
    }
    for (int i = 0; i < HELD_N; i++) {
        if (i % 4 != 0) {
            if (i % 4 != 1)
                held_freed[nfree++] = HIDE(held_objs[i]);
            free(held_objs[i]);
        }
    }
    long page = sysconf(_SC_PAGESIZE);
    if (dropped) {
        /* The pages of the kept objects lose their page-table entries (their contents stay). */
        for (int i = 0; i < HELD_N; i += 4)
            if (madvise((void *)((uintptr_t)held_objs[i] & ~(uintptr_t)(page - 1)), page, MADV_DONTNEED) != 0) {
                perror("madvise");
                return 2;
            }
    }
    /* Only the kept objects hold the pointers from here on. */
    for (int i = 0; i < HELD_N; i++)
        if (i % 4 != 0)
            held_objs[i] = NULL;
    long in_place;
    int bad = new_objects("HELD", nheld, nfree, 0, &in_place);
    /* The kept objects still hold what they held. */
    for (int i = 0, k = 0; i < HELD_N; i += 4, k++) {
        uintptr_t h = HIDE(*(void **)held_objs[i]);
        if (!bsearch(&h, held_hidden, nheld, sizeof h, cmp)) {
            printf("CORRUPTED\n");
            return 1;
        }
    }
    printf("IN PLACE %ld\n", in_place);
    return bad;
}

/* --- chained --- */
/* volatile: written and never read, the array would be optimized away. */
static void *volatile chain_dangling[HELD_N / 4];

/* Dangling pointers that lead to other freed objects: every fourth object is kept (it pins
 * its group); the one after it is freed but the program keeps a dangling pointer to it (in a
 * global array), and its stale contents hold the only pointer to the next one, also freed. A
 * read through the kept dangling pointer (not trapped: the group stays mapped for the kept
 * object) yields that second pointer, so the second object's slot must not be reused either. */
static int chained(void) {
    size_t nchained = 0, nfree = 0;
    allocate_held();
    for (int i = 0; i < HELD_N; i += 4) {
        *(void **)held_objs[i + 1] = held_objs[i + 2];
        held_hidden[nchained++] = HIDE(held_objs[i + 2]);
        chain_dangling[i / 4] = held_objs[i + 1];
    }
    for (int i = 0; i < HELD_N; i++) {
        if (i % 4 == 3)
            held_freed[nfree++] = HIDE(held_objs[i]);
        if (i % 4 != 0)
            free(held_objs[i]);
    }
    for (int i = 0; i < HELD_N; i++)
        if (i % 4 != 0)
            held_objs[i] = NULL;
    long in_place;
    int bad = new_objects("CHAINED", nchained, nfree, 0, &in_place);
    printf("IN PLACE %ld\n", in_place);
    return bad;
}

/* --- chained-page --- */
#define PER_PAGE (4096 / sizeof(void *))
#define HOLDER_PAGES ((HELD_N / 4 + PER_PAGE - 1) / PER_PAGE)
static void *volatile page_dangling[HOLDER_PAGES];

/* As `chained`, but the freed objects that hold the pointers are page objects (4096 bytes,
 * which have alias pages of their own): freed, they wait for their batch's revocation (fewer
 * than a batch), and until then dangling pointers read them. The program then only allocates
 * (no free adds to the batch), so the sweeps that run meanwhile find them still mapped. */
static int chained_page(void) {
    size_t nheld = 0, nfree = 0;
    allocate_held();
    void **pages[HOLDER_PAGES];
    for (size_t k = 0; k < HOLDER_PAGES; k++) {
        pages[k] = malloc(4096);
        memset(pages[k], 0, 4096);
    }
    for (int i = 0; i < HELD_N; i++) {
        if (i % 4 == 0)
            continue;
        if (i % 4 == 1) {
            pages[nheld / PER_PAGE][nheld % PER_PAGE] = held_objs[i];
            held_hidden[nheld++] = HIDE(held_objs[i]);
        } else {
            held_freed[nfree++] = HIDE(held_objs[i]);
        }
        free(held_objs[i]);
        held_objs[i] = NULL;
    }
    for (size_t k = 0; k < HOLDER_PAGES; k++) {
        page_dangling[k] = pages[k];
        free(pages[k]);
        pages[k] = NULL;
    }
    long in_place;
    int bad = new_objects("CHAINED", nheld, nfree, 1, &in_place);
    printf("IN PLACE %ld\n", in_place);
    return bad;
}

/* --- futex-waits --- */
struct waits {
    sem_t plain, timed;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int go;
    /* The timed wait's timeout, on a page of its own: a read of the words does not map it. */
    char apart[4096];
    struct timespec until;
};
static struct waits *waits;

/* Cleanup handlers run by cancelled waiters (`futex-cancel`). */
static atomic_int cleaned;

static void cleanup_count(void *arg) {
    (void)arg;
    atomic_fetch_add(&cleaned, 1);
}

static void cleanup_unlock(void *arg) {
    pthread_mutex_unlock(arg);
    atomic_fetch_add(&cleaned, 1);
}

static void *sem_waiter(void *arg) {
    (void)arg;
    pthread_cleanup_push(cleanup_count, NULL);
    while (sem_wait(&waits->plain) != 0)
        ;
    pthread_cleanup_pop(0);
    return NULL;
}

static void *timed_waiter(void *arg) {
    (void)arg;
    pthread_cleanup_push(cleanup_count, NULL);
    clock_gettime(CLOCK_REALTIME, &waits->until);
    waits->until.tv_sec += 120;
    while (sem_timedwait(&waits->timed, &waits->until) != 0)
        ;
    pthread_cleanup_pop(0);
    return NULL;
}

static void *cond_waiter(void *arg) {
    (void)arg;
    pthread_mutex_lock(&waits->lock);
    pthread_cleanup_push(cleanup_unlock, &waits->lock);
    while (!waits->go)
        pthread_cond_wait(&waits->cond, &waits->lock);
    pthread_cleanup_pop(1);
    return NULL;
}

/* The pager: a task sharing the address space but not a thread of the process (clone
 * without CLONE_THREAD), so that sweeps do not hold it, pages the waits out every 100 µs,
 * through raw system calls only (it shares the main thread's thread pointer). */
static volatile int pager_stop;

static long raw3(long nr, long a, long b, long c) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}

static int pager(void *arg) {
    (void)arg;
    struct timespec nap = {0, 100000};
    /* Gone with the process, whatever ends it. */
    raw3(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0);
    while (!pager_stop) {
        raw3(SYS_madvise, (long)((uintptr_t)waits & ~4095UL), 3 * 4096, MADV_PAGEOUT);
        raw3(SYS_nanosleep, (long)&nap, 0, 0);
    }
    raw3(SYS_exit, 0, 0, 0);
    return 0;
}

static int futex_waits(int cancel) {
    waits = calloc(1, sizeof *waits);
    if (sem_init(&waits->plain, 0, 0) != 0 || sem_init(&waits->timed, 0, 0) != 0)
        return 2;
    pthread_mutex_init(&waits->lock, NULL);
    pthread_cond_init(&waits->cond, NULL);
    pthread_t t[3];
    void *(*f[3])(void *) = {sem_waiter, timed_waiter, cond_waiter};
    for (int k = 0; k < 3; k++)
        if (pthread_create(&t[k], NULL, f[k], NULL) != 0)
            return 2;
    usleep(20000);
    static char pager_stack[65536] __attribute__((aligned(16)));
    pid_t pg = clone(pager, pager_stack + sizeof pager_stack, CLONE_VM | SIGCHLD, NULL);
    if (pg < 0)
        return 2;
    /* Rounds of pinned groups with dead slots, as in `reuse`, so that sweeps run. */
    for (int round = 0; round < 12; round++) {
        for (int i = 0; i < N; i++)
            objs[i] = malloc(SIZE);
        for (int i = 0; i < N; i++)
            if (i % 4 != 0) {
                free(objs[i]);
                objs[i] = NULL;
            }
        for (int i = 0; i < NEW; i++) {
            void *p = malloc(SIZE);
            memset(p, 0x22, SIZE);
            free(p);
        }
        for (int i = 0; i < N; i += 4)
            free(objs[i]);
    }
    pager_stop = 1;
    if (waitpid(pg, NULL, 0) != pg)
        return 2;
    if (cancel) {
        for (int k = 0; k < 3; k++)
            if (pthread_cancel(t[k]) != 0)
                return 2;
        for (int k = 0; k < 3; k++) {
            void *r = NULL;
            if (pthread_join(t[k], &r) != 0 || r != PTHREAD_CANCELED) {
                printf("WAITER %d NOT CANCELLED\n", k);
                return 1;
            }
        }
        if (atomic_load(&cleaned) != 3) {
            printf("CLEANUP HANDLERS RUN: %d\n", atomic_load(&cleaned));
            return 1;
        }
        printf("FUTEX CANCEL OK\n");
        return 0;
    }
    sem_post(&waits->plain);
    sem_post(&waits->timed);
    pthread_mutex_lock(&waits->lock);
    waits->go = 1;
    pthread_cond_signal(&waits->cond);
    pthread_mutex_unlock(&waits->lock);
    for (int k = 0; k < 3; k++)
        pthread_join(t[k], NULL);
    printf("FUTEX WAITS OK\n");
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "reuse";
    if (!strcmp(mode, "chained"))
        return chained();
    if (!strcmp(mode, "chained-page"))
        return chained_page();
    if (!strncmp(mode, "heap-held", 9)) {
        pthread_t t;
        if (strstr(mode, "sleeping") && pthread_create(&t, NULL, sleeper, NULL) != 0)
            return 2;
        return heap_held(!strcmp(mode, "heap-held-dropped"));
    }
    if (!strcmp(mode, "unpinned"))
        return unpinned();
    if (!strcmp(mode, "kept"))
        return kept(argc > 2 ? atol(argv[2]) : 20000000);
    if (!strcmp(mode, "futex-waits"))
        return futex_waits(0);
    if (!strcmp(mode, "futex-cancel"))
        return futex_waits(1);
    if (!strcmp(mode, "queued"))
        return queued();
    if (!strcmp(mode, "churn"))
        return churn(argc > 2 ? atol(argv[2]) : 3000000, !(argc > 3 && !strcmp(argv[3], "nosignals")),
                     argc > 4 ? atoi(argv[4]) : 1);
    if (strstr(mode, "sleeping")) {
        pthread_t t;
        pthread_create(&t, NULL, sleeper, NULL);
    }
    int threads = !strcmp(mode, "threads");
    pthread_t vforker;
    if (!strcmp(mode, "vfork")) {
        if (pipe(vfork_release) != 0 || pthread_create(&vforker, NULL, vfork_thread, NULL) != 0)
            return 2;
        while (!vforking)
            usleep(1000);
        usleep(50000);
    }
    if (!strcmp(mode, "shrunk"))
        swell_and_shrink();
    if (!strcmp(mode, "joined"))
        with_a_thread_then_alone();
    if (!strcmp(mode, "grown"))
        grow_slowly();
    int no_access = strcmp(mode, "undumpable") != 0 && strcmp(mode, "undumpable-filegap") != 0;
    /* A file in the page cache: the program itself. */
    int exe = strstr(mode, "-file") ? open("/proc/self/exe", O_RDONLY) : -1;
    char page[4096];
    if (strstr(mode, "-file") && (exe < 0 || pread(exe, page, sizeof page, 0) != (ssize_t)sizeof page)) {
        perror("/proc/self/exe");
        return 2;
    }
    if (!strcmp(mode, "undumpable-filegap") && mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE, exe, 0) == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    if (!strncmp(mode, "undumpable", 10) && prctl(PR_SET_DUMPABLE, 0) != 0) {
        perror("prctl");
        return 2;
    }
    for (int i = 0; i < N; i++) {
        objs[i] = malloc(SIZE);
        memset(objs[i], 0x11, SIZE);
    }
    /* The kept dangling pointers, by where they are held. */
    enum { GLOBAL, LOCAL, HEAP, MMAP, INTERIOR, NOACCESS, REGISTER, VECTOR, WIDE, STACK, TLS, KEPT };
    const char *where[KEPT] = {"global",   "local",  "heap",        "mmap",         "interior",
                               "no-access", "a register of another thread", "a vector register of another thread",
                               "the upper half of a vector register of another thread",
                               "the stack of another thread", "the thread-local storage of another thread"};
    volatile uintptr_t kept[KEPT];
    /* Without the threads, nothing holds the last ones. */
    int nkept = threads ? KEPT : REGISTER;
    volatile uintptr_t local;
    /* A live heap object holding a dangling pointer (reached through a global, so that the
     * compiler keeps no copy of what it holds). */
    holder = malloc(64);
    uintptr_t *region = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uintptr_t *hidden = !strcmp(mode, "undumpable-filenoaccess")
                            ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, exe, 0)
                            : mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (hidden == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    for (int i = 0; i < N; i++) {
        if (i % 4 == 0)
            continue;
        freed[nfreed++] = HIDE(objs[i]);
    }
    for (int k = 0; k < nkept; k++)
        kept[k] = (uintptr_t)objs[1000 * (k + 1) + 1];
    kept_global = (void *)kept[GLOBAL];
    local = kept[LOCAL];
    holder[3] = kept[HEAP];
    region[100] = kept[MMAP];
    hidden[7] = kept[NOACCESS];
    /* The interior pointer: 40 bytes into the object. */
    volatile uintptr_t interior = kept[INTERIOR] + 40;
    for (int k = 0; k < nkept; k++)
        kept_hidden[k] = HIDE(kept[k]);
    if (threads) {
        for_register = kept[REGISTER] ^ KEY;
        for_vector = kept[VECTOR] ^ KEY;
        for_wide = kept[WIDE] ^ KEY;
        for_stack = kept[STACK] ^ KEY;
        for_tls = kept[TLS] ^ KEY;
        start_threads();
        while (!holder_ready)
            usleep(1000);
        for_register = for_vector = for_wide = for_stack = for_tls = 0;
    }
    for (int i = 0; i < N; i++) {
        if (i % 4 != 0) {
            free(objs[i]);
            objs[i] = NULL;
        }
    }
    mprotect(region, 4096, PROT_READ);
    if (no_access)
        mprotect(hidden, 4096, PROT_NONE);
    /* Only the holders keep the pointers from here on. */
    for (int k = 0; k < nkept; k++)
        kept[k] = 0;
    qsort(freed, nfreed, sizeof freed[0], cmp);

    static unsigned char *live[LIVE_NEW];
    long in_place = 0;
    int bad = 0;
    const char *wait = getenv("SWEEP_WAIT_MS");
    long wait_ms = wait ? atol(wait) : 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < NEW || (wait_ms > 0 && in_place < 2000); i++) {
        if (i >= NEW && i % 1000 == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= wait_ms)
                break;
        }
        uintptr_t a = (uintptr_t)replace_live(live, i);
        if (was_freed(a))
            in_place++;
        for (int k = 0; k < nkept; k++) {
            if (HIDE(a) == kept_hidden[k]) {
                printf("REUSED %s\n", where[k]);
                bad = 1;
            }
        }
    }
    if (no_access)
        mprotect(hidden, 4096, PROT_READ);
    if (threads && !stop_threads())
        bad = 1;
    void *vfork_failed = NULL;
    if (!strcmp(mode, "vfork") && (write(vfork_release[1], "x", 1) != 1 || pthread_join(vforker, &vfork_failed) != 0 || vfork_failed)) {
        printf("VFORK FAILED\n");
        bad = 1;
    }
    if (!bad)
        printf("KEPT NEVER REUSED\n");
    printf("IN PLACE %ld\n", in_place);
    /* Writes through the kept dangling pointers must not reach a newer object. */
    uintptr_t held[KEPT] = {(uintptr_t)kept_global, local, holder[3], region[100], interior - 40, hidden[7]};
    for (int k = REGISTER; k < nkept; k++)
        held[k] = HIDE(kept_hidden[k]);
    for (int k = 0; k < nkept; k++)
        memset((void *)held[k], 0xee, SIZE);
    for (int k = 0; k < LIVE_NEW; k++)
        for (int b = 0; b < SIZE; b++)
            if (live[k][b] != 0x5a) {
                printf("CORRUPTED\n");
                return 1;
            }
    printf("INTACT\n");
    return bad;
}
