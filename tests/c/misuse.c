/*
 * Heap misuse that the allocator must detect, report and abort on.
 *
 * Usage: misuse <case>     (misuse --list prints the cases)
 * Every case performs exactly one misuse. If the program survives it, it prints
 * `survived: <case>` on stderr and exits 3. The case `none` does only correct things, right up to
 * the edge of each block, and must exit 0 printing OK.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile size_t sink_size;
static size_t sz(size_t n) {
    sink_size = n;
    return sink_size;
}

/* Hides where a pointer comes from, so the compiler cannot reason about the misuse. */
static void *volatile sink_ptr;
static void *launder(void *p) {
    sink_ptr = p;
    return sink_ptr;
}

static char global_buf[256];

/* Some unrelated live blocks, so the misuse does not happen on an empty heap. */
static void *neighbours[64];
static void warm_up(void) {
    for (int i = 0; i < 64; i++) {
        size_t n = (size_t)(i % 8) * 24 + 8 + (i % 3) * 5000;
        neighbours[i] = malloc(sz(n));
        memset(neighbours[i], 0x11, n);
    }
    for (int i = 0; i < 64; i += 2) {
        free(neighbours[i]);
        neighbours[i] = NULL;
    }
}

/* Writes one byte just past the requested size, always changing its value. */
static void overflow_by_one(void *p, size_t n) {
    volatile unsigned char *c = launder(p);
    c[n] = (unsigned char)~c[n];
}

static unsigned char *filled(size_t n) {
    unsigned char *p = malloc(sz(n));
    if (!p) {
        fprintf(stderr, "FAIL: malloc(%zu) returned NULL\n", n);
        exit(1);
    }
    memset(p, 0x42, n);
    return p;
}

static void double_free(size_t n) {
    unsigned char *p = filled(n);
    free(p);
    free(launder(p));
}

static void double_free_after_churn(size_t n) {
    unsigned char *p = filled(n);
    free(p);
    /* Unrelated traffic of a very different size in between. */
    for (int i = 0; i < 1000; i++) {
        void *q = malloc(sz(n * 7 + 3001));
        memset(q, 1, 16);
        free(q);
    }
    free(launder(p));
}

static void overflow_free(size_t n) {
    unsigned char *p = filled(n);
    overflow_by_one(p, n);
    free(p);
}

static void overflow_realloc(size_t n) {
    unsigned char *p = filled(n);
    overflow_by_one(p, n);
    p = realloc(p, sz(n * 2 + 16));
    free(p);
}

static void overflow_realloc_shrink(size_t n) {
    unsigned char *p = filled(n);
    overflow_by_one(p, n);
    p = realloc(p, sz(n / 2));
    free(p);
}

static void *mmap_page(void) {
    void *m = mmap(NULL, 4096 * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "FAIL: mmap\n");
        exit(1);
    }
    memset(m, 0, 4096 * 4);
    return (char *)m + 4096;
}

/* The pointer a case misuses, selected by name. */
static void *bad_pointer(const char *what) {
    if (strcmp(what, "interior8") == 0)
        return filled(64) + 8;
    if (strcmp(what, "interior16") == 0)
        return filled(64) + 16;
    if (strcmp(what, "interior-medium") == 0)
        return filled(5000) + 16;
    if (strcmp(what, "interior-large") == 0)
        return filled(1 << 20) + 4096;
    if (strcmp(what, "global") == 0)
        return global_buf;
    if (strcmp(what, "wild") == 0)
        return (void *)(uintptr_t)0x12345678;
    if (strcmp(what, "mmap") == 0)
        return mmap_page();
    return NULL;
}

static void invalid_free(const char *what) {
    char stack_buf[128];
    memset(stack_buf, 0, sizeof stack_buf);
    void *p = strcmp(what, "stack") == 0 ? stack_buf + 16 : bad_pointer(what);
    free(launder(p));
}

static void invalid_realloc(const char *what) {
    char stack_buf[128];
    memset(stack_buf, 0, sizeof stack_buf);
    void *p = strcmp(what, "stack") == 0 ? stack_buf + 16 : bad_pointer(what);
    void *q = realloc(launder(p), sz(100));
    launder(q);
}

