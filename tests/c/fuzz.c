/* Differential fuzzer of the allocator API (see docs/robustness.md).
 *
 *   fuzz SEED NOPS [INJECT AT]     random op sequence from a seed
 *   fuzz - [INJECT AT]             op sequence read from stdin (bytes drive every choice; for
 *                                  a byte-stream fuzzer or a corpus replay)
 *
 * Runs a random sequence of malloc, calloc, realloc, free, posix_memalign, aligned_alloc,
 * memalign, malloc_usable_size with sizes around every size class boundary, the page and
 * 128 KiB thresholds, zero and impossible sizes, and every alignment; checks each result
 * against a model of the live objects:
 *   - no two live objects overlap; alignment honoured; usable size >= request;
 *   - contents survive (fill patterns, checked at realloc and free and by random sweeps);
 *   - calloc memory is zero; impossible requests fail with the right errno;
 *   - under nevermore (LD_PRELOAD names it): no address is ever returned twice.
 * Prints "DIGEST <hex>" (outcomes that glibc defines: which calls fail and with what errno,
 * so that a run under glibc and one under nevermore must print the same) and "OK".
 * A model violation prints "FUZZ FAIL: ..." and exits 2.
 *
 * INJECT (double-free, interior-free, overflow, uaf) performs that misuse at op AT; the
 * process must die there with the matching report: reaching the end prints "SURVIVED" and
 * exits 3. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAXLIVE 512

struct obj {
    unsigned char *p;
    size_t size;
    size_t align;
    unsigned seed;
};

static struct obj live[MAXLIVE];
static const unsigned char *stream;
static size_t stream_len, stream_pos;
static uint64_t rng_state;
static uint64_t digest = 0xcbf29ce484222325ull;
static int one_time;
static long op_no;

static void fail(const char *what, long a, long b) {
    printf("FUZZ FAIL: op %ld: %s (%ld, %ld)\n", op_no, what, a, b);
    fflush(stdout);
    exit(2);
}

static uint64_t rnd(void) {
    if (stream) {
        uint64_t v = 0;
        for (int i = 0; i < 4; i++) v = (v << 8) | (stream_pos < stream_len ? stream[stream_pos++] : 0);
        return v * 0x9e3779b97f4a7c15ull >> 16;
    }
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned below(uint64_t n) { return (unsigned)(rnd() % n); }

static void note(uint64_t v) {
    digest = (digest ^ v) * 0x100000001b3ull;
}

/* ---- one-time address check (nevermore only): every returned address, in an open hash ---- */
#define SEEN_BITS 23
static uintptr_t *seen;

