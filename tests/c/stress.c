/* Stress programs, each bounded in work (not in time):
 *
 *   stress prodcons THREADS ITEMS   producers allocate and fill, consumers on other threads
 *                                   check and free (cross-thread frees), through one queue
 *   stress churn ROUNDS             threads created and exiting in a loop (joined and detached),
 *                                   objects outliving the thread that allocated them
 *   stress forkloop FORKS           fork in a loop while 4 threads allocate; every 4th child
 *                                   execs this program again ("exec-child"), the others check
 *                                   and use the heap and _exit
 *   stress signals MS               a thread sends SIGUSR1 to the main thread for MS
 *                                   milliseconds (longer on a loaded machine, until 400
 *                                   signals were handled, up to 30 s); the handler mallocs,
 *                                   callocs, reallocs and
 *                                   frees, frees objects the main thread allocated and hands
 *                                   it objects to free, while the main thread runs with
 *                                   SIGUSR1 blocked around its own allocator calls (the
 *                                   pattern glibc requires); "signals-anywhere" leaves it
 *                                   unblocked, so that handlers interrupt malloc/realloc/free
 *                                   (both modes fork now and then: signals land in fork too)
 *   stress signals-misuse MS KIND   as signals-anywhere; the 300th handler commits KIND
 *                                   (double-free, use-after-free, overflow), which must be
 *                                   reported
 *   stress resignal ROUNDS          the main thread sets a SIGUSR1 handler with signal() ROUNDS
 *                                   times while another thread sends it SIGUSR1 without pause;
 *                                   the handler sets itself again with signal(), as System V
 *                                   handlers do (sigaction is async-signal-safe: a handler
 *                                   that interrupts it may call it)
 *   stress fork-in-handler MS [T]   one thread (or T, up to 8) allocates for MS milliseconds
 *                                   while a timer of its own, 5 ms after its handler's last
 *                                   fork, interrupts it with a handler that forks, also inside
 *                                   its allocator calls
 *   stress dlopen LIB ROUNDS        dlopen/dlclose a library that allocates in its constructor,
 *                                   its functions and its destructor
 *   stress resize THREADS ROUNDS    threads grow their buffers by realloc in steps of bytes to
 *                                   pages (up to 8 MiB), cut them now and then, and check the
 *                                   contents kept at every step; the main thread forks now and
 *                                   then, and the child checks and resizes its own buffers
 * Prints "OK" on success; a failed check prints "STRESS FAIL: ..." and exits 2. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void fail(const char *what, long v) {
    printf("STRESS FAIL: %s (%ld)\n", what, v);
    fflush(stdout);
    _exit(2);
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* An object: [size_t size][uint64 tag][pattern...]. */
/* Set while the SIGUSR1 handler runs (it is not re-entered: SIGUSR1 is blocked inside). */
static volatile sig_atomic_t in_handler;

static void *make(uint64_t tag) {
    size_t size = 17 + mix(tag) % 3000;
    if (mix(tag) % 97 == 0) size += 200000; /* now and then a large one */
    unsigned char *p = malloc(size);
    if (!p) fail(in_handler ? "malloc in a signal handler" : "malloc", (long)size);
    memcpy(p, &size, 8);
    memcpy(p + 8, &tag, 8);
    memset(p + 16, (int)(tag & 0xff), size - 16);
    return p;
}

static void verify_and_free(void *v) {
    unsigned char *p = v;
    size_t size;
    uint64_t tag;
    memcpy(&size, p, 8);
    memcpy(&tag, p + 8, 8);
    for (size_t i = 16; i < size; i += 61)
        if (p[i] != (unsigned char)(tag & 0xff)) fail("object contents changed", (long)i);
    if (p[size - 1] != (unsigned char)(tag & 0xff)) fail("object tail changed", (long)size);
    free(p);
}

/* ---- producer/consumer ---- */
#define QCAP 1024
static void *queue[QCAP];
static size_t qhead, qtail;
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qnonempty = PTHREAD_COND_INITIALIZER, qnonfull = PTHREAD_COND_INITIALIZER;
static long items_per_producer;
static atomic_long consumed;

