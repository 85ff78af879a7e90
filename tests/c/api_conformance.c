/*
 * API conformance of a malloc replacement against glibc semantics.
 *
 * Usage: api_conformance [section...]
 * Without arguments every section runs. Each failed check prints `FAIL: <what>` on stderr and the
 * program exits 1; on success it prints `OK`.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "pool_probe.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL: ");                                                             \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " [%s:%d: %s]\n", __FILE__, __LINE__, #cond);                          \
            failures++;                                                                            \
            if (failures > 20) {                                                                   \
                fprintf(stderr, "FAIL: too many failures\n");                                      \
                exit(1);                                                                           \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Sizes go through a volatile so the compiler can neither fold nor warn about them. */
static volatile size_t sink_size;
static size_t sz(size_t n) {
    sink_size = n;
    return sink_size;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return x;
}

static int is_aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static unsigned char pat(size_t i, unsigned tag) { return (unsigned char)((i * 31u + tag * 7u + 3u) & 0xff); }

static void fill(void *p, size_t n, unsigned tag) {
    unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        c[i] = pat(i, tag);
}

/* Returns the first mismatching index, or n when all bytes match. */
static size_t verify(const void *p, size_t n, unsigned tag) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != pat(i, tag))
            return i;
    return n;
}

static const size_t huge_sizes[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 15, SIZE_MAX - 4096, (size_t)1 << 62, (size_t)1 << 63,
    (size_t)PTRDIFF_MAX, (size_t)PTRDIFF_MAX + 1, (size_t)1 << 48,
};
#define N_HUGE (sizeof huge_sizes / sizeof huge_sizes[0])

/* ---------------------------------------------------------------------------------------------- */

/* Sizes just below SIZE_MAX, where adding a header, canary or rounding wraps around. */
static void check_near_max(void) {
    for (size_t k = 0; k < 4200; k++) {
        size_t n = SIZE_MAX - k;
        errno = 0;
        void *p = malloc(sz(n));
        CHECK(p == NULL && errno == ENOMEM, "malloc(SIZE_MAX - %zu) = %p, errno %d", k, p, errno);
        if (p)
            free(p);
        errno = 0;
        p = calloc(1, sz(n));
        CHECK(p == NULL && errno == ENOMEM, "calloc(1, SIZE_MAX - %zu) = %p, errno %d", k, p, errno);
        if (p)
            free(p);
    }
}

static void sec_malloc(void) {
    /* malloc(0): unique, non-NULL, freeable. */
    enum { NZ = 128 };
    void *z[NZ];
    for (int i = 0; i < NZ; i++) {
        z[i] = malloc(sz(0));
        CHECK(z[i] != NULL, "malloc(0) returned NULL (#%d)", i);
    }
    for (int i = 0; i < NZ; i++)
        for (int j = i + 1; j < NZ; j++)
            CHECK(z[i] == NULL || z[i] != z[j], "malloc(0) returned the same pointer twice (%p)", z[i]);
    for (int i = 0; i < NZ; i++)
        free(z[i]);

    /* free(NULL) is a no-op. */
    free(NULL);

    /* Default alignment is 16, blocks are distinct and writable. */
    for (size_t n = 1; n <= 4200; n += (n < 300 ? 1 : 37)) {
        unsigned char *p = malloc(sz(n));
        CHECK(p != NULL, "malloc(%zu) returned NULL", n);
        if (!p)
            continue;
        CHECK(is_aligned(p, 16), "malloc(%zu)=%p is not 16-byte aligned", n, (void *)p);
        fill(p, n, (unsigned)n);
        CHECK(verify(p, n, (unsigned)n) == n, "malloc(%zu) contents changed", n);
        free(p);
    }
    static const size_t big[] = {5000, 40000, 65536, 70000, 131072, 300000, 1 << 20, 3 << 20, 17 << 20};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        size_t n = big[i];
        unsigned char *p = malloc(sz(n));
        CHECK(p != NULL, "malloc(%zu) returned NULL", n);
        if (!p)
            continue;
        CHECK(is_aligned(p, 16), "malloc(%zu)=%p is not 16-byte aligned", n, (void *)p);
        fill(p, n, 5);
        CHECK(verify(p, n, 5) == n, "malloc(%zu) contents changed", n);
        free(p);
    }

    /* Many live blocks at once do not overlap. */
    enum { NL = 2000 };
    static unsigned char *live[NL];
    static size_t live_n[NL];
    for (int i = 0; i < NL; i++) {
        live_n[i] = 1 + rnd() % 600;
        live[i] = malloc(sz(live_n[i]));
        CHECK(live[i] != NULL, "malloc(%zu) returned NULL", live_n[i]);
        if (live[i])
            fill(live[i], live_n[i], (unsigned)i);
    }
    for (int i = 0; i < NL; i++) {
        if (live[i])
            CHECK(verify(live[i], live_n[i], (unsigned)i) == live_n[i], "live block %d overwritten", i);
        free(live[i]);
    }

    /* Impossible sizes: NULL with errno ENOMEM, no crash. */
    check_near_max();
    for (size_t i = 0; i < N_HUGE; i++) {
        errno = 0;
        void *p = malloc(sz(huge_sizes[i]));
        CHECK(p == NULL, "malloc(%#zx) did not fail", huge_sizes[i]);
        CHECK(errno == ENOMEM, "malloc(%#zx): errno=%d, want ENOMEM", huge_sizes[i], errno);
        free(p);
    }
}