static void invalid_usable(const char *what) {
    char stack_buf[128];
    memset(stack_buf, 0, sizeof stack_buf);
    void *p = strcmp(what, "stack") == 0 ? stack_buf + 16 : bad_pointer(what);
    size_t n = malloc_usable_size(launder(p));
    fprintf(stderr, "malloc_usable_size returned %zu\n", n);
}

/* Correct use right up to the last byte of every block: must not be reported. */
/* Fails unless all n bytes of p hold v. */
static void expect_bytes(const unsigned char *p, size_t n, unsigned char v, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) {
            fprintf(stderr, "FAIL: %s: byte %zu is %#x, not %#x\n", what, i, p[i], v);
            exit(1);
        }
}

/* Objects of whole pages end in a guard page; growing, shrinking and re-sizing them in place
 * or by moving keeps every byte and never touches the guard. */
static void whole_pages(void) {
    unsigned char *p = filled(4096);
    p = realloc(p, sz(4096)); /* the same size: in place */
    expect_bytes(p, 4096, 0x42, "realloc 4096 -> 4096");
    p = realloc(p, sz(4100)); /* past the guard: moves */
    expect_bytes(p, 4096, 0x42, "realloc 4096 -> 4100");
    memset(p, 0x43, 4100);
    p = realloc(p, sz(4096)); /* a canary object shrunk to a whole page */
    expect_bytes(p, 4096, 0x43, "realloc 4100 -> 4096");
    memset(p, 0x44, 4096);
    p = realloc(p, sz(8192));
    expect_bytes(p, 4096, 0x44, "realloc 4096 -> 8192");
    memset(p, 0x45, 8192);
    p = realloc(p, sz(4090)); /* from a guarded object to one with a canary */
    expect_bytes(p, 4090, 0x45, "realloc 8192 -> 4090");
    memset(p, 0x46, 4090);
    free(p);
    unsigned char *q = calloc(2, sz(4096));
    expect_bytes(q, 8192, 0, "calloc(2, 4096)");
    free(q);
    q = memalign(4096, sz(12288));
    memset(q, 0x47, 12288);
    free(q);
}

/* Grows the object `*arg` points to from 4500 to 6000 bytes: in place in prevent mode (its two
 * pages hold both), moved where the object ends against a guard page (detect mode). */
static void *grow(void *arg) {
    unsigned char **p = arg;
    unsigned char *q = realloc(*p, sz(6000));
    if (!q) {
        fprintf(stderr, "FAIL: realloc to 6000 bytes\n");
        exit(1);
    }
    if (q == launder(*p))
        printf("grown in place\n");
    *p = q;
    return NULL;
}

static void none(void) {
    whole_pages();
    /* A copy into a page object after another thread grew it in place, the bounds of its
     * first size looked up by this one (`filled`'s memset) before. */
    unsigned char *grown = filled(4500);
    pthread_t t;
    if (pthread_create(&t, NULL, grow, &grown) || pthread_join(t, NULL)) {
        fprintf(stderr, "FAIL: pthread_create\n");
        exit(1);
    }
    memset(grown, 0x77, 6000);
    free(grown);
    static const size_t sizes[] = {0, 1, 13, 16, 24, 32, 100, 1000, 4096, 5000, 40000, 65536, 300000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *p = malloc(sz(n));
        if (!p) {
            fprintf(stderr, "FAIL: malloc(%zu)\n", n);
            exit(1);
        }
        memset(p, 0xEE, n);
        p = realloc(p, sz(n + 10));
        memset(p, 0xDD, n + 10);
        p = realloc(p, sz(n / 2 + 1));
        memset(p, 0xCC, n / 2 + 1);
        free(p);
        p = calloc(1, sz(n));
        memset(p, 0xBB, n);
        free(p);
        void *q = NULL;
        if (posix_memalign(&q, 64, sz(n)) != 0) {
            fprintf(stderr, "FAIL: posix_memalign(64, %zu)\n", n);
            exit(1);
        }
        memset(q, 0xAA, n);
        free(q);
        q = aligned_alloc(4096, sz(n));
        memset(q, 0x99, n);
        free(q);
        q = memalign(256, sz(n));
        memset(q, 0x88, n);
        free(q);
    }
    free(NULL);
    for (int i = 0; i < 64; i++)
        free(neighbours[i]);
    printf("OK\n");
    exit(0);
}

struct misuse_case {
    const char *name;
    void (*fn)(void);
};

