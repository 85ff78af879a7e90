/* A preload that forwards the malloc API to glibc's own allocator (the __libc_* entry points).
 * Debian's redis-server links jemalloc; preloading this makes its true glibc baseline. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
void *calloc(size_t n, size_t m) { return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
void *valloc(size_t n) { return __libc_valloc(n); }
void *pvalloc(size_t n) { return __libc_pvalloc(n); }

void *aligned_alloc(size_t a, size_t n) {
    if (a == 0 || (a & (a - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    return __libc_memalign(a, n);
}

int posix_memalign(void **out, size_t a, size_t n) {
    if (a < sizeof(void *) || (a & (a - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

/* glibc's malloc_usable_size, looked up in libc itself (RTLD_NEXT could find jemalloc's). */
size_t malloc_usable_size(void *p) {
    static size_t (*real)(void *);
    if (!real) {
        void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        if (h) real = (size_t (*)(void *))dlsym(h, "malloc_usable_size");
        if (!real) return 0;
    }
    return real(p);
}