static void sec_calloc(void) {
    /* Overflowing nmemb*size. */
    static const size_t ovf[][2] = {
        {SIZE_MAX, 2}, {2, SIZE_MAX}, {(SIZE_MAX >> 1) + 1, 2}, {(size_t)1 << 32, (size_t)1 << 32},
        {SIZE_MAX, SIZE_MAX}, {((size_t)1 << 33) + 1, (size_t)1 << 31}, {3, SIZE_MAX / 2},
    };
    for (size_t i = 0; i < sizeof ovf / sizeof ovf[0]; i++) {
        errno = 0;
        void *p = calloc(sz(ovf[i][0]), sz(ovf[i][1]));
        CHECK(p == NULL, "calloc(%#zx, %#zx) did not fail", ovf[i][0], ovf[i][1]);
        CHECK(errno == ENOMEM, "calloc(%#zx, %#zx): errno=%d, want ENOMEM", ovf[i][0], ovf[i][1], errno);
        free(p);
    }
    /* No overflow, but impossibly large. */
    for (size_t i = 0; i < N_HUGE; i++) {
        errno = 0;
        void *p = calloc(1, sz(huge_sizes[i]));
        CHECK(p == NULL, "calloc(1, %#zx) did not fail", huge_sizes[i]);
        CHECK(errno == ENOMEM, "calloc(1, %#zx): errno=%d, want ENOMEM", huge_sizes[i], errno);
        free(p);
    }
    /* Zero-sized requests return freeable non-NULL pointers. */
    void *a = calloc(sz(0), 10), *b = calloc(10, sz(0)), *c = calloc(sz(0), sz(0));
    CHECK(a && b && c, "calloc with a zero argument returned NULL");
    CHECK(a != b && b != c && a != c, "calloc(0) pointers are not unique");
    free(a);
    free(b);
    free(c);

    /* Zeroed, including memory that was dirty when it was freed just before. */
    static const size_t sizes[] = {1,    7,     16,     24,     100,     128,     1000,    4096,
                                   5000, 40000, 65536, 131072, 300000, 1 << 20, 5 << 20};
    enum { NB = 48 };
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        int rounds = n >= 1 << 20 ? 1 : 3;
        for (int r = 0; r < rounds; r++) {
            void *blk[NB];
            int nb = n >= 300000 ? 4 : NB;
            for (int i = 0; i < nb; i++) {
                blk[i] = malloc(sz(n));
                CHECK(blk[i] != NULL, "malloc(%zu) returned NULL", n);
                if (blk[i])
                    memset(blk[i], 0xA5 ^ i, n);
            }
            for (int i = 0; i < nb; i++)
                free(blk[i]);
            for (int i = 0; i < nb; i++) {
                unsigned char *p;
                switch ((i + r) % 3) {
                case 0: p = calloc(1, sz(n)); break;
                case 1: p = calloc(sz(n), 1); break;
                default: p = (n % 4 == 0) ? calloc(4, sz(n / 4)) : calloc(sz(n), 1); break;
                }
                blk[i] = p;
                CHECK(p != NULL, "calloc for %zu bytes returned NULL", n);
                if (!p)
                    continue;
                CHECK(is_aligned(p, 16), "calloc(%zu)=%p is not 16-byte aligned", n, (void *)p);
                size_t bad = n;
                for (size_t k = 0; k < n; k++)
                    if (p[k]) {
                        bad = k;
                        break;
                    }
                CHECK(bad == n, "calloc(%zu) round %d block %d: byte %zu is %#x, not zero", n, r, i, bad,
                      bad < n ? p[bad] : 0);
                memset(p, 0x5A, n);
            }
            for (int i = 0; i < nb; i++)
                free(blk[i]);
        }
    }
}