#define SIZE_CASES(X)                                                                              \
    X(1) X(13) X(16) X(24) X(100) X(1000) X(4096) X(5000) X(40000) X(300000)

#define DEF_OVF(n)                                                                                 \
    static void overflow_free_##n(void) { overflow_free(n); }                                     \
    static void overflow_realloc_##n(void) { overflow_realloc(n); }
SIZE_CASES(DEF_OVF)

static void df_small(void) { double_free(24); }
static void df_tiny(void) { double_free(1); }
static void df_medium(void) { double_free(5000); }
static void df_large(void) { double_free(1 << 20); }
static void df_churn(void) { double_free_after_churn(24); }
static void df_calloc(void) {
    void *p = calloc(10, sz(10));
    free(p);
    free(launder(p));
}
static void df_realloc_moved(void) {
    /* The old pointer of a realloc that moved the block is dead. */
    unsigned char *p = filled(16);
    unsigned char *q = realloc(p, sz(1 << 20));
    if (q == p) {
        fprintf(stderr, "realloc did not move the block; case not applicable\n");
        exit(4);
    }
    memset(q, 1, 1 << 20);
    free(launder(p));
}
static void df_aligned(void) {
    void *p = aligned_alloc(4096, sz(100));
    free(p);
    free(launder(p));
}
static void df_realloc(void) {
    unsigned char *p = filled(100);
    free(p);
    void *q = realloc(launder(p), sz(200));
    launder(q);
}

static void if_interior8(void) { invalid_free("interior8"); }
static void if_interior16(void) { invalid_free("interior16"); }
static void if_interior_medium(void) { invalid_free("interior-medium"); }
static void if_interior_large(void) { invalid_free("interior-large"); }
static void if_stack(void) { invalid_free("stack"); }
static void if_global(void) { invalid_free("global"); }
static void if_wild(void) { invalid_free("wild"); }
static void if_mmap(void) { invalid_free("mmap"); }
static void ir_interior8(void) { invalid_realloc("interior8"); }
static void ir_interior16(void) { invalid_realloc("interior16"); }
static void ir_stack(void) { invalid_realloc("stack"); }
static void ir_global(void) { invalid_realloc("global"); }
static void ir_wild(void) { invalid_realloc("wild"); }
static void ir_mmap(void) { invalid_realloc("mmap"); }
static void iu_interior8(void) { invalid_usable("interior8"); }
static void iu_interior16(void) { invalid_usable("interior16"); }
static void iu_stack(void) { invalid_usable("stack"); }
static void iu_global(void) { invalid_usable("global"); }
static void iu_wild(void) { invalid_usable("wild"); }
static void iu_mmap(void) { invalid_usable("mmap"); }

static void ovf_calloc(void) {
    unsigned char *p = calloc(10, sz(10));
    overflow_by_one(p, 100);
    free(p);
}
static void ovf_realloc_grown(void) {
    unsigned char *p = filled(100);
    p = realloc(p, sz(5000));
    memset(p, 1, 5000);
    overflow_by_one(p, 5000);
    free(p);
}
static void ovf_realloc_shrunk(void) {
    unsigned char *p = filled(5000);
    p = realloc(p, sz(1000));
    memset(p, 1, 1000);
    overflow_by_one(p, 1000);
    free(p);
}
static void ovf_realloc_shrink_5000(void) { overflow_realloc_shrink(5000); }
static void ovf_realloc_shrink_100(void) { overflow_realloc_shrink(100); }
static void ovf_aligned_alloc(void) {
    unsigned char *p = aligned_alloc(4096, sz(5000));
    memset(p, 1, 5000);
    overflow_by_one(p, 5000);
    free(p);
}
static void ovf_posix_memalign(void) {
    void *p = NULL;
    if (posix_memalign(&p, 64, sz(100)) != 0)
        exit(1);
    memset(p, 1, 100);
    overflow_by_one(p, 100);
    free(p);
}
static void ovf_memalign(void) {
    unsigned char *p = memalign(256, sz(24));
    memset(p, 1, 24);
    overflow_by_one(p, 24);
    free(p);
}