static void push(void *p) {
    pthread_mutex_lock(&qlock);
    while (qtail - qhead == QCAP) pthread_cond_wait(&qnonfull, &qlock);
    queue[qtail++ % QCAP] = p;
    pthread_cond_signal(&qnonempty);
    pthread_mutex_unlock(&qlock);
}

static void *pop(void) {
    pthread_mutex_lock(&qlock);
    while (qtail == qhead) pthread_cond_wait(&qnonempty, &qlock);
    void *p = queue[qhead++ % QCAP];
    pthread_cond_signal(&qnonfull);
    pthread_mutex_unlock(&qlock);
    return p;
}

static void *producer(void *arg) {
    uint64_t id = (uintptr_t)arg;
    /* A few objects of this thread's own, freed at the end, keep its cache busy. */
    void *mine[16] = {0};
    for (long i = 0; i < items_per_producer; i++) {
        push(make(id << 32 | (uint64_t)i));
        int k = (int)(i % 16);
        if (mine[k]) verify_and_free(mine[k]);
        mine[k] = make(~(id << 32 | (uint64_t)i));
    }
    for (int k = 0; k < 16; k++)
        if (mine[k]) verify_and_free(mine[k]);
    return 0;
}

static void *consumer(void *arg) {
    (void)arg;
    for (;;) {
        void *p = pop();
        if (!p) return 0;
        verify_and_free(p);
        atomic_fetch_add(&consumed, 1);
    }
}

static int prodcons(int threads, long items) {
    int np = threads / 2, nc = threads - np;
    items_per_producer = items / np;
    pthread_t t[256];
    for (int i = 0; i < nc; i++)
        if (pthread_create(&t[i], 0, consumer, 0)) fail("pthread_create", i);
    for (int i = 0; i < np; i++)
        if (pthread_create(&t[nc + i], 0, producer, (void *)(uintptr_t)(i + 1))) fail("pthread_create", i);
    for (int i = 0; i < np; i++) pthread_join(t[nc + i], 0);
    for (int i = 0; i < nc; i++) push(0);
    for (int i = 0; i < nc; i++) pthread_join(t[i], 0);
    if (consumed != items_per_producer * np) fail("items lost", (long)consumed);
    return 0;
}

/* ---- thread churn ---- */
static void *churner(void *arg) {
    uint64_t id = (uintptr_t)arg;
    void *keep = make(id);
    for (int i = 0; i < 50; i++) verify_and_free(make(id * 1000 + i));
    return keep; /* outlives this thread: freed by the joiner */
}

static void *detached(void *arg) {
    free(churner(arg));
    return 0;
}

static int churn(int rounds) {
    for (int r = 0; r < rounds; r++) {
        pthread_t t[16];
        for (int i = 0; i < 16; i++)
            if (pthread_create(&t[i], 0, churner, (void *)(uintptr_t)(r * 16 + i + 1))) fail("pthread_create", i);
        pthread_t d;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&d, &a, detached, (void *)(uintptr_t)(r + 7777))) fail("pthread_create detached", r);
        pthread_attr_destroy(&a);
        for (int i = 0; i < 16; i++) {
            void *keep;
            pthread_join(t[i], &keep);
            verify_and_free(keep);
        }
    }
    return 0;
}

/* ---- fork in a loop while threads allocate ---- */
static atomic_int stop;
static const char *self_exe;

static void *allocator_thread(void *arg) {
    uint64_t id = (uintptr_t)arg, i = 0;
    void *ring[64] = {0};
    while (!atomic_load(&stop)) {
        int k = (int)(i % 64);
        if (ring[k]) verify_and_free(ring[k]);
        ring[k] = make(id << 40 | i++);
    }
    for (int k = 0; k < 64; k++)
        if (ring[k]) verify_and_free(ring[k]);
    return 0;
}

static int forkloop(int forks) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, allocator_thread, (void *)(uintptr_t)(i + 1));
    void *inherited = make(424242);
    for (int f = 0; f < forks; f++) {
        pid_t pid = fork();
        if (pid < 0) fail("fork", errno);
        if (pid == 0) {
            if (f % 4 == 3) {
                execl(self_exe, self_exe, "exec-child", (char *)0);
                _exit(5);
            }
            /* The child: inherited data intact, a private heap that works. */
            unsigned char *p = inherited;
            memset(p + 16, 0x11, 64); /* must not show in the parent */
            for (int i = 0; i < 200; i++) verify_and_free(make(f * 1000 + i));
            _exit(0);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid) fail("waitpid", errno);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail("child failed", st);
        if (((unsigned char *)inherited)[16] != (unsigned char)(424242 & 0xff)) fail("child wrote the parent's heap", f);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    verify_and_free(inherited);
    return 0;
}

