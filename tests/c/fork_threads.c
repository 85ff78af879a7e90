/*
 * fork() while other threads keep allocating.
 *
 * The child must be able to allocate and free freely (also from new threads), must see the data
 * written before the fork intact, and must not see writes the parent makes after the fork (and
 * vice versa). Prints OK and exits 0 on success; `FAIL: <what>` and exit 1 otherwise.
 *
 * Usage: fork_threads        forks while threads allocate, forks from a thread, atfork handlers
 *        fork_threads fds    the program replaces, then closes, descriptors it did not open
 *                            (the allocator's own included) and forks again
 *        fork_threads holes  a heap of small, page and large objects, every other one freed
 *                            (and more after a few rounds of churn): the child sees every live
 *                            one intact, and the memory it allocates in the freed places is
 *                            zeroed by calloc and its own, and the kernel can read and write
 *                            every live one before the child touches it (some paged out
 *                            first); prints ALLOCATED_KIB n and LIVE_KIB n
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NWORKERS 3
#define NFORKS 8
#define NPRE 200
#define BUFSZ 8192

static atomic_int stop;

static void fail(const char *who, const char *what, long a) {
    fprintf(stderr, "FAIL: %s: %s (%ld)\n", who, what, a);
    fflush(stderr);
    _exit(1);
}

static uint64_t next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

static unsigned char pat(uint64_t tag, size_t i) { return (unsigned char)(tag * 29 + i * 13 + 1); }

static void fill(unsigned char *p, size_t n, uint64_t tag) {
    for (size_t i = 0; i < n; i++)
        p[i] = pat(tag, i);
}

static int intact(const unsigned char *p, size_t n, uint64_t tag) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(tag, i))
            return 0;
    return 1;
}

static size_t pick(uint64_t *rng) {
    uint64_t r = next(rng);
    switch (r % 64) {
    case 0: return 300000 + (r >> 8) % 100000;
    case 1:
    case 2:
    case 3: return 4096 + (r >> 8) % 60000;
    default: return 1 + (r >> 8) % 512;
    }
}

/* Random malloc/free/realloc with pattern checks; used by workers and by children. */
static void churn(const char *who, uint64_t seed, int ops, atomic_int *until) {
    enum { SLOTS = 64 };
    unsigned char *blk[SLOTS] = {0};
    size_t len[SLOTS] = {0};
    uint64_t tag[SLOTS] = {0};
    uint64_t rng = seed | 1;
    for (int op = 0; ops < 0 || op < ops; op++) {
        if (until && atomic_load(until))
            break;
        int s = (int)(next(&rng) % SLOTS);
        if (blk[s]) {
            if (!intact(blk[s], len[s], tag[s]))
                fail(who, "block corrupted, size", (long)len[s]);
            if (next(&rng) % 3 == 0) {
                size_t n = pick(&rng);
                unsigned char *q = realloc(blk[s], n);
                if (!q)
                    fail(who, "realloc returned NULL", (long)n);
                size_t keep = n < len[s] ? n : len[s];
                if (!intact(q, keep, tag[s]))
                    fail(who, "realloc lost contents", (long)n);
                blk[s] = q;
                len[s] = n;
                tag[s] = next(&rng);
                fill(q, n, tag[s]);
            } else {
                free(blk[s]);
                blk[s] = NULL;
            }
        } else {
            len[s] = pick(&rng);
            blk[s] = (next(&rng) & 1) ? malloc(len[s]) : calloc(1, len[s]);
            if (!blk[s])
                fail(who, "allocation returned NULL", (long)len[s]);
            tag[s] = next(&rng);
            fill(blk[s], len[s], tag[s]);
        }
    }
    for (int s = 0; s < SLOTS; s++)
        if (blk[s]) {
            if (!intact(blk[s], len[s], tag[s]))
                fail(who, "block corrupted at the end, size", (long)len[s]);
            free(blk[s]);
        }
}

