/* getlines: what getline costs through the allocator's exported one (crates/nevermore/src/io.rs,
 * `line_grown`, which looks the buffer's heap object up on every call): reads FILE line by line
 * into one buffer that getline grows itself, and prints the nanoseconds per line.
 * usage: getlines FILE   (e.g. seq 1 2000000 > lines.txt) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    FILE *f = argc > 1 ? fopen(argv[1], "r") : NULL;
    if (!f) {
        fprintf(stderr, "usage: getlines FILE\n");
        return 2;
    }
    char *line = NULL;
    size_t n = 0;
    long bytes = 0, lines = 0;
    ssize_t r;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while ((r = getline(&line, &n, f)) > 0) {
        bytes += r;
        lines++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.1f ns per line (%ld lines, %ld bytes)\n",
           ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (lines ? lines : 1), lines, bytes);
    free(line);
    fclose(f);
    return 0;
}