/* ---- signals whose handler allocates ---- */
static atomic_long handled;
static const char *misuse;
/* Objects crossing between the main loop and the handler, both ways: the handler frees what
 * the main loop allocated, and the main loop frees what the handler allocated. */
static _Atomic(void *) to_handler, from_handler;

static void on_usr1(int sig) {
    (void)sig;
    int e = errno;
    in_handler = 1;
    long n = atomic_fetch_add(&handled, 1);
    unsigned char *a = malloc(24), *b = malloc(5000), *c = calloc(3, 100);
    if (!a || !b || !c) fail("malloc in a signal handler", 0);
    for (int i = 0; i < 300; i++)
        if (c[i]) fail("calloc memory in a signal handler is not zero", i);
    memset(a, 1, 24);
    memset(b, 2, 5000);
    b = realloc(b, 9000 + (size_t)(n % 7) * 1000);
    if (!b) fail("realloc in a signal handler", 0);
    for (int i = 0; i < 5000; i += 97)
        if (b[i] != 2) fail("realloc in a signal handler lost contents", i);
    if (malloc_usable_size(a) < 24) fail("usable size in a signal handler", (long)malloc_usable_size(a));
    free(a);
    free(b);
    free(c);
    if (misuse && n == 300) {
        /* Misuse inside a handler that (most likely) interrupted the allocator: it must be
         * reported like any other. */
        unsigned char *m = malloc(40);
        memset(m, 3, 40);
        if (!strcmp(misuse, "double-free")) {
            free(m);
            free(m);
        } else if (!strcmp(misuse, "use-after-free")) {
            free(m);
            printf("read %d\n", *(volatile unsigned char *)m);
        } else {
            /* Always a change: a fixed value equals the canary's byte there once in 256 runs. */
            volatile size_t at = 40 + (size_t)(n % 8);
            m[at] = (unsigned char)~m[at];
            free(m);
        }
        fail("misuse in a signal handler survived", 0);
    }
    void *mine = atomic_exchange(&to_handler, NULL);
    if (mine) verify_and_free(mine);
    void *old = atomic_exchange(&from_handler, make(1000000007ull + (uint64_t)n));
    if (old) verify_and_free(old);
    in_handler = 0;
    errno = e;
}

static pthread_t main_thread;
static atomic_int signals_done;

enum { MIN_HANDLED = 400, MAX_MS = 30000 };

static void *signaller(void *arg) {
    long ms = (long)(intptr_t)arg, elapsed;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        pthread_kill(main_thread, SIGUSR1);
        struct timespec d = {0, 20000};
        nanosleep(&d, 0);
        clock_gettime(CLOCK_MONOTONIC, &now);
        elapsed = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        /* On a loaded machine MS may pass with few signals handled: go on until MIN_HANDLED were
         * (the misuse case needs its 300th), for at most MAX_MS. */
    } while (elapsed < ms || (atomic_load(&handled) < MIN_HANDLED && elapsed < MAX_MS));
    atomic_store(&signals_done, 1);
    return 0;
}

