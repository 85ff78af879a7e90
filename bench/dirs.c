/* dirs: what opening, reading and closing a directory costs, by the program's own opendir and
 * by the C library's scandir (whose directory stream is a view under the library).
 * usage: dirs DIR   prints: opendir-readdir-closedir <ns>/round; scandir <ns>/round
 * e.g.   cc -O2 -o /tmp/dirs bench/dirs.c && mkdir -p /tmp/d10 && touch /tmp/d10/f{1..10} &&
 *        for i in 1 2 3; do /tmp/dirs /tmp/d10; LD_PRELOAD=target/release/libnevermore.so /tmp/dirs /tmp/d10; done */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : ".";
    long rounds = 50000, entries = 0;
    double t0 = now();
    for (long i = 0; i < rounds; i++) {
        DIR *d = opendir(path);
        if (!d)
            return 1;
        while (readdir(d))
            entries++;
        closedir(d);
    }
    double t1 = now();
    for (long i = 0; i < rounds; i++) {
        struct dirent **v;
        int n = scandir(path, &v, NULL, alphasort);
        if (n < 0)
            return 1;
        for (int j = 0; j < n; j++)
            free(v[j]);
        free(v);
        entries -= n;
    }
    double t2 = now();
    if (entries != 0)
        return 1;
    printf("opendir-readdir-closedir %.0f ns/round; scandir %.0f ns/round\n", (t1 - t0) * 1e9 / rounds,
           (t2 - t1) * 1e9 / rounds);
    return 0;
}
