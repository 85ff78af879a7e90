/* What a daemon does between start-up and its first error, run before a double free whose
 * report must reach `report_path` (set with a path the test can read):
 *
 *   daemon title          writes a process title over the memory of its arguments and
 *                         environment (as nginx, OpenSSH and perl's `$0 = ...` do)
 *   daemon chdir          changes to / (report_path relative: the file is where it started)
 *   daemon setuid         drops root for nobody (the report file's directory is root's)
 *   daemon closeall FILE  closes every descriptor above 2, puts FILE (its own, created) at
 *                         every number from 3 to 959 with dup2 and writes "mine\n" to it:
 *                         FILE must hold that line and nothing of the report
 *   daemon null           points standard error at /dev/null
 *
 * Each prints "READY" on stdout before the double free; the process then ends the way the
 * report's action says. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

static void fail(const char *what) {
    fprintf(stderr, "DAEMON FAIL: %s (errno %d)\n", what, errno);
    exit(2);
}

/* The argument and environment strings lie end to end: move the environment to copies and
 * write a title over all of it, as setproctitle does. */
static void set_title(char **argv) {
    char *start = argv[0], *end = argv[0];
    for (int i = 0; argv[i]; i++)
        if (argv[i] == end || i == 0)
            end = argv[i] + strlen(argv[i]) + 1;
    int n = 0;
    while (environ[n])
        n++;
    char **copy = malloc((size_t)(n + 1) * sizeof *copy);
    if (!copy)
        fail("malloc");
    for (int i = 0; i < n; i++) {
        if (environ[i] == end)
            end = environ[i] + strlen(environ[i]) + 1;
        copy[i] = strdup(environ[i]);
        if (!copy[i])
            fail("strdup");
    }
    copy[n] = NULL;
    environ = copy;
    memset(start, ' ', (size_t)(end - start - 1));
    memcpy(start, "daemon: worker", 14);
    end[-1] = 0;
}

int main(int argc, char **argv) {
    if (argc < 2)
        fail("usage: daemon title|chdir|setuid|closeall FILE|null");
    const char *how = argv[1];
    if (!strcmp(how, "title")) {
        set_title(argv);
    } else if (!strcmp(how, "chdir")) {
        if (chdir("/"))
            fail("chdir");
    } else if (!strcmp(how, "setuid")) {
        if (setgid(65534) || setuid(65534))
            fail("setuid");
    } else if (!strcmp(how, "closeall")) {
        if (argc < 3)
            fail("closeall needs a file");
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0666);
        if (fd < 0)
            fail("open");
        if (syscall(SYS_close_range, 3u, ~0u, 0u))
            fail("close_range");
        /* fd was closed with the rest: open it again and spread it over the numbers the
         * allocator's descriptors had (a few are left free for it to open the report file
         * again). */
        fd = open(argv[2], O_WRONLY | O_APPEND);
        if (fd < 0)
            fail("open again");
        for (int n = 3; n < 960; n++)
            if (n != fd && dup2(fd, n) < 0)
                fail("dup2");
        if (write(fd, "mine\n", 5) != 5)
            fail("write");
    } else if (!strcmp(how, "null")) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd < 0 || dup2(fd, 2) < 0)
            fail("/dev/null");
    } else {
        fail("unknown mode");
    }
    printf("READY\n");
    fflush(stdout);
    char *volatile p = malloc(40);
    free(p);
    free(p);
    printf("NOT REPORTED\n");
    return 0;
}