static int signals(long ms, int safe) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, 0);
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    main_thread = pthread_self();
    pthread_t t;
    pthread_create(&t, 0, signaller, (void *)(intptr_t)ms);
    void *ring[32] = {0};
    uint64_t i = 0;
    volatile uint64_t work = 0;
    while (!atomic_load(&signals_done)) {
        int k = (int)(i % 32);
        if (safe) pthread_sigmask(SIG_BLOCK, &usr1, &old);
        if (ring[k]) verify_and_free(ring[k]);
        ring[k] = make(i++);
        if (i % 4 == 0) {
            void *o = atomic_exchange(&to_handler, make(i + (1ull << 40)));
            if (o) verify_and_free(o);
            void *h = atomic_exchange(&from_handler, NULL);
            if (h) verify_and_free(h);
        }
        if (i % 16 == 0) {
            /* Grow and shrink an object, so that signals land in realloc too. */
            unsigned char *r = malloc(100);
            if (!r) fail("malloc", 100);
            memset(r, 7, 100);
            r = realloc(r, 70000);
            if (!r || r[99] != 7) fail("realloc", 70000);
            r = realloc(r, 50);
            if (!r || r[49] != 7) fail("realloc", 50);
            free(r);
        }
        if (i % 1024 == 0) {
            /* fork holds every allocator lock while it copies the heap: signals land there too. */
            pid_t pid = fork();
            if (pid < 0) fail("fork", errno);
            if (pid == 0) {
                verify_and_free(make(i + 7));
                for (int k = 0; k < 32; k++)
                    if (ring[k]) ((unsigned char *)ring[k])[16] ^= 1; /* the child's own copy */
                _exit(0);
            }
            int st;
            while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR) fail("waitpid", errno);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail("child failed", st);
        }
        if (safe) pthread_sigmask(SIG_SETMASK, &old, 0);
        for (int j = 0; j < 200; j++) work += j; /* signals land here (or, unblocked, anywhere) */
    }
    pthread_join(t, 0);
    for (int k = 0; k < 32; k++)
        if (ring[k]) verify_and_free(ring[k]);
    void *o = atomic_exchange(&to_handler, NULL);
    if (o) verify_and_free(o);
    void *h = atomic_exchange(&from_handler, NULL);
    if (h) verify_and_free(h);
    if (handled < 10) fail("too few signals handled", (long)handled);
    printf("handled %ld signals, %lu allocations\n", (long)handled, (unsigned long)i);
    return 0;
}

/* ---- dlopen/dlclose ---- */
static int dlloop(const char *lib, int rounds) {
    for (int r = 0; r < rounds; r++) {
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            printf("dlopen: %s\n", dlerror());
            fail("dlopen", r);
        }
        char *(*make_string)(int) = (char *(*)(int))dlsym(h, "plugin_make_string");
        int (*check)(void) = (int (*)(void))dlsym(h, "plugin_check");
        if (!make_string || !check) fail("dlsym", r);
        char *s = make_string(r);
        if (!check()) fail("the library's constructor allocation changed", r);
        char want[64];
        snprintf(want, sizeof want, "plugin string %d", r);
        if (strcmp(s, want)) fail("the library's string is wrong", r);
        if (dlclose(h)) fail("dlclose", r);
        free(s); /* memory the unloaded library allocated */
    }
    return 0;
}

/* resize: a buffer whose byte i holds (tag + i * 7) & 0xff over its first `len` bytes. */
struct buf {
    unsigned char *p;
    size_t len;
    uint64_t tag;
};

static unsigned char at(const struct buf *b, size_t i) { return (unsigned char)(b->tag + i * 7); }

static void resize_one(struct buf *b, uint64_t r) {
    size_t n;
    if (r % 16 == 0 || b->len > (8u << 20)) n = b->len / (2 + r % 7); /* a cut */
    else n = b->len + 1 + r % (r % 3 == 0 ? 100 : 70000);          /* growth, small or large */
    unsigned char *q = realloc(b->p, n ? n : 1);
    if (!q) fail("realloc", (long)n);
    size_t kept = b->len < n ? b->len : n;
    for (size_t i = 0; i < kept; i += 509)
        if (q[i] != at(b, i)) fail("contents lost by realloc", (long)i);
    if (kept && q[kept - 1] != at(b, kept - 1)) fail("last byte lost by realloc", (long)kept);
    for (size_t i = kept; i < n; i++) q[i] = at(b, i);
    b->p = q;
    b->len = n;
}

static void check_bufs(struct buf *bufs, int n, const char *who) {
    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < bufs[k].len; i += 4093)
            if (bufs[k].p[i] != at(&bufs[k], i)) fail(who, (long)i);
}

struct resize_arg {
    long rounds;
    uint64_t seed;
};