static void sec_realloc(void) {
    /* realloc(NULL, n) behaves as malloc. */
    unsigned char *p = realloc(NULL, sz(100));
    CHECK(p != NULL, "realloc(NULL, 100) returned NULL");
    CHECK(is_aligned(p, 16), "realloc(NULL, 100) not 16-byte aligned");
    fill(p, 100, 1);
    free(p);
    p = realloc(NULL, sz(0));
    CHECK(p != NULL, "realloc(NULL, 0) returned NULL");
    free(p);

    /* Grow step by step from 1 to beyond 2 MiB and back down; contents are kept each time. */
    static size_t steps[512];
    size_t ns = 0;
    for (size_t n = 1; n <= 70000; n = n + 1 + n / 5)
        steps[ns++] = n;
    static const size_t extra[] = {4095, 4096, 4097, 65535, 65536, 65537, 70000, 131071, 131072,
                                   131073, 300000, 1 << 20, (1 << 20) + 1, 2 << 20, (2 << 20) + 12345};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        steps[ns++] = extra[i];
    /* sort */
    for (size_t i = 1; i < ns; i++)
        for (size_t j = i; j > 0 && steps[j - 1] > steps[j]; j--) {
            size_t t = steps[j];
            steps[j] = steps[j - 1];
            steps[j - 1] = t;
        }
    p = malloc(sz(1));
    CHECK(p != NULL, "malloc(1) returned NULL");
    if (!p)
        return;
    fill(p, 1, 9);
    size_t cur = 1;
    for (int dir = 0; dir < 2; dir++) {
        for (size_t k = 0; k < ns; k++) {
            size_t n = dir == 0 ? steps[k] : steps[ns - 1 - k];
            unsigned char *q = realloc(p, sz(n));
            CHECK(q != NULL, "realloc(%zu -> %zu) returned NULL", cur, n);
            if (!q)
                return;
            CHECK(is_aligned(q, 16), "realloc(%zu -> %zu)=%p is not 16-byte aligned", cur, n, (void *)q);
            size_t keep = cur < n ? cur : n;
            size_t bad = verify(q, keep, 9);
            CHECK(bad == keep, "realloc(%zu -> %zu) lost contents at byte %zu", cur, n, bad);
            CHECK(malloc_usable_size(q) >= n, "usable size %zu < %zu after realloc", malloc_usable_size(q), n);
            fill(q, n, 9);
            p = q;
            cur = n;
        }
    }
    /* Random jumps between small and large sizes. */
    for (int k = 0; k < 400; k++) {
        size_t n;
        switch (rnd() % 4) {
        case 0: n = rnd() % 64; break;
        case 1: n = rnd() % 4096; break;
        case 2: n = rnd() % 70001; break;
        default: n = rnd() % 400000; break;
        }
        if (n == 0)
            n = 1;
        unsigned char *q = realloc(p, sz(n));
        CHECK(q != NULL, "realloc(%zu -> %zu) returned NULL", cur, n);
        if (!q)
            return;
        size_t keep = cur < n ? cur : n;
        size_t bad = verify(q, keep, 9);
        CHECK(bad == keep, "realloc(%zu -> %zu) lost contents at byte %zu", cur, n, bad);
        fill(q, n, 9);
        p = q;
        cur = n;
    }

    /* A failing realloc leaves the block alone. */
    for (size_t i = 0; i < N_HUGE; i++) {
        errno = 0;
        unsigned char *q = realloc(p, sz(huge_sizes[i]));
        CHECK(q == NULL, "realloc(p, %#zx) did not fail", huge_sizes[i]);
        CHECK(errno == ENOMEM, "realloc(p, %#zx): errno=%d, want ENOMEM", huge_sizes[i], errno);
        if (q) {
            p = q;
            continue;
        }
        CHECK(verify(p, cur, 9) == cur, "failed realloc(p, %#zx) changed the block", huge_sizes[i]);
    }

    /* The same for blocks of other sizes and sizes just below SIZE_MAX. */
    static const size_t olds[] = {1, 8, 13, 24, 100, 1000, 5000, 40000, 300000};
    for (size_t oi = 0; oi < sizeof olds / sizeof olds[0]; oi++) {
        size_t on = olds[oi];
        unsigned char *o = malloc(sz(on));
        CHECK(o != NULL, "malloc(%zu) returned NULL", on);
        if (!o)
            continue;
        fill(o, on, 77);
        for (size_t k = 0; k < 64; k++) {
            errno = 0;
            unsigned char *q = realloc(o, sz(SIZE_MAX - k));
            CHECK(q == NULL, "realloc(%zu-byte block, SIZE_MAX - %zu) returned %p (block %p)", on, k, (void *)q,
                  (void *)o);
            CHECK(errno == ENOMEM, "realloc(%zu-byte block, SIZE_MAX - %zu): errno=%d", on, k, errno);
            if (q) {
                /* whatever came back, the old block is no longer safe to use */
                o = NULL;
                break;
            }
        }
        if (o) {
            CHECK(verify(o, on, 77) == on, "failed realloc changed a %zu-byte block", on);
            free(o);
        }
    }

    /* realloc(p, 0) frees p and returns NULL, as glibc does. */
    void *r = realloc(p, sz(0));
    CHECK(r == NULL, "realloc(p, 0) returned %p, want NULL (glibc frees)", r);
    free(r);

    /* In-place growth of a block surrounded by others keeps contents of neighbours. */
    unsigned char *a = malloc(sz(40)), *b = malloc(sz(40)), *c = malloc(sz(40));
    CHECK(a && b && c, "malloc(40) returned NULL");
    if (a && b && c) {
        fill(a, 40, 1);
        fill(b, 40, 2);
        fill(c, 40, 3);
        b = realloc(b, sz(4000));
        CHECK(b != NULL, "realloc(40 -> 4000) returned NULL");
        CHECK(verify(a, 40, 1) == 40 && verify(c, 40, 3) == 40, "realloc disturbed neighbours");
        CHECK(b && verify(b, 40, 2) == 40, "realloc(40 -> 4000) lost contents");
        free(a);
        free(b);
        free(c);
    }

    /* reallocarray */
    unsigned *v = reallocarray(NULL, sz(10), sizeof(unsigned));
    CHECK(v != NULL, "reallocarray(NULL, 10, 4) returned NULL");
    if (v) {
        for (unsigned i = 0; i < 10; i++)
            v[i] = i * 3;
        unsigned *w = reallocarray(v, sz(10000), sizeof(unsigned));
        CHECK(w != NULL, "reallocarray(v, 10000, 4) returned NULL");
        if (w) {
            v = w;
            for (unsigned i = 0; i < 10; i++)
                CHECK(v[i] == i * 3, "reallocarray lost element %u", i);
        }
        errno = 0;
        w = reallocarray(v, sz(SIZE_MAX / 2), sz(3));
        CHECK(w == NULL, "reallocarray overflow did not fail");
        CHECK(errno == ENOMEM, "reallocarray overflow: errno=%d, want ENOMEM", errno);
        errno = 0;
        w = reallocarray(v, sz((size_t)1 << 33), sz((size_t)1 << 33));
        CHECK(w == NULL, "reallocarray overflow 2^33*2^33 did not fail");
        CHECK(errno == ENOMEM, "reallocarray overflow: errno=%d, want ENOMEM", errno);
        for (unsigned i = 0; i < 10; i++)
            CHECK(v[i] == i * 3, "failed reallocarray changed element %u", i);
        free(v);
    }
    errno = 0;
    void *w = reallocarray(NULL, sz(SIZE_MAX), sz(SIZE_MAX));
    CHECK(w == NULL && errno == ENOMEM, "reallocarray(NULL, SIZE_MAX, SIZE_MAX): %p errno=%d", w, errno);
}

static void check_aligned_block(const char *fn, void *p, size_t align, size_t n) {
    CHECK(p != NULL, "%s(align=%#zx, %zu) returned NULL", fn, align, n);
    if (!p)
        return;
    CHECK(is_aligned(p, align), "%s(align=%#zx, %zu)=%p is misaligned", fn, align, n, p);
    CHECK(malloc_usable_size(p) >= n, "%s(align=%#zx, %zu): usable size %zu too small", fn, align, n,
          malloc_usable_size(p));
    fill(p, n, (unsigned)align);
    CHECK(verify(p, n, (unsigned)align) == n, "%s(align=%#zx, %zu) contents changed", fn, align, n);
}