static void *worker(void *arg) {
    churn("worker", (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull, -1, &stop);
    return NULL;
}

/* Keeps large objects (which have their own mappings) coming and going around the forks. */
static void *large_worker(void *arg) {
    uint64_t rng = (uint64_t)(uintptr_t)arg | 1;
    while (!atomic_load(&stop)) {
        size_t n = 300000 + next(&rng) % 2000000;
        unsigned char *p = malloc(n);
        if (!p)
            fail("large worker", "malloc", (long)n);
        p[0] = 1;
        p[n - 1] = 2;
        if (p[0] != 1 || p[n - 1] != 2)
            fail("large worker", "large block", (long)n);
        free(p);
    }
    return NULL;
}

static void *child_thread(void *arg) {
    churn("child thread", (uint64_t)(uintptr_t)arg * 7777 + 3, 2000, NULL);
    return NULL;
}

static unsigned char *pre[NPRE];
static size_t pre_len[NPRE];

static void check_pre(const char *who) {
    for (int i = 0; i < NPRE; i++)
        if (!intact(pre[i], pre_len[i], (uint64_t)i + 1000))
            fail(who, "data written before the fork damaged, block", i);
}

static void read_byte(int fd, const char *who) {
    char c;
    ssize_t r;
    do
        r = read(fd, &c, 1);
    while (r < 0 && errno == EINTR);
    if (r != 1)
        fail(who, "pipe read", (long)r);
}

static void write_byte(int fd, const char *who) {
    char c = 'x';
    if (write(fd, &c, 1) != 1)
        fail(who, "pipe write", 0);
}

static int all_equal(const unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

/* pthread_atfork handlers that allocate, as some libraries do. */
static void *atfork_block;
static int atfork_calls;
static void atfork_prepare(void) {
    free(atfork_block);
    atfork_block = malloc(777);
    if (!atfork_block)
        fail("atfork prepare", "malloc", 777);
    memset(atfork_block, 'A', 777);
}
static void atfork_parent(void) {
    void *p = malloc(123);
    if (!p)
        fail("atfork parent", "malloc", 123);
    memset(p, 'B', 123);
    free(p);
    atfork_calls++;
}
static void atfork_child(void) {
    if (!all_equal(atfork_block, 777, 'A'))
        fail("atfork child", "block from the prepare handler damaged", 0);
    void *p = malloc(5000);
    if (!p)
        fail("atfork child", "malloc", 5000);
    memset(p, 'C', 5000);
    free(p);
}

/* fork() from a thread other than the main one, while the others allocate. */
static void *forking_thread(void *arg) {
    (void)arg;
    for (int f = 0; f < 2; f++) {
        pid_t pid = fork();
        if (pid < 0)
            fail("forking thread", "fork", errno);
        if (pid == 0) {
            alarm(30);
            check_pre("child of thread");
            churn("child of thread", (uint64_t)f * 977 + 11, 3000, NULL);
            _exit(0);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid)
            fail("forking thread", "waitpid", errno);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail("forking thread", "child status", status);
    }
    return NULL;
}

/* Allocates a mix of sizes, forks, and checks both sides; used after the program has replaced
 * or closed file descriptors it did not open itself (daemons and shells do that). */
static void fork_round(const char *who) {
    enum { N = 300 };
    static unsigned char *b[N];
    static size_t bl[N];
    uint64_t rng = 777;
    for (int i = 0; i < N; i++) {
        bl[i] = pick(&rng);
        b[i] = malloc(bl[i]);
        if (!b[i])
            fail(who, "malloc", (long)bl[i]);
        fill(b[i], bl[i], (uint64_t)i);
    }
    fflush(stdout);
    fflush(stderr);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0)
        fail(who, "fork", errno);
    if (pid == 0) {
        alarm(30);
        check_pre(who);
        for (int i = 0; i < N; i++)
            if (!intact(b[i], bl[i], (uint64_t)i))
                fail(who, "child: block damaged", i);
        churn(who, 99, 2000, NULL);
        for (int i = 0; i < N; i++) {
            memset(b[i], 0, bl[i]);
            free(b[i]);
        }
        _exit(0);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    int st;
    if (waitpid(pid, &st, 0) != pid)
        fail(who, "waitpid", errno);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail(who, "child status", st);
    /* A fork copies no heap: it takes milliseconds, however much the program allocated before. */
    if (ms > 1000)
        fail(who, "fork() took this many milliseconds", ms);
    for (int i = 0; i < N; i++) {
        if (!intact(b[i], bl[i], (uint64_t)i))
            fail(who, "parent: block damaged", i);
        free(b[i]);
    }
    churn(who, 98, 2000, NULL);
}

/* Points every descriptor the program did not open itself at a file of ours, then closes them
 * all; the allocator must keep working (and must not write to our file). */
static void descriptors_taken_over(void) {
    char path[] = "/tmp/nevermore-fork-XXXXXX";
    int tmp = mkstemp(path);
    if (tmp < 0)
        fail("fds", "mkstemp", errno);
    unlink(path);
    for (int fd = 3; fd < 1024; fd++)
        if (fd != tmp && fcntl(fd, F_GETFD) != -1 && dup2(tmp, fd) != fd)
            fail("fds", "dup2", fd);
    fork_round("after dup2 over every descriptor");
    struct stat stt;
    if (fstat(tmp, &stt) != 0)
        fail("fds", "fstat", errno);
    if (stt.st_size != 0)
        fail("fds", "our file was written to by someone else, size", (long)stt.st_size);
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    fork_round("after closing every descriptor");
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL: timed out\n";
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(1);
    _exit(1);
}

/* Mode `fds`: heap traffic from several threads for a while (as a real program has), then
 * descriptors_taken_over() within 10 seconds (glibc needs a fraction of one), each fork() taking
 * less than one second. */
static int fds_mode(void) {
    pthread_t th[NWORKERS];
    for (int i = 0; i < NWORKERS; i++)
        if (pthread_create(&th[i], NULL, i == 0 ? large_worker : worker, (void *)(uintptr_t)(i + 1)))
            fail("parent", "pthread_create", i);
    usleep(500000);
    atomic_store(&stop, 1);
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(th[i], NULL);
    signal(SIGALRM, on_alarm);
    alarm(10);
    descriptors_taken_over();
    check_pre("parent");
    printf("OK\n");
    return 0;
}

/* A live object the kernel could not reach in the child (`r`: what the call returned): says
 * which of its pages fail a one-byte write(2) and the mappings around them, then fails. */
static void unreachable(int fd, const char *what, ssize_t r, int i, const unsigned char *p, size_t n) {
    int e = errno;
    fprintf(stderr, "child: object %d at %p (%zu bytes): %s returned %zd (errno %d)\n", i, (const void *)p, n, what,
            r, r < 0 ? e : 0);
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)4095, hi = (uintptr_t)p + n;
    for (uintptr_t a = lo; a < hi; a += 4096)
        if (pwrite(fd, (const void *)a, 1, 0) != 1)
            fprintf(stderr, "child: page %#lx: errno %d\n", (unsigned long)a, errno);
    FILE *m = fopen("/proc/self/maps", "r");
    char line[512];
    while (m && fgets(line, sizeof line, m)) {
        unsigned long from, to;
        if (sscanf(line, "%lx-%lx", &from, &to) == 2 && to + (8ul << 20) > lo && from < hi + (8ul << 20))
            fprintf(stderr, "child: %s", line);
    }
    fail("child", what, i);
}

/* See the usage: what a child needs of a heap with as much freed memory as live. */
static int holes_mode(void) {
    enum { N = 3000 };
    static unsigned char *obj[N];
    static size_t len[N];
    size_t allocated = 0, live = 0;
    for (int i = 0; i < N; i++) {
        len[i] = i % 25 == 0 ? 200000 + (size_t)i * 331 : i % 5 == 0 ? 5000 + (size_t)i * 29 : 16 + (size_t)i * 7 % 1000;
        obj[i] = malloc(len[i]);
        if (!obj[i])
            fail("parent", "malloc", (long)len[i]);
        fill(obj[i], len[i], (uint64_t)i + 7);
        allocated += len[i];
    }
    for (int i = 0; i < N; i += 2) {
        free(obj[i]);
        obj[i] = NULL;
    }
    /* Churn, so that freed spans wait for an epoch or reach the free runs. */
    for (int r = 0; r < 20000; r++) {
        unsigned char *volatile q = malloc(16 + (size_t)r % 3000);
        if (!q)
            fail("parent", "malloc", r);
        q[0] = 1;
        free(q);
    }
    for (int i = 1; i < N; i += 2)
        live += len[i];
    printf("ALLOCATED_KIB %zu\nLIVE_KIB %zu\n", allocated >> 10, live >> 10);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        fail("parent", "fork", errno);
    if (pid == 0) {
        /* First the kernel: every live object must be mapped in the child before the program
         * touches it, or write(2) from it and read(2) into it fail with EFAULT. Some are paged
         * out first (as the kernel's pageout may do to any of them at any time): those too. */
        for (int i = 1; i < N; i += 14) {
            uintptr_t a = (uintptr_t)obj[i] & ~4095UL, e = ((uintptr_t)obj[i] + len[i] + 4095) & ~4095UL;
            if (madvise((void *)a, e - a, MADV_PAGEOUT) != 0)
                fail("child", "madvise(MADV_PAGEOUT)", errno);
        }
        int fd = memfd_create("fork-holes", 0);
        if (fd < 0)
            fail("child", "memfd_create", errno);
        for (int i = 1; i < N; i += 2) {
            ssize_t r = pwrite(fd, obj[i], len[i], 0);
            if (r != (ssize_t)len[i])
                unreachable(fd, "write(2) from a live object", r, i, obj[i], len[i]);
            r = pread(fd, obj[i], len[i], 0);
            if (r != (ssize_t)len[i])
                unreachable(fd, "read(2) into a live object", r, i, obj[i], len[i]);
        }
        close(fd);
        for (int i = 1; i < N; i += 2)
            if (!intact(obj[i], len[i], (uint64_t)i + 7))
                fail("child", "a live object changed", i);
        for (int i = 0; i < N; i += 2) {
            unsigned char *z = calloc(1, len[i]);
            if (!z)
                fail("child", "calloc", (long)len[i]);
            for (size_t k = 0; k < len[i]; k++)
                if (z[k])
                    fail("child", "calloc returned a nonzero byte", (long)k);
            fill(z, len[i], (uint64_t)i + 9);
            obj[i] = z;
        }
        for (int i = 0; i < N; i++)
            if (!intact(obj[i], len[i], (uint64_t)i + (i % 2 ? 7 : 9)))
                fail("child", "an object changed", i);
        _exit(0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
        fail("parent", "child failed", st);
    for (int i = 1; i < N; i += 2)
        if (!intact(obj[i], len[i], (uint64_t)i + 7))
            fail("parent", "a live object changed", i);
    printf("OK\n");
    return 0;
}

int main(int argc, char **argv) {
    alarm(90);
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < NPRE; i++) {
        pre_len[i] = (size_t)(i % 10 == 0 ? 100000 + i : 1 + i * 37 % 3000);
        pre[i] = malloc(pre_len[i]);
        if (!pre[i])
            fail("parent", "malloc", (long)pre_len[i]);
        fill(pre[i], pre_len[i], (uint64_t)i + 1000);
    }
    if (argc > 1 && strcmp(argv[1], "fds") == 0)
        return fds_mode();
    if (argc > 1 && strcmp(argv[1], "holes") == 0)
        return holes_mode();
    if (pthread_atfork(atfork_prepare, atfork_parent, atfork_child))
        fail("parent", "pthread_atfork", 0);

    pthread_t th[NWORKERS];
    for (int i = 0; i < NWORKERS; i++)
        if (pthread_create(&th[i], NULL, i == 0 ? large_worker : worker, (void *)(uintptr_t)(i + 1)))
            fail("parent", "pthread_create", i);

    for (int f = 0; f < NFORKS; f++) {
        unsigned char *by_parent = malloc(BUFSZ), *by_child = malloc(BUFSZ);
        if (!by_parent || !by_child)
            fail("parent", "malloc", BUFSZ);
        memset(by_parent, 'O', BUFSZ);
        memset(by_child, 'O', BUFSZ);
        int p2c[2], c2p[2];
        if (pipe(p2c) || pipe(c2p))
            fail("parent", "pipe", errno);
        /* let the workers get going between forks */
        usleep(2000);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0)
            fail("parent", "fork", errno);
        if (pid == 0) {
            alarm(30);
            close(p2c[1]);
            close(c2p[0]);
            check_pre("child");
            churn("child", (uint64_t)f * 31337 + 5, 4000, NULL);
            pthread_t ct[2];
            for (int i = 0; i < 2; i++)
                if (pthread_create(&ct[i], NULL, child_thread, (void *)(uintptr_t)(f * 10 + i + 1)))
                    fail("child", "pthread_create", i);
            for (int i = 0; i < 2; i++)
                pthread_join(ct[i], NULL);
            check_pre("child");
            /* The parent has written its buffer once this byte arrives: we must not see that. */
            read_byte(p2c[0], "child");
            if (!all_equal(by_parent, BUFSZ, 'O'))
                fail("child", "sees the parent's write made after the fork", f);
            memset(by_child, 'C', BUFSZ);
            write_byte(c2p[1], "child");
            /* Free memory inherited from the parent, then exit. */
            for (int i = 0; i < NPRE; i++)
                free(pre[i]);
            free(by_parent);
            free(by_child);
            if (f % 2)
                exit(0);
            _exit(0);
        }
        close(p2c[0]);
        close(c2p[1]);
        memset(by_parent, 'P', BUFSZ);
        char c = 'x';
        if (write(p2c[1], &c, 1) != 1 || read(c2p[0], &c, 1) != 1) {
            int st = 0;
            waitpid(pid, &st, 0);
            fprintf(stderr, "FAIL: child %d ended early: exit status %d, signal %d\n", f,
                    WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
            return 1;
        }
        if (!all_equal(by_child, BUFSZ, 'O'))
            fail("parent", "sees the child's write made after the fork", f);
        int status;
        if (waitpid(pid, &status, 0) != pid)
            fail("parent", "waitpid", errno);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "FAIL: child %d ended with status %#x\n", f, status);
            return 1;
        }
        close(p2c[1]);
        close(c2p[0]);
        check_pre("parent");
        if (!all_equal(by_parent, BUFSZ, 'P'))
            fail("parent", "own buffer changed", f);
        free(by_parent);
        free(by_child);
    }

    pthread_t ft;
    if (pthread_create(&ft, NULL, forking_thread, NULL))
        fail("parent", "pthread_create", 0);
    churn("parent main", 4242, 3000, NULL);
    pthread_join(ft, NULL);
    if (atfork_calls != NFORKS + 2)
        fail("parent", "atfork parent handler calls", atfork_calls);

    atomic_store(&stop, 1);
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(th[i], NULL);
    check_pre("parent");
    for (int i = 0; i < NPRE; i++)
        free(pre[i]);
    free(atfork_block);
    printf("OK\n");
    return 0;
}