static void *resize_thread(void *v) {
    struct resize_arg *a = v;
    struct buf bufs[4] = {{0}};
    for (int k = 0; k < 4; k++) bufs[k].tag = a->seed * 4 + (uint64_t)k;
    for (long r = 0; r < a->rounds; r++) {
        uint64_t x = mix(a->seed * 1000003 + (uint64_t)r);
        resize_one(&bufs[x % 4], x >> 8);
    }
    check_bufs(bufs, 4, "contents of a resized buffer");
    for (int k = 0; k < 4; k++) free(bufs[k].p);
    return NULL;
}

static int resize(int threads, long rounds) {
    pthread_t th[64];
    struct resize_arg args[64];
    if (threads > 64) threads = 64;
    for (int t = 0; t < threads; t++) {
        args[t] = (struct resize_arg){rounds, (uint64_t)t + 1};
        if (pthread_create(&th[t], NULL, resize_thread, &args[t])) fail("pthread_create", t);
    }
    struct buf mine[2] = {{0, 0, 101}, {0, 0, 102}};
    for (long r = 0; r < rounds; r++) {
        uint64_t x = mix((uint64_t)r + 77);
        resize_one(&mine[x % 2], x >> 8);
        if (r % (rounds / 8 + 1) == 0) {
            pid_t pid = fork();
            if (pid < 0) fail("fork", errno);
            if (pid == 0) {
                check_bufs(mine, 2, "a child's copy of a resized buffer");
                for (int i = 0; i < 200; i++) resize_one(&mine[i % 2], mix((uint64_t)i + 5));
                check_bufs(mine, 2, "a child's resized buffer");
                _exit(0);
            }
            int st;
            if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) fail("child", st);
        }
    }
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    check_bufs(mine, 2, "contents of a resized buffer");
    free(mine[0].p);
    free(mine[1].p);
    return 0;
}

static volatile sig_atomic_t resignal_handled;
static atomic_int resignal_stop;

static void resignal_handler(int sig) {
    signal(sig, resignal_handler);
    resignal_handled++;
}

static void *resignal_sender(void *arg) {
    pthread_t target = *(pthread_t *)arg;
    while (!atomic_load(&resignal_stop)) {
        pthread_kill(target, SIGUSR1);
        sched_yield();
    }
    return NULL;
}

static int resignal(long rounds) {
    pthread_t me = pthread_self(), t;
    signal(SIGUSR1, resignal_handler);
    if (pthread_create(&t, NULL, resignal_sender, &me) != 0)
        return 2;
    for (long i = 0; i < rounds; i++)
        if (signal(SIGUSR1, resignal_handler) == SIG_ERR) {
            printf("STRESS FAIL: signal() failed\n");
            return 2;
        }
    atomic_store(&resignal_stop, 1);
    pthread_join(t, NULL);
    if (resignal_handled == 0) {
        printf("STRESS FAIL: no signal handled\n");
        return 2;
    }
    signal(SIGUSR1, SIG_DFL);
    return 0;
}

/* ---- fork in a handler that interrupted the allocator ---- */

static int handler_forks, refused_forks, bad_forks;
/* Whether the thread's timer is set and its handler has not run yet. */
static __thread volatile sig_atomic_t timer_armed;

static void fork_on_alarm(int sig) {
    (void)sig;
    int saved = errno;
    pid_t pid = fork();
    if (pid == 0) {
        free(malloc(100));
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        __atomic_add_fetch(&bad_forks, 1, __ATOMIC_SEQ_CST);
    else if (WEXITSTATUS(status) == 127)
        __atomic_add_fetch(&refused_forks, 1, __ATOMIC_SEQ_CST);
    else if (WEXITSTATUS(status) != 0)
        __atomic_add_fetch(&bad_forks, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&handler_forks, 1, __ATOMIC_SEQ_CST);
    timer_armed = 0;
    errno = saved;
}

static long fork_ms;

/* Allocates, fills, checks and frees objects of small, page and large sizes for `fork_ms`
 * milliseconds while a one-shot timer of the thread's own (SIGALRM to this thread) fires 5 ms
 * after its handler's last fork. Returns NULL, or what failed. */
static void *fork_in_handler_thread(void *arg) {
    (void)arg;
    /* One-shot, armed again by the loop once its handler ran: a handler that takes longer
     * than the period (its child runs under a loaded machine's scheduler) must not find the
     * next signal waiting and leave the loop no time at all. */
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGALRM;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0)
        return "timer_create";
    struct itimerspec it = {{0, 0}, {0, 5000000}};
    static const size_t sizes[] = {24, 200, 1000, 4096, 9000, 70000, 300000};
    unsigned char *held[64] = {0};
    const char *failed = NULL;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned i = 0; !failed; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= fork_ms)
            break;
        if (!timer_armed) {
            timer_armed = 1;
            timer_settime(timer, 0, &it, NULL);
        }
        unsigned k = i % 64;
        size_t n = sizes[i % 7];
        if (held[k]) {
            size_t was = sizes[(i - 64) % 7];
            for (size_t j = 0; j < was; j += 97)
                if (held[k][j] != (unsigned char)(i - 64))
                    failed = "an object changed";
            free(held[k]);
        }
        held[k] = malloc(n);
        if (!held[k]) {
            failed = "malloc";
            break;
        }
        memset(held[k], (unsigned char)i, n);
    }
    timer_delete(timer);
    for (int k = 0; k < 64; k++)
        free(held[k]);
    return (void *)failed;
}