static void sec_align(void) {
    /* posix_memalign: invalid alignments */
    static const size_t bad_align[] = {0, 1, 2, 4, 3, 12, 24, 48, 100, 4097, (size_t)1 << 63 | 8};
    for (size_t i = 0; i < sizeof bad_align / sizeof bad_align[0]; i++) {
        void *p = (void *)0x1;
        int rc = posix_memalign(&p, sz(bad_align[i]), sz(16));
        CHECK(rc == EINVAL, "posix_memalign(align=%#zx) returned %d, want EINVAL", bad_align[i], rc);
        if (rc == 0)
            free(p);
    }
    /* posix_memalign: impossible sizes return ENOMEM */
    for (size_t i = 0; i < N_HUGE; i++) {
        void *p = NULL;
        int rc = posix_memalign(&p, sz(64), sz(huge_sizes[i]));
        CHECK(rc == ENOMEM, "posix_memalign(64, %#zx) returned %d, want ENOMEM", huge_sizes[i], rc);
        if (rc == 0)
            free(p);
        rc = posix_memalign(&p, sz(1 << 20), sz(huge_sizes[i]));
        CHECK(rc == ENOMEM, "posix_memalign(1M, %#zx) returned %d, want ENOMEM", huge_sizes[i], rc);
        if (rc == 0)
            free(p);
    }
    /* memalign / aligned_alloc: impossible sizes give NULL + ENOMEM */
    for (size_t i = 0; i < N_HUGE; i++) {
        errno = 0;
        void *p = memalign(sz(64), sz(huge_sizes[i]));
        CHECK(p == NULL && errno == ENOMEM, "memalign(64, %#zx): %p errno=%d", huge_sizes[i], p, errno);
        free(p);
        errno = 0;
        p = aligned_alloc(sz(4096), sz(huge_sizes[i]));
        CHECK(p == NULL && errno == ENOMEM, "aligned_alloc(4096, %#zx): %p errno=%d", huge_sizes[i], p,
              errno);
        free(p);
    }

    /* Sizes just below SIZE_MAX, where rounding up to the alignment wraps around. */
    for (size_t k = 0; k < 4200; k += (k < 64 ? 1 : 61)) {
        size_t n = SIZE_MAX - k;
        for (int ak = 3; ak <= 21; ak += 6) {
            size_t al = (size_t)1 << ak;
            void *p = NULL;
            int rc = posix_memalign(&p, sz(al), sz(n));
            CHECK(rc == ENOMEM, "posix_memalign(%zu, SIZE_MAX - %zu) returned %d", al, k, rc);
            if (rc == 0)
                free(p);
            errno = 0;
            p = memalign(sz(al), sz(n));
            CHECK(p == NULL && errno == ENOMEM, "memalign(%zu, SIZE_MAX - %zu) = %p errno %d", al, k, p, errno);
            errno = 0;
            p = aligned_alloc(sz(al), sz(n));
            CHECK(p == NULL && errno == ENOMEM, "aligned_alloc(%zu, SIZE_MAX - %zu) = %p errno %d", al, k, p,
                  errno);
        }
        errno = 0;
        void *p = valloc(sz(n));
        CHECK(p == NULL && errno == ENOMEM, "valloc(SIZE_MAX - %zu) = %p errno %d", k, p, errno);
        errno = 0;
        p = pvalloc(sz(n));
        CHECK(p == NULL && errno == ENOMEM, "pvalloc(SIZE_MAX - %zu) = %p errno %d", k, p, errno);
    }

    /* Every power of two up to 1 GiB is honoured; blocks are freed right away and also held. */
    static void *held[3][31];
    for (int k = 0; k <= 30; k++) {
        size_t al = (size_t)1 << k;
        size_t n = 1 + (size_t)k * 3;
        void *p = NULL;
        if (al >= sizeof(void *)) {
            int rc = posix_memalign(&p, sz(al), sz(n));
            CHECK(rc == 0, "posix_memalign(align=%#zx, %zu) returned %d", al, n, rc);
            if (rc == 0) {
                check_aligned_block("posix_memalign", p, al, n);
                free(p);
            }
            rc = posix_memalign(&held[0][k], sz(al), sz(n));
            CHECK(rc == 0, "posix_memalign(align=%#zx, %zu) returned %d", al, n, rc);
            if (rc == 0)
                check_aligned_block("posix_memalign", held[0][k], al, n);
            else
                held[0][k] = NULL;
        }
        p = aligned_alloc(sz(al), sz(n));
        check_aligned_block("aligned_alloc", p, al, n);
        free(p);
        held[1][k] = aligned_alloc(sz(al), sz(n));
        check_aligned_block("aligned_alloc", held[1][k], al, n);

        p = memalign(sz(al), sz(n));
        check_aligned_block("memalign", p, al, n);
        free(p);
        held[2][k] = memalign(sz(al), sz(n));
        check_aligned_block("memalign", held[2][k], al, n);
    }
    for (int k = 0; k <= 30; k++)
        for (int f = 0; f < 3; f++) {
            if (!held[f][k])
                continue;
            size_t n = 1 + (size_t)k * 3;
            CHECK(verify(held[f][k], n, 1u << k) == n, "aligned block (fn %d, align 2^%d) overwritten", f, k);
            free(held[f][k]);
        }

    /* Aligned blocks of larger sizes. */
    static const size_t sizes[] = {0, 1, 100, 5000, 40000, 300000, 1 << 20};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int k = 4; k <= 21; k += 1) {
            size_t al = (size_t)1 << k, n = sizes[si];
            void *p = NULL;
            int rc = posix_memalign(&p, sz(al), sz(n));
            CHECK(rc == 0, "posix_memalign(align=%#zx, %zu) returned %d", al, n, rc);
            if (rc)
                continue;
            if (n)
                check_aligned_block("posix_memalign", p, al, n);
            else
                CHECK(is_aligned(p, al), "posix_memalign(align=%#zx, 0) misaligned", al);
            free(p);
        }

    /* valloc / pvalloc */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    static const size_t vs[] = {1, 100, 4095, 4096, 4097, 5000, 40000, 300000};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        size_t n = vs[i];
        void *p = valloc(sz(n));
        check_aligned_block("valloc", p, page, n);
        free(p);
        p = pvalloc(sz(n));
        check_aligned_block("pvalloc", p, page, n);
        if (p) {
            size_t rounded = (n + page - 1) / page * page;
            CHECK(malloc_usable_size(p) >= rounded, "pvalloc(%zu): usable size %zu < %zu", n,
                  malloc_usable_size(p), rounded);
            memset(p, 0x33, rounded);
        }
        free(p);
    }
    void *p = pvalloc(sz(0));
    CHECK(p != NULL && is_aligned(p, page), "pvalloc(0) = %p", p);
    free(p);
    p = valloc(sz(0));
    CHECK(p != NULL && is_aligned(p, page), "valloc(0) = %p", p);
    free(p);
}

static void sec_usable(void) {
    CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = %zu", malloc_usable_size(NULL));
    for (size_t n = 0; n <= 70000; n = n < 512 ? n + 1 : n + 997) {
        void *p = malloc(sz(n));
        CHECK(p != NULL, "malloc(%zu) returned NULL", n);
        if (!p)
            continue;
        size_t u = malloc_usable_size(p);
        CHECK(u >= n, "malloc_usable_size(malloc(%zu)) = %zu", n, u);
        CHECK(u < n + (1 << 20) + 4096, "malloc_usable_size(malloc(%zu)) = %zu is implausible", n, u);
        free(p);
    }
    void *p = calloc(3, sz(333));
    CHECK(p && malloc_usable_size(p) >= 999, "calloc(3, 333) usable size too small");
    free(p);
    p = malloc(sz(300000));
    CHECK(p && malloc_usable_size(p) >= 300000, "malloc(300000) usable size too small");
    free(p);
}