static void overflow_free_0(void) {
    unsigned char *p = malloc(sz(0));
    overflow_by_one(p, 0);
    free(p);
}
static void ovf_valloc(void) {
    unsigned char *p = valloc(sz(100));
    memset(p, 1, 100);
    overflow_by_one(p, 100);
    free(p);
}
static void ovf_realloc_zero(void) {
    unsigned char *p = filled(100);
    overflow_by_one(p, 100);
    void *q = realloc(p, sz(0));
    launder(q);
}
static void df_realloc_zero(void) {
    /* realloc(p, 0) frees p (glibc semantics), so this free is the second one. */
    unsigned char *p = filled(100);
    void *q = realloc(p, sz(0));
    launder(q);
    free(launder(p));
}
static void df_same_size_churn(void) {
    unsigned char *p = filled(24);
    free(p);
    /* Same-size traffic in between; every block is freed again, so p stays freed whatever
     * addresses the allocator hands out. */
    for (int i = 0; i < 1000; i++) {
        void *q = malloc(sz(24));
        memset(q, 1, 24);
        free(q);
    }
    free(launder(p));
}
static void if_interior1(void) {
    unsigned char *p = filled(64);
    free(launder(p + 1));
}

/* Cross-thread cases: the block is allocated here and misused in another thread (or the
 * reverse), so per-thread caches must not hide the misuse. */
static void *free_in_thread(void *p) {
    free(p);
    return NULL;
}
static void *alloc_in_thread(void *arg) {
    size_t n = *(size_t *)arg;
    return filled(n);
}
static void run_thread(void *(*fn)(void *), void *arg, void **ret) {
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg)) {
        fprintf(stderr, "FAIL: pthread_create\n");
        exit(1);
    }
    pthread_join(t, ret);
}
static void df_cross_thread(void) {
    unsigned char *p = filled(24);
    run_thread(free_in_thread, p, NULL);
    free(launder(p));
}
static void df_cross_thread_reverse(void) {
    size_t n = 5000;
    void *p;
    run_thread(alloc_in_thread, &n, &p);
    free(p);
    run_thread(free_in_thread, launder(p), NULL);
}
/* malloc_usable_size of the thread's newest allocation once it is freed, by this thread or by
 * another one: still reported (the newest allocation's size is kept for this very call). */
static void usable_after_free(void) {
    unsigned char *p = malloc(sz(40));
    free(launder(p));
    size_t n = malloc_usable_size(launder(p));
    fprintf(stderr, "malloc_usable_size returned %zu\n", n);
}
/* The other thread exists before the allocation, so that nothing else is allocated between
 * it and the call: pointers and acknowledgements go through pipes. */
static int to_freer[2], from_freer[2];
static void *freer(void *arg) {
    (void)arg;
    void *p;
    if (read(to_freer[0], &p, sizeof p) != sizeof p)
        abort();
    free(p);
    char ok = 1;
    if (write(from_freer[1], &ok, 1) != 1)
        abort();
    return NULL;
}
static void usable_after_free_cross_thread(void) {
    pthread_t t;
    if (pipe(to_freer) || pipe(from_freer) || pthread_create(&t, NULL, freer, NULL))
        abort();
    unsigned char *p = malloc(sz(40));
    char ok;
    if (write(to_freer[1], &p, sizeof p) != sizeof p || read(from_freer[0], &ok, 1) != 1)
        abort();
    size_t n = malloc_usable_size(launder(p));
    fprintf(stderr, "malloc_usable_size returned %zu\n", n);
}
static void ovf_cross_thread(void) {
    size_t n = 100;
    void *p;
    run_thread(alloc_in_thread, &n, &p);
    overflow_by_one(p, n);
    run_thread(free_in_thread, p, NULL);
}
/* A misuse in a child of fork(): the child's report and abort; the parent dies the same way. */
static void df_forked_child(void) {
    unsigned char *p = filled(24);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "FAIL: fork\n");
        exit(1);
    }
    if (pid == 0) {
        free(p);
        free(launder(p));
        fprintf(stderr, "survived: double-free in the child\n");
        _exit(3);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) {
        fprintf(stderr, "FAIL: waitpid\n");
        exit(1);
    }
    if (WIFSIGNALED(st)) {
        signal(WTERMSIG(st), SIG_DFL);
        raise(WTERMSIG(st));
    }
    exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

