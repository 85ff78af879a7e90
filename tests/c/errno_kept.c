/* A successful allocation, free or signal-mask change never changes errno (glibc's behaviour,
 * which programs rely on: PostgreSQL checks errno after blocking signals around select()). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(what)                                                                  \
    do {                                                                             \
        if (errno != EINTR) {                                                        \
            fprintf(stderr, "FAIL: %s changed errno to %d (%s)\n", what, errno,      \
                    strerror(errno));                                                \
            failures++;                                                              \
        }                                                                            \
        errno = EINTR;                                                               \
    } while (0)

int main(void) {
    errno = EINTR;
    void *keep[2000];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 2000; i++) {
            keep[i] = malloc((size_t)(i * 37) % 300000);
            CHECK("malloc");
        }
        for (int i = 0; i < 2000; i++) {
            keep[i] = realloc(keep[i], (size_t)(i * 53) % 9000 + 1);
            CHECK("realloc");
        }
        for (int i = 0; i < 2000; i++) {
            free(keep[i]);
            CHECK("free");
        }
        void *c = calloc(100, 100);
        CHECK("calloc");
        free(c);
        void *a = aligned_alloc(4096, 10000);
        CHECK("aligned_alloc");
        free(a);
    }
    sigset_t all, old;
    sigfillset(&all);
    errno = EINTR;
    sigprocmask(SIG_BLOCK, &all, &old);
    CHECK("sigprocmask(SIG_BLOCK, full set)");
    sigprocmask(SIG_SETMASK, &old, NULL);
    CHECK("sigprocmask(SIG_SETMASK)");
    pthread_sigmask(SIG_BLOCK, &all, &old);
    CHECK("pthread_sigmask");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (failures) return 1;
    printf("OK\n");
    return 0;
}