/* Bytes up to malloc_usable_size may be used by the program (glibc documents this). */
static void sec_usable_write(void) {
    static const size_t sizes[] = {1, 13, 24, 100, 1000, 5000, 40000, 300000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = malloc(sz(sizes[i]));
        CHECK(p != NULL, "malloc(%zu) returned NULL", sizes[i]);
        if (!p)
            continue;
        size_t u = malloc_usable_size(p);
        memset(p, 0x77, u);
        p = realloc(p, sz(u + 1));
        CHECK(p != NULL, "realloc to usable size + 1 failed");
        free(p);
    }
    /* Shrunk in place, right after the allocation: the usable size follows. */
    for (size_t n = 24; n <= 2000; n += 61) {
        unsigned char *p = malloc(sz(n));
        CHECK(p != NULL, "malloc(%zu) returned NULL", n);
        if (!p)
            continue;
        size_t before = malloc_usable_size(p);
        unsigned char *q = realloc(p, sz(n - 7));
        CHECK(q != NULL, "realloc(%zu -> %zu) failed", n, n - 7);
        size_t u = malloc_usable_size(q);
        CHECK(u >= n - 7 && (q != p || u <= before), "usable size %zu after shrinking %zu to %zu", u, n, n - 7);
        memset(q, 0x55, u);
        free(q);
    }
}

static void sec_misc(void) {
    /* mallinfo2 first: mallopt below may change how memory is obtained. */
    struct mallinfo2 before = mallinfo2();
    enum { NB = 1024, BS = 4096 };
    static void *blk[NB];
    for (int i = 0; i < NB; i++) {
        blk[i] = malloc(sz(BS));
        CHECK(blk[i] != NULL, "malloc(4096) returned NULL");
        if (blk[i])
            memset(blk[i], i, BS);
    }
    struct mallinfo2 after = mallinfo2();
    CHECK(after.uordblks >= before.uordblks + (2u << 20),
          "mallinfo2().uordblks did not grow after allocating 4 MiB: before %zu after %zu", before.uordblks,
          after.uordblks);
    CHECK(after.uordblks < ((size_t)1 << 40), "mallinfo2().uordblks implausible: %zu", after.uordblks);
    for (int i = 0; i < NB; i++)
        free(blk[i]);
    struct mallinfo2 freed = mallinfo2();
    CHECK(freed.uordblks < after.uordblks, "mallinfo2().uordblks did not drop after freeing 4 MiB: %zu -> %zu",
          after.uordblks, freed.uordblks);

    /* malloc_info: glibc's XML, whose last "system current" (the whole process's) counts the
     * 4 MiB still live; options other than 0 are refused. */
    for (int i = 0; i < NB; i++)
        blk[i] = malloc(sz(BS));
    FILE *xml = tmpfile();
    CHECK(xml && malloc_info(0, xml) == 0, "malloc_info(0) failed");
    CHECK(xml && malloc_info(1, xml) == EINVAL, "malloc_info(1) did not return EINVAL");
    if (xml) {
        static char text[1 << 16];
        rewind(xml);
        size_t n = fread(text, 1, sizeof text - 1, xml);
        text[n] = 0;
        fclose(xml);
        const char *cur = NULL;
        for (const char *c = text; (c = strstr(c, "<system type=\"current\" size=\"")); c++)
            cur = c;
        size_t current = cur ? strtoull(cur + strlen("<system type=\"current\" size=\""), NULL, 10) : 0;
        CHECK(!strncmp(text, "<malloc version=\"1\">", strlen("<malloc version=\"1\">")) && strstr(text, "</malloc>"), "malloc_info wrote: %.200s",
              text);
        CHECK(current >= (size_t)NB * BS, "malloc_info: system current %zu with %d KiB live", current, NB * BS / 1024);
    }
    for (int i = 0; i < NB; i++)
        free(blk[i]);

    int t = malloc_trim(0);
    CHECK(t == 0 || t == 1, "malloc_trim(0) returned %d", t);
    t = malloc_trim(1 << 20);
    CHECK(t == 0 || t == 1, "malloc_trim(1M) returned %d", t);

    CHECK(mallopt(M_TRIM_THRESHOLD, 256 * 1024) == 1, "mallopt(M_TRIM_THRESHOLD) did not return 1");
    CHECK(mallopt(M_MMAP_THRESHOLD, 256 * 1024) == 1, "mallopt(M_MMAP_THRESHOLD) did not return 1");
    CHECK(mallopt(M_TOP_PAD, 64 * 1024) == 1, "mallopt(M_TOP_PAD) did not return 1");
    /* Whatever these return, they must not crash. */
    (void)mallopt(M_MMAP_MAX, 65536);
    (void)mallopt(M_ARENA_MAX, 8);
    (void)mallopt(M_ARENA_TEST, 8);
    (void)mallopt(M_PERTURB, 0);
    (void)mallopt(M_CHECK_ACTION, 3);
    (void)mallopt(-12345, 1);
    (void)mallopt(4242, -1);

    /* Memory still works after all that. */
    void *p = malloc(sz(1000));
    CHECK(p != NULL, "malloc after mallopt returned NULL");
    memset(p, 1, 1000);
    free(p);
    p = malloc(sz(1 << 20));
    CHECK(p != NULL, "malloc(1M) after mallopt returned NULL");
    if (p)
        memset(p, 1, 1 << 20);
    free(p);
}

/* 100k random operations; every live block carries a pattern checked on free, realloc and
 * periodically for all live blocks. */