/* Reads past the end of a whole-page object: nothing is written, so only a trap finds it. */
static void ovf_read_4096(void) {
    volatile unsigned char *p = launder(filled(4096));
    sink_size = p[4096];
    free((void *)p);
}
/* Writes a little further past the end of a two-page object. */
static void ovf_write_8192(void) {
    volatile unsigned char *p = launder(filled(8192));
    p[8192 + 100] = 1;
    free((void *)p);
}
/* Small objects, accessed past their slot's canary: only `guard_all=1` (detect mode) makes
 * these trap at the access, the object against a guard page of its own. */
static void ovf_read_small(void) {
    volatile unsigned char *p = launder(filled(40));
    sink_size = p[48];
    free((void *)p);
}
static void ovf_write_small(void) {
    volatile unsigned char *p = launder(filled(24));
    p[64] = 1;
    free((void *)p);
}
static void ovf_write_aligned_small(void) {
    void *q = NULL;
    if (posix_memalign(&q, 64, sz(100)) != 0)
        abort();
    volatile unsigned char *p = launder(q);
    p[128] = 1;
    free((void *)p);
}

/* Writes before the start of an object, in the bytes of its first page before it: in detect
 * mode page objects (and with `guard_all=1` every object) lie against the guard page after
 * them, and those bytes belong to no object. */
static void underflow_write_5000(void) {
    volatile unsigned char *p = launder(filled(5000));
    p[-8] = 1;
    free((void *)p);
}
static void underflow_realloc_5000(void) {
    volatile unsigned char *p = launder(filled(5000));
    p[-1] = (unsigned char)~p[-1]; /* as in underflow_write_small */
    free(realloc((void *)p, sz(9000)));
}
/* A large object lies against the guard page after its view in both modes. */
static void underflow_write_large(void) {
    volatile unsigned char *p = launder(filled(300000));
    p[-8] = 1;
    free((void *)p);
}
static void underflow_write_small(void) {
    volatile unsigned char *p = launder(filled(40));
    /* A canary byte of any value: written with its complement, so that it always changes
       (a fixed value matched it in about one run in 256). */
    p[-100] = (unsigned char)~p[-100];
    free((void *)p);
}
/* A copy into (and one out of) the bytes just before an object, reported by the copy. */
static void underflow_copy_into_5000(void) {
    unsigned char src[64] = {0};
    unsigned char *p = launder(filled(5000));
    memcpy(p - 16, src, sz(32));
    free(p);
}
static void underflow_copy_into_large(void) {
    unsigned char src[64] = {0};
    unsigned char *p = launder(filled(300000));
    memcpy(p - 16, src, sz(32));
    free(p);
}
static void underflow_copy_out_of_small(void) {
    unsigned char dst[64];
    unsigned char *p = launder(filled(40));
    memcpy(dst, p - 16, sz(32));
    sink_size = dst[0];
    free(p);
}

/* Overflows of objects never freed: no free checks their canaries, the check at exit does. */
static void overflow_leaked_24(void) {
    volatile unsigned char *p = launder(filled(24));
    p[24] = 1;
}
static void overflow_leaked_5000(void) {
    volatile unsigned char *p = launder(filled(5000));
    p[5000] = 1;
}
static void underflow_leaked_5000(void) {
    volatile unsigned char *p = launder(filled(5000));
    p[-8] = 1;
}
static void overflow_leaked_large(void) {
    volatile unsigned char *p = launder(filled(300000));
    p[300000] = 1;
}
static void underflow_leaked_large(void) {
    volatile unsigned char *p = launder(filled(300000));
    p[-8] = 1;
}
/* A copy into the object the thread made last, after a realloc shrank it in place: bounded
 * by its size now (the copy's check takes the newest object's bounds from the thread's cache). */
static void overflow_copy_after_shrink(void) {
    unsigned char src[256] = {0};
    unsigned char *p = filled(200);
    unsigned char *q = realloc(p, sz(120));
    if (q != launder(p)) {
        fprintf(stderr, "FAIL: realloc to 120 bytes moved the object\n");
        exit(1);
    }
    memcpy(q, src, sz(150));
    free(q);
}
/* The same for a page and a large object, whose bounds the thread looked up (`filled`'s
 * memset) before the realloc that shrank them in place. */
