/*
 * Stream buffers: the C library allocates a stream's buffer itself, and the library gives it
 * a view of its own, kept for the next stream when the stream is closed.
 *
 * Usage: streams reuse    opens, reads and closes a file 200 times, with other streams
 *                         opened in between; prints "reuse OK"
 *        streams invalid  frees the buffer of an open stream (the C library frees it)
 *        streams double   closes a stream, then frees its buffer (freed twice)
 *        streams dirs     reads / 100 times with opendir or fdopendir, then 20 times with
 *                         scandir; prints "dirs OK"
 *        streams given    gives streams heap buffers of its own (setvbuf, setbuf, setbuffer):
 *                         one stream stays open to the end, its buffer's only pointer in the
 *                         stream; two are closed and their buffers freed; one is closed and
 *                         its buffer of 12345 bytes dropped (a leak); prints "given OK"
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fail(const char *what) {
    printf("FAIL %s\n", what);
    exit(1);
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "reuse";
    /* Standard output gets its buffer now, so that it does not take the one freed below. */
    printf("%s\n", which);
    fflush(stdout);
    char path[] = "/tmp/nevermore-streams-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, "first line\nsecond line\n", 23) != 23)
        fail("mkstemp");
    close(fd);
    if (strcmp(which, "dirs") == 0) {
        /* Directory streams the program opens stay ordinary objects; those the C library opens
         * for itself inside scandir are views. */
        long seen = 0;
        for (int i = 0; i < 100; i++) {
            DIR *d = i % 2 ? opendir("/") : fdopendir(open("/", O_RDONLY | O_DIRECTORY));
            if (!d)
                fail("opendir");
            while (readdir(d))
                seen++;
            closedir(d);
        }
        for (int i = 0; i < 20; i++) {
            struct dirent **v;
            int n = scandir("/", &v, NULL, alphasort);
            if (n <= 2)
                fail("scandir");
            seen -= 5L * n;
            while (n--)
                free(v[n]);
            free(v);
        }
        if (seen != 0)
            fail("entries");
        unlink(path);
        printf("dirs OK\n");
        return 0;
    }
    if (strcmp(which, "given") == 0) {
        char line[64];
        /* Open to the end: the stream is the only holder of the buffer's address. */
        FILE *kept = fopen(path, "r");
        if (!kept || setvbuf(kept, malloc(8192), _IOFBF, 8192) != 0)
            fail("setvbuf");
        if (!fgets(line, sizeof line, kept) || strcmp(line, "first line\n") != 0)
            fail("fgets through a buffer given with setvbuf");
        /* Given a buffer twice, closed, and both freed. */
        char *one = malloc(BUFSIZ), *two = malloc(1000);
        FILE *f = fopen(path, "r");
        if (!f)
            fail("fopen");
        setbuf(f, one);
        setbuffer(f, two, 1000);
        if (!fgets(line, sizeof line, f) || !fgets(line, sizeof line, f) || strcmp(line, "second line\n") != 0)
            fail("fgets through a buffer given with setbuffer");
        if (fclose(f) != 0)
            fail("fclose");
        free(one);
        free(two);
        /* Closed, its buffer dropped: a leak, as under any allocator. */
        f = fopen(path, "r");
        if (!f || setvbuf(f, malloc(12345), _IOLBF, 12345) != 0 || fgetc(f) != 'f' || fclose(f) != 0)
            fail("a stream given a buffer that is then dropped");
        unlink(path);
        printf("given OK\n");
        fflush(stdout);
        return 0;
    }
    if (strcmp(which, "reuse") == 0) {
        char line[64];
        for (int i = 0; i < 200; i++) {
            FILE *a = fopen(path, "r"), *b = fopen(path, "r");
            if (!a || !b || !fgets(line, sizeof line, a) || strcmp(line, "first line\n") != 0)
                fail("fopen or fgets");
            if (!fgets(line, sizeof line, b) || !fgets(line, sizeof line, b) || strcmp(line, "second line\n") != 0)
                fail("the second stream");
            if (fclose(a) != 0 || fclose(b) != 0)
                fail("fclose");
        }
        unlink(path);
        printf("reuse OK\n");
        return 0;
    }
    FILE *f = fopen(path, "r");
    unlink(path);
    if (!f || fgetc(f) != 'f' || !f->_IO_buf_base)
        fail("fopen");
    char *buf = f->_IO_buf_base;
    if (strcmp(which, "invalid") == 0) {
        free(buf);
        printf("freed the buffer of an open stream\n");
        return 0;
    }
    fclose(f);
    printf("closed\n");
    fflush(stdout);
    free(buf);
    printf("freed the buffer of a closed stream\n");
    return 0;
}