static void sec_random(void) {
    enum { SLOTS = 2048, OPS = 100000 };
    static unsigned char *blk[SLOTS];
    static size_t len[SLOTS];
    static unsigned tag[SLOTS];
    unsigned next_tag = 1;
    for (int op = 0; op < OPS; op++) {
        int s = (int)(rnd() % SLOTS);
        uint64_t r = rnd();
        size_t n;
        uint64_t d = r % 1000;
        if (d < 700)
            n = (r >> 10) % 257;
        else if (d < 930)
            n = 257 + (r >> 10) % 8000;
        else if (d < 990)
            n = 8257 + (r >> 10) % 62000;
        else
            n = 70257 + (r >> 10) % 250000;
        int action = (int)((r >> 40) % 16);
        if (blk[s] == NULL) {
            unsigned char *p;
            if (action < 10) {
                p = malloc(sz(n));
            } else if (action < 13) {
                p = calloc(1, sz(n));
                if (p)
                    for (size_t i = 0; i < n; i++)
                        if (p[i]) {
                            CHECK(0, "calloc(%zu) byte %zu not zero (op %d)", n, i, op);
                            break;
                        }
            } else {
                size_t al = (size_t)16 << ((r >> 50) % 9);
                void *q = NULL;
                if (posix_memalign(&q, sz(al), sz(n)) != 0)
                    q = NULL;
                p = q;
                CHECK(p == NULL || is_aligned(p, al), "posix_memalign(%zu) misaligned", al);
            }
            CHECK(p != NULL, "allocation of %zu returned NULL (op %d)", n, op);
            if (!p)
                continue;
            CHECK(is_aligned(p, 16), "block %p not 16-aligned", (void *)p);
            blk[s] = p;
            len[s] = n;
            tag[s] = next_tag++;
            fill(p, n, tag[s]);
        } else {
            size_t bad = verify(blk[s], len[s], tag[s]);
            CHECK(bad == len[s], "block of %zu bytes corrupted at byte %zu (op %d)", len[s], bad, op);
            if (action < 9) {
                free(blk[s]);
                blk[s] = NULL;
            } else {
                unsigned char *q = realloc(blk[s], sz(n));
                if (n == 0) {
                    CHECK(q == NULL, "realloc(p, 0) returned non-NULL");
                    blk[s] = NULL;
                    continue;
                }
                CHECK(q != NULL, "realloc(%zu -> %zu) returned NULL (op %d)", len[s], n, op);
                if (!q)
                    continue;
                size_t keep = len[s] < n ? len[s] : n;
                bad = verify(q, keep, tag[s]);
                CHECK(bad == keep, "realloc(%zu -> %zu) lost byte %zu (op %d)", len[s], n, bad, op);
                blk[s] = q;
                len[s] = n;
                tag[s] = next_tag++;
                fill(q, n, tag[s]);
            }
        }
        if (op % 10000 == 9999)
            for (int i = 0; i < SLOTS; i++)
                if (blk[i]) {
                    size_t b = verify(blk[i], len[i], tag[i]);
                    CHECK(b == len[i], "live block %d (%zu bytes) corrupted at byte %zu (op %d)", i, len[i], b,
                          op);
                }
    }
    for (int i = 0; i < SLOTS; i++) {
        if (blk[i]) {
            size_t b = verify(blk[i], len[i], tag[i]);
            CHECK(b == len[i], "live block %d (%zu bytes) corrupted at byte %zu at the end", i, len[i], b);
        }
        free(blk[i]);
    }
}

/* Successful calls leave errno alone; free never changes it (glibc >= 2.33 guarantees that). */
static void sec_errno(void) {
    static const size_t sizes[] = {0, 1, 24, 1000, 5000, 40000, 300000, 1 << 20, 9 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        errno = EDOM;
        void *p = malloc(sz(n));
        CHECK(errno == EDOM, "successful malloc(%zu) changed errno to %d", n, errno);
        p = realloc(p, sz(n * 2 + 1));
        CHECK(errno == EDOM, "successful realloc(%zu) changed errno to %d", n * 2 + 1, errno);
        free(p);
        CHECK(errno == EDOM, "free of a %zu-byte block changed errno to %d", n * 2 + 1, errno);
        p = calloc(1, sz(n));
        CHECK(errno == EDOM, "successful calloc(%zu) changed errno to %d", n, errno);
        free(p);
        CHECK(errno == EDOM, "free changed errno to %d", errno);
        void *q = NULL;
        CHECK(posix_memalign(&q, 4096, sz(n)) == 0, "posix_memalign(4096, %zu) failed", n);
        CHECK(errno == EDOM, "successful posix_memalign(%zu) changed errno to %d", n, errno);
        free(q);
        q = aligned_alloc(sz(64), sz(n));
        CHECK(errno == EDOM, "successful aligned_alloc(%zu) changed errno to %d", n, errno);
        free(q);
        CHECK(errno == EDOM, "free changed errno to %d", errno);
    }
    /* free(NULL) and a failed allocation followed by free keep errno too */
    errno = ERANGE;
    free(NULL);
    CHECK(errno == ERANGE, "free(NULL) changed errno to %d", errno);
    /* Many frees of cached/merged blocks */
    enum { N = 3000 };
    static void *b[N];
    for (int i = 0; i < N; i++)
        b[i] = malloc(sz((size_t)(i % 97) * 13 + 1));
    errno = EILSEQ;
    for (int i = 0; i < N; i++)
        free(b[i]);
    CHECK(errno == EILSEQ, "free of many blocks changed errno to %d", errno);
}

/* A buffer grown a little at a time, as string builders and readers of input of unknown
   length grow theirs: by a page, by 100 bytes, by 64 KiB + 17, to 64 MiB (8 MiB for the small
   steps). The contents stay at every step, and the program writes every new byte. */
