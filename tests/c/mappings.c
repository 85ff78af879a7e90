/*
 * Large objects when the process is short of mappings (vm.max_map_count).
 *
 * Usage: mappings LEFT OBJECTS
 *
 * First takes mappings of its own (every other page of a no-access reservation made readable)
 * until about LEFT remain under vm.max_map_count. Then allocates OBJECTS objects of 131 100
 * bytes (just above the page-object limit), stamps each at its start, at every 4 KiB and at
 * its end, checks them all, grows every tenth with realloc (checking what it kept) and frees
 * them all. Prints MAPS_LEFT (the mappings left before the objects) and OK, or what failed
 * (exit 1).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIZE 131100

static long read_long(const char *path) {
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f && fscanf(f, "%ld", &v) != 1) v = -1;
    if (f) fclose(f);
    return v;
}

static long maps_count(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    int c;
    if (!f) return -1;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

static unsigned char stamp(uintptr_t p, size_t at) { return (unsigned char)((p >> 12) * 7 + at * 13 + 1); }

static void fill(unsigned char *p, size_t n) {
    for (size_t at = 0; at < n; at += 4096) p[at] = stamp((uintptr_t)p, at);
    p[n - 1] = stamp((uintptr_t)p, n - 1);
}

static int intact(const unsigned char *p, const unsigned char *was, size_t n) {
    for (size_t at = 0; at < n; at += 4096)
        if (p[at] != stamp((uintptr_t)was, at)) return 0;
    return p[n - 1] == stamp((uintptr_t)was, n - 1);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        printf("usage: mappings LEFT OBJECTS\n");
        return 1;
    }
    long left = atol(argv[1]), n = atol(argv[2]);
    long max = read_long("/proc/sys/vm/max_map_count");
    long own = max - maps_count() - left;
    if (max <= 0 || own < 0) {
        printf("FAIL: cannot read the mapping counts\n");
        return 1;
    }
    if (own > 1000000) {
        printf("FAIL: vm.max_map_count is %ld: too many mappings to take (the default is 65530)\n", max);
        return 1;
    }
    size_t pages = (size_t)own + 2;
    unsigned char *r = mmap(NULL, pages * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
        printf("FAIL: reservation\n");
        return 1;
    }
    for (size_t i = 1; i + 1 < pages; i += 2)
        if (mprotect(r + i * 4096, 4096, PROT_READ)) {
            printf("FAIL: mprotect at %zu\n", i);
            return 1;
        }
    printf("MAPS_LEFT %ld\n", max - maps_count());
    unsigned char **p = calloc((size_t)n, sizeof *p);
    if (!p) {
        printf("FAIL: calloc\n");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        p[i] = malloc(SIZE);
        if (!p[i]) {
            printf("FAIL: malloc of object %ld returned NULL\n", i);
            return 1;
        }
        fill(p[i], SIZE);
    }
    for (long i = 0; i < n; i++)
        if (!intact(p[i], p[i], SIZE)) {
            printf("FAIL: object %ld damaged\n", i);
            return 1;
        }
    for (long i = 0; i < n; i += 10) {
        uintptr_t was = (uintptr_t)p[i];
        unsigned char *q = realloc(p[i], SIZE + SIZE / 10);
        if (!q) {
            printf("FAIL: realloc of object %ld returned NULL\n", i);
            return 1;
        }
        for (size_t at = 0; at < SIZE - 1; at += 4096)
            if (q[at] != stamp(was, at)) {
                printf("FAIL: realloc of object %ld lost byte %zu\n", i, at);
                return 1;
            }
        p[i] = q;
    }
    for (long i = 0; i < n; i++) free(p[i]);
    free(p);
    printf("OK\n");
    return 0;
}
