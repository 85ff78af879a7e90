/* A successful allocation, free, signal-mask change, stream transfer or directory read never
 * changes errno (glibc's behaviour,
 * which programs rely on: PostgreSQL checks errno after blocking signals around select()). */
#include <dirent.h>
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
    /* Calls the library makes again when they fail on paged-out pages (io). */
    FILE *f = tmpfile();
    char buf[3];
    errno = EINTR;
    if (!f || fwrite("abc", 1, 3, f) != 3)
        return 1;
    CHECK("fwrite");
    rewind(f);
    errno = EINTR;
    if (fread(buf, 1, 3, f) != 3)
        return 1;
    CHECK("fread");
    if (fread(buf, 1, 3, f) != 0)
        return 1;
    CHECK("fread at the end of the file");
    fclose(f);
    DIR *d = opendir("/");
    if (!d)
        return 1;
    errno = EINTR;
    int entries = 0;
    while (readdir(d)) {
        CHECK("readdir");
        entries++;
    }
    CHECK("readdir at the end of the directory");
    closedir(d);
    if (entries < 3)
        return 1;
    if (failures) return 1;
    printf("OK\n");
    return 0;
}