static void overflow_copy_after_shrink_at(size_t from, size_t to) {
    static unsigned char src[1 << 20];
    unsigned char *p = filled(from);
    unsigned char *q = realloc(p, sz(to));
    if (q != launder(p)) {
        fprintf(stderr, "FAIL: realloc to %zu bytes moved the object\n", to);
        exit(1);
    }
    memcpy(q, src, sz(to + 100));
    free(q);
}
static void overflow_copy_after_shrink_pages(void) { overflow_copy_after_shrink_at(5000, 4500); }
static void overflow_copy_after_shrink_large(void) { overflow_copy_after_shrink_at(300000, 250000); }
/* Detect mode: writes that skip the canary into the slot's bytes after it (a 1000-byte
 * object's slot holds 1024: canary at 1000..1008, then 16 bytes of no object). */
static void overflow_past_canary(void) {
    volatile unsigned char *p = launder(filled(1000));
    p[1015] = (unsigned char)~p[1015];
    free((void *)p);
}
/* The same after a realloc that shrank the object in place (a 200-byte object's slot holds
 * 224 bytes; cut to 120, its bytes from 128 on belong to no object). */
static void overflow_past_canary_realloc(void) {
    unsigned char *p = filled(200);
    volatile unsigned char *q = launder(realloc(p, sz(120)));
    if (q != (volatile unsigned char *)launder(p)) {
        fprintf(stderr, "FAIL: realloc to 120 bytes moved the object\n");
        exit(1);
    }
    q[140] = (unsigned char)~q[140];
    free((void *)q);
}
/* The same into the tail of a page after its last slot: a page of 320-byte slots holds 12
 * (3 840 bytes) and 256 bytes of no slot. Objects are allocated until one takes a page's last
 * slot (each has an alias page of its own, at its slot's offset in the pool page). */
static void overflow_into_page_tail(void) {
    for (int i = 0; i < 100000; i++) {
        volatile unsigned char *p = launder(filled(300));
        if (((uintptr_t)p & 4095) == 11 * 320) {
            p[500] = (unsigned char)~p[500];
            free((void *)p);
            return;
        }
    }
    fprintf(stderr, "FAIL: no object took a page's last 320-byte slot\n");
    exit(1);
}
/* Detect mode: a write past a small object, beyond its slot, into the free slot after it in
 * its pool page (100-byte objects: 112-byte slots, 36 a page). Every other slot of many pages
 * is freed; the write skips the live object's canary and slack; objects of the size are then
 * allocated until the damaged slot is taken again. */
static void damage_free_slot(void) {
    enum { N = 4096 };
    static unsigned char *p[N];
    unsigned char *v = NULL;
    for (int i = 0; i < N; i++)
        p[i] = filled(100);
    for (int i = 0; i < N; i++)
        if ((((uintptr_t)p[i] & 4095) / 112) % 2) {
            free(p[i]);
            p[i] = NULL;
        }
    for (int i = 0; i < N && !v; i++)
        if (p[i] && (((uintptr_t)p[i] & 4095) / 112) < 30)
            v = p[i];
    if (!v) {
        fprintf(stderr, "FAIL: no live object with a free slot after it\n");
        exit(1);
    }
    volatile unsigned char *w = launder(v);
    w[130] = (unsigned char)~w[130];
}
static void overflow_into_free_slot(void) {
    damage_free_slot();
    for (int i = 0; i < 3 * 4096; i++)
        filled(100);
}
/* The same, the damaged slot never allocated again: found at exit. */
static void overflow_into_free_slot_exit(void) {
    damage_free_slot();
}
/* Detect mode: a write 200 bytes past a 600-byte object (672-byte slots, 6 a page), into the
 * slot after it that no object took yet: the program's first object of the size takes a
 * fresh page, whose other slots were never used. */
static volatile unsigned char *damage_unused_slot(void) {
    volatile unsigned char *p = launder(filled(600));
    if (((uintptr_t)p & 4095) / 672 > 4) {
        fprintf(stderr, "FAIL: the first 600-byte object took its page's last slot\n");
        exit(1);
    }
    p[800] = (unsigned char)~p[800];
    return p;
}
/* Found when objects of the size are allocated until the slot is taken. */
static void overflow_into_unused_slot(void) {
    damage_unused_slot();
    for (int i = 0; i < 4096; i++)
        filled(600);
}
/* The object freed after the write (as most programs' overflowed buffers are), the slot never
 * taken: found at exit, naming the freed object. */
