/* streams: what opening, reading and closing a stream costs, and a small fread.
 * Writes FILE (100 000 short lines), then times 100 000 rounds of fopen, fgets, fclose, and
 * 20 passes of 16-byte freads over the file.
 * usage: streams FILE   prints: fopen-fgets-fclose <ns>/round; fread16 <ns>/call
 * e.g.   cc -O2 -o /tmp/streams bench/streams.c &&
 *        for i in 1 2 3; do /tmp/streams /tmp/lines; LD_PRELOAD=target/release/libnevermore.so /tmp/streams /tmp/lines; done */
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "/tmp/nevermore-streams-bench";
    FILE *w = fopen(path, "w");
    if (!w)
        return 1;
    for (int i = 0; i < 100000; i++)
        fprintf(w, "line %d of the file\n", i);
    fclose(w);
    char line[256];
    long rounds = 100000, lines = 0;
    double t0 = now();
    for (long i = 0; i < rounds; i++) {
        FILE *f = fopen(path, "r");
        if (!f)
            return 1;
        lines += fgets(line, sizeof line, f) != NULL;
        fclose(f);
    }
    double t1 = now();
    FILE *f = fopen(path, "r");
    char b[16];
    long bytes = 0;
    for (int r = 0; r < 20; r++) {
        rewind(f);
        size_t k;
        while ((k = fread(b, 1, sizeof b, f)) > 0)
            bytes += (long)k;
    }
    double t2 = now();
    fclose(f);
    printf("fopen-fgets-fclose %.0f ns/round; fread16 %.1f ns/call (%ld lines, %ld bytes)\n",
           (t1 - t0) * 1e9 / (double)rounds, (t2 - t1) * 1e9 / ((double)bytes / 16), lines, bytes);
    return lines == rounds ? 0 : 1;
}
