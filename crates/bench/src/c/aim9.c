/* aim9: a dynamic-memory test in the spirit of AIM9's memory routines: mixed sizes, linked lists
 * built and torn down, arrays grown with realloc, strings duplicated and joined, calloc'ed tables.
 * usage: aim9 ITERATIONS   prints: RESULT checksum=<n> */
#include <string.h>
#include "common.h"

struct node {
    struct node *next;
    size_t len;
    unsigned char *payload;
};

static uint64_t checksum;

static void lists(uint64_t *seed) {
    struct node *head = NULL;
    long n = 2000;
    for (long i = 0; i < n; i++) {
        struct node *x = xmalloc(sizeof *x);
        x->len = 8 + rng_next(seed) % 504;
        x->payload = xmalloc(x->len);
        memset(x->payload, (int)i, x->len);
        x->next = head;
        head = x;
    }
    /* unlink every third node first (frees in a scattered order), then the rest */
    struct node **pp = &head;
    long k = 0;
    while (*pp) {
        if (k++ % 3 == 0) {
            struct node *d = *pp;
            *pp = d->next;
            checksum += d->payload[d->len - 1];
            free(d->payload);
            free(d);
        } else {
            pp = &(*pp)->next;
        }
    }
    while (head) {
        struct node *d = head;
        head = d->next;
        checksum += d->len;
        free(d->payload);
        free(d);
    }
}

static void arrays(uint64_t *seed) {
    for (int a = 0; a < 8; a++) {
        size_t cap = 4, len = 0;
        long *v = xmalloc(cap * sizeof *v);
        size_t target = 256 + rng_next(seed) % 8192;
        while (len < target) {
            if (len == cap) {
                cap = cap + cap / 2 + 1; /* grow by 1.5x: many realloc calls */
                long *w = realloc(v, cap * sizeof *v);
                if (!w) exit(3);
                v = w;
            }
            v[len] = (long)len;
            len++;
        }
        /* shrink back in steps */
        while (cap > 64) {
            cap /= 3;
            long *w = realloc(v, cap * sizeof *v);
            if (!w) exit(3);
            v = w;
        }
        checksum += (uint64_t)v[cap - 1];
        free(v);
    }
}

static void strings(uint64_t *seed) {
    char *words[512];
    for (int i = 0; i < 512; i++) {
        size_t n = 1 + rng_next(seed) % 60;
        char buf[64];
        for (size_t j = 0; j < n; j++) buf[j] = (char)('a' + (rng_next(seed) % 26));
        buf[n] = 0;
        words[i] = strdup(buf);
        if (!words[i]) exit(3);
    }
    size_t len = 0, cap = 16;
    char *s = xmalloc(cap);
    s[0] = 0;
    for (int i = 0; i < 512; i++) {
        size_t w = strlen(words[i]);
        if (len + w + 2 > cap) {
            cap = len + w + 2 + (rng_next(seed) % 32);
            char *t = realloc(s, cap);
            if (!t) exit(3);
            s = t;
        }
        memcpy(s + len, words[i], w);
        len += w;
        s[len++] = ' ';
        s[len] = 0;
    }
    checksum += len;
    free(s);
    for (int i = 511; i >= 0; i--) free(words[i]);
}

static void tables(uint64_t *seed) {
    for (int t = 0; t < 16; t++) {
        size_t rows = 16 + rng_next(seed) % 48;
        double **m = calloc(rows, sizeof *m);
        if (!m) exit(3);
        for (size_t r = 0; r < rows; r++) {
            m[r] = calloc(rows, sizeof **m);
            if (!m[r]) exit(3);
            m[r][r] = 1.0;
        }
        for (size_t r = 0; r < rows; r++) {
            checksum += (uint64_t)m[r][r];
            free(m[r]);
        }
        free(m);
    }
}

int main(int argc, char **argv) {
    long iters = arg_long(argc, argv, 1, 200);
    uint64_t seed = 0xA1B2C3D4E5F60718ULL;
    for (long i = 0; i < iters; i++) {
        lists(&seed);
        arrays(&seed);
        strings(&seed);
        tables(&seed);
    }
    printf("RESULT checksum=%llu\n", (unsigned long long)checksum);
    return 0;
}