static void overflow_into_unused_slot_freed(void) {
    free((void *)damage_unused_slot());
}
static void overflow_past_canary_leaked(void) {
    volatile unsigned char *p = launder(filled(1000));
    p[1015] = (unsigned char)~p[1015];
}
/* Threads that allocate and free, still running when the process exits. */
static void *churn(void *arg) {
    (void)arg;
    for (unsigned i = 0;; i++) {
        unsigned char *p = malloc(sz(16 + i % 9000));
        p[0] = 1;
        free(realloc(p, sz(16 + (i * 7) % 9000)));
    }
    return NULL;
}
static void start_churn(int n) {
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, churn, NULL))
            abort();
    }
    usleep(20000);
}
static void overflow_leaked_threads(void) {
    start_churn(4);
    volatile unsigned char *p = launder(filled(24));
    p[24] = 1;
}
/* Objects of every size live at exit, written up to their last byte, and threads allocating
 * meanwhile: nothing to report. */
static void live_at_exit(void) {
    static const size_t sizes[] = {0, 1, 13, 24, 100, 1000, 2048, 4096, 5000, 40000, 65536, 300000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        memset(launder(malloc(sz(sizes[i]))), 0x77, sizes[i]);
        memset(launder(calloc(1, sz(sizes[i]))), 0x66, sizes[i]);
        void *q = NULL;
        if (posix_memalign(&q, 64, sz(sizes[i])) != 0)
            abort();
        memset(launder(q), 0x55, sizes[i]);
        memset(launder(realloc(malloc(sz(sizes[i] / 2 + 1)), sz(sizes[i] + 1))), 0x44, sizes[i] + 1);
    }
    start_churn(4);
    printf("OK\n");
    exit(0);
}

/* C23's sized frees, looked up at run time: this libc's headers may not declare them, and the
 * library under test exports them. */
