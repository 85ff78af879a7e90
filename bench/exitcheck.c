/* exitcheck: what the check of live objects' canaries at exit costs (detect mode,
 * `check_at_exit`): allocates N objects of random sizes (16..SIZE bytes, a tenth of them page
 * objects of 2-12 KiB unless SIZE says otherwise), writes each, keeps them all, and exits; with
 * T > 0, T threads allocate and free meanwhile, still running at exit. Time the whole run
 * with the check on and off.
 * usage: exitcheck [N [SIZE [T]]]   (100000, 1024, 0 by default) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *churn(void *arg) {
    uint64_t s = (uintptr_t)arg | 1;
    for (;;)
        free(malloc(16 + rng(&s) % 1000));
    return NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000, size = argc > 2 ? atol(argv[2]) : 1024;
    int threads = argc > 3 ? atoi(argv[3]) : 0;
    uint64_t s = 88172645463325252ULL;
    void **keep = malloc(n * sizeof *keep);
    for (long i = 0; i < n; i++) {
        uint64_t r = rng(&s);
        size_t len = r % 10 == 0 ? 2048 + (r >> 8) % 10240 : 16 + (r >> 8) % (size_t)size;
        keep[i] = malloc(len);
        memset(keep[i], (int)i, len);
    }
    for (int t = 0; t < threads; t++) {
        pthread_t id;
        pthread_create(&id, NULL, churn, (void *)(uintptr_t)(t + 1));
    }
    if (threads)
        usleep(10000);
    printf("%ld objects live at exit\n", n);
    return 0;
}