static void check_fresh(void *p) {
    if (!one_time || !p) return;
    if (!seen) {
        seen = mmap(0, sizeof(uintptr_t) << SEEN_BITS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (seen == MAP_FAILED) fail("mmap for the address set", errno, 0);
    }
    uintptr_t a = (uintptr_t)p;
    size_t mask = ((size_t)1 << SEEN_BITS) - 1, i = (a * 0x9e3779b97f4a7c15ull >> 20) & mask;
    for (size_t n = 0; n < mask; n++, i = (i + 1) & mask) {
        if (seen[i] == a) fail("an address was returned twice", (long)a, 0);
        if (seen[i] == 0) {
            seen[i] = a;
            return;
        }
    }
}

/* ---- sizes and alignments ---- */
static const unsigned CLASS_SIZES[] = {16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 192, 224, 256,
                                       288, 320, 368, 400, 448, 512, 576, 672, 816, 1024, 1360, 2048};
#define NCLASS (sizeof CLASS_SIZES / sizeof CLASS_SIZES[0])
#define CANARY 8

static size_t pick_size(void) {
    unsigned r = below(100);
    int d = (int)below(5) - 2;
    if (r < 25) return below(300);
    if (r < 45) return (size_t)((long)CLASS_SIZES[below(NCLASS)] - (below(2) ? CANARY : 0) + d);
    if (r < 58) return (size_t)((long)(1 + below(33)) * 4096 - (below(2) ? CANARY : 0) + d);
    if (r < 65) return (size_t)((long)(128 << 10) - (below(2) ? CANARY : 0) + d);
    if (r < 80) return 2048 + below(140 << 10);
    if (r < 85) return (140 << 10) + below(4 << 20);
    if (r < 90) return 0;
    return below(2100);
}

static size_t pick_align(void) {
    unsigned r = below(100);
    if (r < 70) return (size_t)1 << below(13);        /* 1 .. 4096 */
    if (r < 90) return (size_t)1 << (13 + below(9));  /* 8 KiB .. 1 MiB */
    return (size_t)1 << (21 + below(2));              /* 2, 4 MiB */
}

/* ---- fill patterns: byte i of an object with seed s is pat(s, i), periodic with a prime
 * period so that swapped or shifted pages show ---- */
#define PERIOD 4093
static unsigned char tmpl[2 * PERIOD];
static unsigned tmpl_seed = 1u << 31; /* no seed has this value: rnd() is cast to 31 bits */

static unsigned char pat(unsigned seed, size_t i) {
    i %= PERIOD;
    return (unsigned char)(seed + i * 7 + (i >> 8) * 13);
}

static const unsigned char *template_for(unsigned seed) {
    if (seed != tmpl_seed) {
        for (size_t i = 0; i < sizeof tmpl; i++) tmpl[i] = pat(seed, i);
        tmpl_seed = seed;
    }
    return tmpl;
}

static void fill(unsigned char *p, size_t from, size_t to, unsigned seed) {
    const unsigned char *t = template_for(seed);
    while (from < to) {
        size_t k = from % PERIOD, n = PERIOD - k < to - from ? PERIOD - k : to - from;
        memcpy(p + from, t + k, n);
        from += n;
    }
}

static void check(const unsigned char *p, size_t from, size_t to, unsigned seed, const char *when) {
    const unsigned char *t = template_for(seed);
    while (from < to) {
        size_t k = from % PERIOD, n = PERIOD - k < to - from ? PERIOD - k : to - from;
        if (memcmp(p + from, t + k, n)) {
            for (size_t i = from; i < from + n; i++)
                if (p[i] != t[k + i - from]) fail(when, (long)i, p[i]);
        }
        from += n;
    }
}

/* ---- the model ---- */
static void check_new(int slot, unsigned char *p, size_t size, size_t align, int fresh) {
    if (align > 1 && ((uintptr_t)p & (align - 1))) fail("misaligned", (long)(uintptr_t)p, (long)align);
    if (((uintptr_t)p & 15) && size >= 16) fail("not 16-byte aligned", (long)(uintptr_t)p, (long)size);
    size_t len = size ? size : 1;
    for (int i = 0; i < MAXLIVE; i++) {
        if (i == slot || !live[i].p) continue;
        size_t l = live[i].size ? live[i].size : 1;
        if (p < live[i].p + l && live[i].p < p + len) fail("overlapping objects", (long)(uintptr_t)p, (long)(uintptr_t)live[i].p);
    }
    size_t us = malloc_usable_size(p);
    if (us < size) fail("usable size below the request", (long)us, (long)size);
    if (fresh) check_fresh(p);
}

static void put(int slot, unsigned char *p, size_t size, size_t align) {
    check_new(slot, p, size, align, 1);
    live[slot].p = p;
    live[slot].size = size;
    live[slot].align = align;
    live[slot].seed = (unsigned)rnd() & 0x7fffffff;
    fill(p, 0, size, live[slot].seed);
}

static void drop(int slot) {
    struct obj *o = &live[slot];
    check(o->p, 0, o->size, o->seed, "contents changed before free");
    free(o->p);
    o->p = 0;
}

static int free_slot(void) {
    int s = (int)below(MAXLIVE);
    if (live[s].p) drop(s);
    return s;
}

static int live_slot(void) {
    for (int tries = 0; tries < 8; tries++) {
        int s = (int)below(MAXLIVE);
        if (live[s].p) return s;
    }
    int s = free_slot();
    unsigned char *p = malloc(64);
    if (!p) fail("malloc(64) failed", errno, 0);
    put(s, p, 64, 1);
    return s;
}

/* Impossible requests: must fail, with the errno glibc gives. */
static void impossible(void) {
    static const size_t huge[] = {SIZE_MAX, SIZE_MAX - 15, (size_t)1 << 62, (size_t)1 << 47, ((size_t)1 << 46) + 1};
    size_t h = huge[below(sizeof huge / sizeof huge[0])];
    void *p = 0;
    int r = 0, e;
    errno = 0;
    switch (below(6)) {
    case 0: p = malloc(h); break;
    case 1: p = calloc(h / 2 + 1, 2 + below(3)); break;            /* overflows */
    case 2: p = calloc(h, 1); break;
    case 3: r = posix_memalign(&p, 64, h); break;
    case 4: r = posix_memalign(&p, (size_t)below(64) | 1, 64); break; /* odd alignment: EINVAL */
    case 5: {                                                         /* realloc: original kept */
        int s = live_slot();
        p = realloc(live[s].p, h);
        if (p) fail("realloc to an impossible size succeeded", (long)h, 0);
        check(live[s].p, 0, live[s].size, live[s].seed, "realloc failure changed the object");
        break;
    }
    }
    e = errno;
    if (r == 0 && p) fail("impossible request succeeded", (long)h, 0);
    note(r ? (uint64_t)r << 8 : (uint64_t)e);
}

static void one_op(void) {
    unsigned r = below(100);
    int s;
    unsigned char *p;
    size_t size, align;
    if (r < 22) { /* malloc */
        s = free_slot();
        size = pick_size();
        p = malloc(size);
        if (!p) fail("malloc failed", (long)size, errno);
        put(s, p, size, 1);
    } else if (r < 30) { /* calloc */
        s = free_slot();
        size = pick_size();
        size_t n = 1 + below(8), m = size / n;
        p = calloc(n, m);
        if (!p) fail("calloc failed", (long)n, (long)m);
        for (size_t i = 0; i < n * m; i++)
            if (p[i]) fail("calloc memory not zero", (long)i, p[i]);
        put(s, p, n * m, 1);
    } else if (r < 48) { /* realloc */
        s = (int)below(MAXLIVE);
        size = pick_size();
        struct obj *o = &live[s];
        if (!o->p) {
            p = realloc(NULL, size);
            if (!p) fail("realloc(NULL) failed", (long)size, errno);
            put(s, p, size, 1);
        } else if (size == 0 && below(4) == 0) {
            check(o->p, 0, o->size, o->seed, "contents changed before realloc(p, 0)");
            p = realloc(o->p, 0);
            note(p == NULL); /* glibc frees and returns NULL */
            if (p) free(p);
            o->p = 0;
        } else {
            if (size == 0) size = 1;
            check(o->p, 0, o->size, o->seed, "contents changed before realloc");
            unsigned char *old = o->p;
            p = realloc(o->p, size);
            if (!p) fail("realloc failed", (long)size, errno);
            size_t keep = o->size < size ? o->size : size;
            check(p, 0, keep, o->seed, "realloc lost contents");
            if ((uintptr_t)p & 15) fail("realloc result not 16-byte aligned", (long)(uintptr_t)p, 0);
            o->p = 0;
            check_new(s, p, size, 1, p != old);
            o->p = p;
            o->size = size;
            o->align = 1;
            if (size > keep) fill(p, keep, size, o->seed);
        }
    } else if (r < 72) { /* free */
        s = (int)below(MAXLIVE);
        if (live[s].p) drop(s);
        else free(NULL);
    } else if (r < 80) { /* posix_memalign */
        s = free_slot();
        size = pick_size();
        align = pick_align();
        void *q = 0;
        int rc = posix_memalign(&q, align, size);
        int expect_inval = align < sizeof(void *);
        note((uint64_t)rc);
        if (expect_inval) {
            if (rc != EINVAL) fail("posix_memalign with a bad alignment did not fail with EINVAL", (long)align, rc);
        } else {
            if (rc) fail("posix_memalign failed", (long)align, rc);
            put(s, q, size, align);
        }
    } else if (r < 87) { /* aligned_alloc, memalign */
        s = free_slot();
        size = pick_size();
        align = pick_align();
        p = below(2) ? aligned_alloc(align, size) : memalign(align, size);
        if (!p) fail("aligned_alloc/memalign failed", (long)align, (long)size);
        put(s, p, size, align);
    } else if (r < 95) { /* malloc_usable_size, writes into the whole usable size */
        s = live_slot();
        struct obj *o = &live[s];
        size_t us = malloc_usable_size(o->p);
        if (us < o->size) fail("usable size below the request", (long)us, (long)o->size);
        /* nevermore's usable size is the request: its canary follows right after. */
        if (one_time && us != o->size) fail("usable size is not the request", (long)us, (long)o->size);
        memset(o->p + o->size, 0xee, us - o->size);
        check(o->p, 0, o->size, o->seed, "contents changed (usable-size sweep)");
    } else if (r < 98) { /* sweep: check a few objects */
        for (int k = 0; k < 4; k++) {
            s = (int)below(MAXLIVE);
            if (live[s].p) check(live[s].p, 0, live[s].size, live[s].seed, "contents changed (sweep)");
        }
    } else {
        impossible();
    }
}

static void inject(const char *kind) {
    int s = live_slot();
    struct obj *o = &live[s];
    printf("INJECT %s on %p size %zu\n", kind, (void *)o->p, o->size);
    fflush(stdout);
    if (!strcmp(kind, "double-free")) {
        unsigned char *p = o->p;
        drop(s);
        /* Churn a little so that the slot may be reused meanwhile. */
        for (int i = 0; i < (int)below(64); i++) one_op();
        free(p);
    } else if (!strcmp(kind, "interior-free")) {
        size_t off = o->size > 1 ? 1 + below(o->size - 1) : 1;
        if (o->size <= 1) {
            free(o->p);
            o->p = 0;
            o->p = malloc(48);
            o->size = 48;
            off = 1 + below(47);
        }
        free(o->p + off);
    } else if (!strcmp(kind, "overflow")) {
        o->p[o->size] ^= 0x5a;
        if (below(2)) drop(s);
        else if (realloc(o->p, o->size + 1 + below(5000))) fail("realloc accepted a corrupted object", 0, 0);
    } else if (!strcmp(kind, "uaf")) {
        unsigned char *p = o->p;
        size_t off = o->size ? below(o->size) : 0;
        drop(s);
        printf("read %d\n", *(volatile unsigned char *)(p + off));
    } else {
        fail("unknown injection", 0, 0);
    }
}

int main(int argc, char **argv) {
    const char *pre = getenv("LD_PRELOAD");
    one_time = pre && strstr(pre, "nevermore");
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz SEED NOPS [INJECT AT] | fuzz - [INJECT AT]\n");
        return 64;
    }
    long nops, at = -1;
    const char *kind = 0;
    int a = 2;
    if (!strcmp(argv[1], "-")) {
        static unsigned char buf[1 << 20];
        stream_len = fread(buf, 1, sizeof buf, stdin);
        stream = buf;
        nops = (long)stream_len; /* ~1 op per 4-8 bytes; stops when the input runs out */
    } else {
        if (argc < 3) return 64;
        rng_state = strtoull(argv[1], 0, 0);
        nops = strtol(argv[2], 0, 0);
        a = 3;
    }
    if (argc >= a + 2) {
        kind = argv[a];
        at = strtol(argv[a + 1], 0, 0);
    }
    for (op_no = 0; op_no < nops; op_no++) {
        if (stream && stream_pos >= stream_len) break;
        if (op_no == at) inject(kind);
        one_op();
    }
    for (int i = 0; i < MAXLIVE; i++)
        if (live[i].p) drop(i);
    if (kind) {
        printf("SURVIVED %s\n", kind);
        return 3;
    }
    printf("DIGEST %016llx\nOK %ld ops\n", (unsigned long long)digest, op_no);
    return 0;
}