static void (*sized_free(void))(void *, size_t) {
    void (*f)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
    if (!f) {
        fprintf(stderr, "FAIL: no free_sized\n");
        exit(1);
    }
    return f;
}
/* free_sized with a size other than the one allocated: a small, a page and a large object. */
static void fs_wrong_small(void) {
    sized_free()(launder(filled(100)), sz(64));
}
static void fs_wrong_pages(void) {
    sized_free()(launder(filled(8192)), sz(8191));
}
static void fs_wrong_large(void) {
    sized_free()(launder(filled(1 << 20)), sz(1 << 19));
}
/* calloc(n, m) is freed with the product; another factor's size is wrong. */
static void fs_wrong_calloc(void) {
    sized_free()(launder(calloc(sz(10), 12)), sz(12));
}
/* free_aligned_sized told the alignment as the size. */
static void fas_wrong(void) {
    void (*f)(void *, size_t, size_t) = (void (*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
    if (!f) {
        fprintf(stderr, "FAIL: no free_aligned_sized\n");
        exit(1);
    }
    f(launder(aligned_alloc(64, sz(256))), 64, sz(64));
}

#define CASE_OVF(n) {"overflow-free-" #n, overflow_free_##n}, {"overflow-realloc-" #n, overflow_realloc_##n},

static const struct misuse_case cases[] = {
    {"none", none},
    {"double-free-tiny", df_tiny},
    {"double-free-small", df_small},
    {"double-free-medium", df_medium},
    {"double-free-large", df_large},
    {"double-free-after-churn", df_churn},
    {"double-free-calloc", df_calloc},
    {"double-free-aligned", df_aligned},
    {"double-free-realloc-moved", df_realloc_moved},
    {"double-free-realloc", df_realloc},
    {"invalid-free-interior8", if_interior8},
    {"invalid-free-interior16", if_interior16},
    {"invalid-free-interior-medium", if_interior_medium},
    {"invalid-free-interior-large", if_interior_large},
    {"invalid-free-stack", if_stack},
    {"invalid-free-global", if_global},
    {"invalid-free-wild", if_wild},
    {"invalid-free-mmap", if_mmap},
    {"invalid-realloc-interior8", ir_interior8},
    {"invalid-realloc-interior16", ir_interior16},
    {"invalid-realloc-stack", ir_stack},
    {"invalid-realloc-global", ir_global},
    {"invalid-realloc-wild", ir_wild},
    {"invalid-realloc-mmap", ir_mmap},
    {"invalid-usable-interior8", iu_interior8},
    {"invalid-usable-interior16", iu_interior16},
    {"invalid-usable-stack", iu_stack},
    {"invalid-usable-global", iu_global},
    {"invalid-usable-wild", iu_wild},
    {"invalid-usable-mmap", iu_mmap},
    SIZE_CASES(CASE_OVF)
    {"overflow-free-0", overflow_free_0},
    {"overflow-valloc", ovf_valloc},
    {"overflow-realloc-zero", ovf_realloc_zero},
    {"overflow-free-cross-thread", ovf_cross_thread},
    {"usable-after-free", usable_after_free},
    {"usable-after-free-cross-thread", usable_after_free_cross_thread},
    {"double-free-realloc-zero", df_realloc_zero},
    {"double-free-after-same-size-churn", df_same_size_churn},
    {"double-free-cross-thread", df_cross_thread},
    {"double-free-cross-thread-reverse", df_cross_thread_reverse},
    {"double-free-in-forked-child", df_forked_child},
    {"invalid-free-interior1", if_interior1},
    {"overflow-calloc", ovf_calloc},
    {"overflow-realloc-grown", ovf_realloc_grown},
    {"overflow-realloc-shrunk", ovf_realloc_shrunk},
    {"overflow-realloc-shrink-100", ovf_realloc_shrink_100},
    {"overflow-realloc-shrink-5000", ovf_realloc_shrink_5000},
    {"overflow-aligned-alloc", ovf_aligned_alloc},
    {"overflow-posix-memalign", ovf_posix_memalign},
    {"overflow-memalign", ovf_memalign},
    {"overflow-read-4096", ovf_read_4096},
    {"overflow-write-8192", ovf_write_8192},
    {"overflow-leaked-24", overflow_leaked_24},
    {"overflow-leaked-5000", overflow_leaked_5000},
    {"underflow-leaked-5000", underflow_leaked_5000},
    {"overflow-leaked-large", overflow_leaked_large},
    {"underflow-leaked-large", underflow_leaked_large},
    {"overflow-leaked-threads", overflow_leaked_threads},
    {"live-at-exit", live_at_exit},
    {"overflow-past-canary", overflow_past_canary},
    {"overflow-past-canary-realloc", overflow_past_canary_realloc},
    {"overflow-copy-after-shrink", overflow_copy_after_shrink},
    {"overflow-copy-after-shrink-pages", overflow_copy_after_shrink_pages},
    {"overflow-copy-after-shrink-large", overflow_copy_after_shrink_large},
    {"overflow-into-page-tail", overflow_into_page_tail},
    {"overflow-into-free-slot", overflow_into_free_slot},
    {"overflow-into-free-slot-exit", overflow_into_free_slot_exit},
    {"overflow-into-unused-slot", overflow_into_unused_slot},
    {"overflow-into-unused-slot-freed", overflow_into_unused_slot_freed},
    {"overflow-past-canary-leaked", overflow_past_canary_leaked},
    {"underflow-write-5000", underflow_write_5000},
    {"underflow-realloc-5000", underflow_realloc_5000},
    {"underflow-write-small", underflow_write_small},
    {"underflow-write-large", underflow_write_large},
    {"underflow-copy-into-5000", underflow_copy_into_5000},
    {"underflow-copy-out-of-small", underflow_copy_out_of_small},
    {"underflow-copy-into-large", underflow_copy_into_large},
    {"overflow-read-small", ovf_read_small},
    {"overflow-write-small", ovf_write_small},
    {"overflow-write-aligned-small", ovf_write_aligned_small},
    {"free-sized-wrong-small", fs_wrong_small},
    {"free-sized-wrong-pages", fs_wrong_pages},
    {"free-sized-wrong-large", fs_wrong_large},
    {"free-sized-wrong-calloc", fs_wrong_calloc},
    {"free-aligned-sized-wrong", fas_wrong},
};
#define N_CASES (sizeof cases / sizeof cases[0])

int main(int argc, char **argv) {
    alarm(30);
    if (argc != 2) {
        fprintf(stderr, "usage: misuse <case> | --list\n");
        return 2;
    }
    if (strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < N_CASES; i++)
            printf("%s\n", cases[i].name);
        return 0;
    }
    for (size_t i = 0; i < N_CASES; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            warm_up();
            cases[i].fn();
            fprintf(stderr, "survived: %s\n", argv[1]);
            return 3;
        }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