static void sec_grow(void) {
    const size_t steps[] = {4096, 100, 65536 + 17};
    const size_t totals[] = {64u << 20, 8u << 20, 64u << 20};
    for (unsigned k = 0; k < 3; k++) {
        unsigned char *p = NULL;
        size_t n = 0;
        while (n < totals[k]) {
            size_t m = n + steps[k];
            unsigned char *q = realloc(p, sz(m));
            CHECK(q != NULL, "realloc(%zu -> %zu) returned NULL", n, m);
            if (!q) {
                free(p);
                return;
            }
            CHECK(n == 0 || (q[0] == pat(0, k) && q[n - 1] == pat(n - 1, k)),
                  "realloc(%zu -> %zu) lost the ends of the contents", n, m);
            for (size_t i = n; i < m; i++)
                q[i] = pat(i, k);
            p = q;
            n = m;
        }
        size_t bad = verify(p, n, k);
        CHECK(bad == n, "a buffer grown by %zu to %zu bytes lost contents at byte %zu", steps[k], n, bad);
        free(p);
    }
    /* Two buffers grown in turn: each one's pages and addresses are followed by the other's,
       so neither can always grow where it ends. */
    unsigned char *two[2] = {NULL, NULL};
    size_t n = 0;
    while (n < (32u << 20)) {
        size_t m = n + 65536 + 17;
        for (unsigned k = 0; k < 2; k++) {
            unsigned char *q = realloc(two[k], sz(m));
            CHECK(q != NULL, "realloc(%zu -> %zu) of buffer %u returned NULL", n, m, k);
            if (!q) {
                free(two[0]);
                free(two[1]);
                return;
            }
            CHECK(n == 0 || (q[0] == pat(0, 10 + k) && q[n - 1] == pat(n - 1, 10 + k)),
                  "realloc(%zu -> %zu) of buffer %u lost the ends of the contents", n, m, k);
            for (size_t i = n; i < m; i++)
                q[i] = pat(i, 10 + k);
            two[k] = q;
        }
        n += 65536 + 17;
    }
    for (unsigned k = 0; k < 2; k++) {
        size_t bad = verify(two[k], n, 10 + k);
        CHECK(bad == n, "buffer %u of two grown in turn lost contents at byte %zu", k, bad);
        free(two[k]);
    }
}

/* A big buffer cut down by realloc keeps its contents and gives the memory past its new end
   back (glibc moves such buffers with mremap): cut by a third, to a sixty-fourth, and a page at
   a time. */
static void sec_shrink(void) {
    size_t n = sz(64u << 20);
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(64 MiB) failed");
    if (!p) return;
    fill(p, n, 5);
    long rss0 = rss_kib(), pool0 = pool_kib();
    size_t m = sz(40u << 20);
    p = realloc(p, m);
    CHECK(p && verify(p, m, 5) == m, "realloc(64 -> 40 MiB) lost contents");
    if (!p) return;
    long rss1 = rss_kib(), pool1 = pool_kib();
    CHECK(rss0 - rss1 >= 20 << 10, "realloc(64 -> 40 MiB): resident %ld -> %ld KiB", rss0, rss1);
    CHECK(pool0 < 0 || pool0 - pool1 >= 20 << 10, "realloc(64 -> 40 MiB): heap memory %ld -> %ld KiB", pool0, pool1);
    m = sz(1u << 20);
    p = realloc(p, m);
    CHECK(p && verify(p, m, 5) == m, "realloc(40 -> 1 MiB) lost contents");
    if (!p) return;
    long rss2 = rss_kib(), pool2 = pool_kib();
    CHECK(rss1 - rss2 >= 30 << 10, "realloc(40 -> 1 MiB): resident %ld -> %ld KiB", rss1, rss2);
    CHECK(pool1 < 0 || pool1 - pool2 >= 30 << 10, "realloc(40 -> 1 MiB): heap memory %ld -> %ld KiB", pool1, pool2);
    free(p);
    n = sz(16u << 20);
    p = malloc(n);
    CHECK(p != NULL, "malloc(16 MiB) failed");
    if (!p) return;
    fill(p, n, 6);
    while (n > (256u << 10)) {
        n -= 4096;
        unsigned char *q = realloc(p, sz(n));
        CHECK(q != NULL, "realloc(-> %zu) returned NULL", n);
        if (!q) break;
        p = q;
        CHECK(p[0] == pat(0, 6) && p[n - 1] == pat(n - 1, 6), "realloc(-> %zu) lost the ends of the contents", n);
    }
    CHECK(verify(p, n, 6) == n, "a buffer cut a page at a time to %zu bytes lost contents", n);
    free(p);
}

static void sec_big(void) {
    size_t gib = (size_t)1 << 30;
    unsigned char *p = malloc(sz(gib));
    CHECK(p != NULL, "malloc(1 GiB) failed");
    if (p) {
        p[0] = 1;
        p[gib / 2] = 2;
        p[gib - 1] = 3;
        CHECK(malloc_usable_size(p) >= gib, "malloc(1 GiB): usable size %zu", malloc_usable_size(p));
        free(p);
    }
    size_t m = (size_t)64 << 20;
    p = malloc(sz(m));
    CHECK(p != NULL, "malloc(64 MiB) failed");
    if (p) {
        for (size_t i = 0; i < m; i += 4096)
            p[i] = (unsigned char)(i >> 12);
        p[m - 1] = 0x77;
        unsigned char *q = realloc(p, sz(m + (m >> 1)));
        CHECK(q != NULL, "realloc(64 MiB -> 96 MiB) failed");
        if (q) {
            p = q;
            size_t bad = m;
            for (size_t i = 0; i < m; i += 4096)
                if (p[i] != (unsigned char)(i >> 12)) {
                    bad = i;
                    break;
                }
            CHECK(bad == m && p[m - 1] == 0x77, "realloc(64 MiB -> 96 MiB) lost contents at %zu", bad);
            p[m + (m >> 1) - 1] = 4;
        }
        q = realloc(p, sz(4096));
        CHECK(q != NULL, "realloc(96 MiB -> 4096) failed");
        if (q) {
            p = q;
            CHECK(p[0] == 0 && p[4095] == 0, "realloc shrink from 96 MiB lost contents");
        }
        free(p);
    }
    size_t n = (size_t)256 << 20;
    p = calloc(1, sz(n));
    CHECK(p != NULL, "calloc(256 MiB) failed");
    if (p) {
        for (size_t i = 0; i < n; i += 4093)
            if (p[i]) {
                CHECK(0, "calloc(256 MiB) byte %zu not zero", i);
                break;
            }
        CHECK(p[n - 1] == 0, "calloc(256 MiB) last byte not zero");
        free(p);
    }
    void *a = NULL;
    CHECK(posix_memalign(&a, (size_t)1 << 30, sz(gib)) == 0, "posix_memalign(1 GiB, 1 GiB) failed");
    if (a) {
        CHECK(is_aligned(a, (size_t)1 << 30), "posix_memalign(1 GiB, 1 GiB) misaligned");
        ((unsigned char *)a)[gib - 1] = 1;
        free(a);
    }
}