/* THREADS threads (glibc's malloc allows a fork in a handler that interrupted it in a
 * process of one thread) each run `fork_in_handler_thread`; a child allocates, frees and
 * exits 0. Where a handler interrupted the allocator holding one of its locks, the library
 * cannot give the child a heap of its own: the child says so and exits 127 instead of the fork
 * waiting for ever; with threads, two such forks may be refused at once, and other threads'
 * forks must wait for the locks the interrupted calls hold, then go on.
 * Prints "FORKS <n> REFUSED <r>". */
static int fork_in_handler(long ms, int threads) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fork_on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    fork_ms = ms;
    if (threads < 1 || threads > 8)
        threads = 1;
    pthread_t t[8];
    void *failed = NULL;
    if (threads == 1)
        failed = fork_in_handler_thread(NULL);
    else {
        for (int k = 0; k < threads; k++)
            if (pthread_create(&t[k], NULL, fork_in_handler_thread, NULL) != 0)
                return 2;
        for (int k = 0; k < threads; k++) {
            void *r = NULL;
            pthread_join(t[k], &r);
            if (r)
                failed = r;
        }
    }
    signal(SIGALRM, SIG_IGN);
    printf("FORKS %d REFUSED %d\n", handler_forks, refused_forks);
    if (failed) {
        printf("STRESS FAIL: %s\n", (const char *)failed);
        return 2;
    }
    if (bad_forks || handler_forks == 0) {
        printf("STRESS FAIL: %d forks failed or their children died\n", bad_forks);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv) {
    self_exe = "/proc/self/exe";
    if (argc >= 2 && !strcmp(argv[1], "exec-child")) {
        for (int i = 0; i < 100; i++) verify_and_free(make(i));
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: stress prodcons|churn|forkloop|signals|signals-anywhere|signals-misuse|resignal|fork-in-handler|dlopen|resize ARGS\n");
        return 64;
    }
    int r;
    if (!strcmp(argv[1], "prodcons")) r = prodcons(atoi(argv[2]), argc > 3 ? atol(argv[3]) : 20000);
    else if (!strcmp(argv[1], "churn")) r = churn(atoi(argv[2]));
    else if (!strcmp(argv[1], "forkloop")) r = forkloop(atoi(argv[2]));
    else if (!strcmp(argv[1], "signals")) r = signals(atol(argv[2]), 1);
    else if (!strcmp(argv[1], "signals-anywhere")) r = signals(atol(argv[2]), 0);
    else if (!strcmp(argv[1], "signals-misuse") && argc > 3) {
        misuse = argv[3];
        r = signals(atol(argv[2]), 0);
    }
    else if (!strcmp(argv[1], "resignal")) r = resignal(atol(argv[2]));
    else if (!strcmp(argv[1], "fork-in-handler")) r = fork_in_handler(atol(argv[2]), argc > 3 ? atoi(argv[3]) : 1);
    else if (!strcmp(argv[1], "dlopen")) r = dlloop(argv[2], argc > 3 ? atoi(argv[3]) : 50);
    else if (!strcmp(argv[1], "resize")) r = resize(atoi(argv[2]), argc > 3 ? atol(argv[3]) : 2000);
    else return 64;
    if (r == 0) printf("OK\n");
    return r;
}