/* syscall() and prctl(), which the library provides (to see seccomp filters the program
 * installs): the C library's results and errno. */
static void sec_syscall(void) {
    errno = 1234;
    CHECK(syscall(SYS_getpid) == getpid(), "syscall(SYS_getpid) differs from getpid()");
    CHECK(errno == 1234, "a successful syscall() changed errno to %d", errno);
    CHECK(syscall(SYS_close, -1) == -1 && errno == EBADF, "syscall(SYS_close, -1): errno %d", errno);
    /* Six arguments: process_vm_readv's sixth (flags) must be 0. */
    char from[16] = "nevermore", to[16] = {0};
    struct iovec l = {to, sizeof to}, r = {from, sizeof from};
    long n = syscall(SYS_process_vm_readv, getpid(), &l, 1UL, &r, 1UL, 0UL);
    CHECK(n == (long)sizeof from && !strcmp(to, "nevermore"), "process_vm_readv through syscall(): %ld, errno %d", n,
          errno);
    CHECK(syscall(SYS_process_vm_readv, getpid(), &l, 1UL, &r, 1UL, 1UL) == -1 && errno == EINVAL,
          "process_vm_readv with flags 1 did not fail with EINVAL (errno %d)", errno);
    char name[16] = {0};
    CHECK(prctl(PR_SET_NAME, "nm-syscall", 0, 0, 0) == 0, "prctl(PR_SET_NAME) failed: errno %d", errno);
    CHECK(prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && !strcmp(name, "nm-syscall"), "prctl(PR_GET_NAME): %s", name);
    CHECK(prctl(-1, 0, 0, 0, 0) == -1 && errno == EINVAL, "prctl(-1): errno %d", errno);
    CHECK(prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 0, "prctl(PR_GET_SECCOMP) is not 0 without a filter");
}

/* glibc's internal names of its allocator functions, which some programs call directly. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern void __libc_free(void *);

/* glibc's internal names share one heap with malloc and free, in both directions; C23's
 * free_sized and free_aligned_sized (looked up at run time: this libc may predate them, the
 * allocator under test must have them) take the sizes the objects were allocated with. */
static void sec_names(void) {
    static const size_t sizes[] = {0, 1, 24, 100, 1000, 4096, 5000, 70000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sz(sizes[i]);
        unsigned char *p = __libc_malloc(n);
        CHECK(p != NULL && is_aligned(p, 16), "__libc_malloc(%zu) = %p", n, (void *)p);
        fill(p, n, 1);
        p = realloc(p, n + 10);
        CHECK(p != NULL && verify(p, n, 1) == n, "realloc of __libc_malloc(%zu) lost contents", n);
        free(p);

        p = malloc(n);
        fill(p, n, 2);
        p = __libc_realloc(p, n * 2 + 1);
        CHECK(p != NULL && verify(p, n, 2) == n, "__libc_realloc of malloc(%zu) lost contents", n);
        __libc_free(p);

        p = __libc_calloc(n, 1);
        CHECK(p != NULL, "__libc_calloc(%zu, 1) = NULL", n);
        for (size_t k = 0; p && k < n; k++)
            if (p[k]) {
                CHECK(0, "__libc_calloc(%zu, 1) byte %zu is %u", n, k, p[k]);
                break;
            }
        free(p);

        void *q = __libc_memalign(256, n);
        CHECK(q != NULL && is_aligned(q, 256), "__libc_memalign(256, %zu) = %p", n, q);
        free(q);
        q = __libc_valloc(n);
        CHECK(q != NULL && is_aligned(q, 4096), "__libc_valloc(%zu) = %p", n, q);
        __libc_free(q);
        q = __libc_pvalloc(n);
        CHECK(q != NULL && is_aligned(q, 4096) && malloc_usable_size(q) >= ((n + 4095) & ~(size_t)4095),
              "__libc_pvalloc(%zu) = %p (usable %zu)", n, q, q ? malloc_usable_size(q) : 0);
        free(q);
    }
    __libc_free(NULL);

    void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
    void (*fas)(void *, size_t, size_t) = (void (*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
    int ours = pool_kib() >= 0;
    CHECK(!ours || (fs && fas), "free_sized %p, free_aligned_sized %p: missing", (void *)fs, (void *)fas);
    if (!fs || !fas)
        return; /* this libc has neither, and the program runs without the allocator */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sz(sizes[i]);
        fs(malloc(n), n);
        fs(calloc(sz(3), n), 3 * n);
        if (n) { /* realloc(p, 0) frees */
            void *p = malloc(sz(n / 2 + 1));
            p = realloc(p, n);
            CHECK(p != NULL, "realloc to %zu = NULL", n);
            fs(p, n);
        }
        fas(aligned_alloc(64, n), 64, n);
        fas(aligned_alloc(8192, n), 8192, n);
    }
    fs(NULL, 0);
    fs(NULL, 100);
    fas(NULL, 64, 100);
}

struct section {
    const char *name;
    void (*fn)(void);
};

static const struct section sections[] = {
    {"malloc", sec_malloc},   {"calloc", sec_calloc},         {"realloc", sec_realloc},
    {"align", sec_align},     {"usable", sec_usable},         {"usable-write", sec_usable_write},
    {"misc", sec_misc},       {"random", sec_random},         {"errno", sec_errno},
    {"big", sec_big},         {"grow", sec_grow},             {"shrink", sec_shrink},
    {"syscall", sec_syscall}, {"names", sec_names},
};
#define N_SECTIONS (sizeof sections / sizeof sections[0])

int main(int argc, char **argv) {
    alarm(60);
    if (argc < 2) {
        for (size_t i = 0; i < N_SECTIONS; i++)
            sections[i].fn();
    } else {
        for (int a = 1; a < argc; a++) {
            size_t i;
            for (i = 0; i < N_SECTIONS; i++)
                if (strcmp(argv[a], sections[i].name) == 0)
                    break;
            if (i == N_SECTIONS) {
                fprintf(stderr, "FAIL: unknown section %s\n", argv[a]);
                return 2;
            }
            sections[i].fn();
        }
    }
    if (failures) {
        fprintf(stderr, "FAIL: %d check(s) failed\n", failures);
        return 1;
    }
    printf("OK\n");
    return 0;
}
