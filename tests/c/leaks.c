/* The leak check at exit (detect mode, detect_leaks=1).
 *
 *   leaks clean     every object it keeps is reachable at exit: from a global (a list of 1000
 *                   nodes, each node reachable only through the one before), through a
 *                   pointer into an object's middle, a page object and a large object held
 *                   only by other heap objects, and an object held only by the stack of a
 *                   thread that is still blocked in read() when main returns; prints "clean"
 *   leaks leak      drops 10 objects of 40 bytes (make_small), a list of 100 nodes of 32
 *                   bytes (make_list: the head dropped), a page object of 8192 bytes
 *                   (make_page), a large one of 300000 bytes (make_large), and one of 24
 *                   bytes at the bottom of a recursion 300 calls deep (make_deep), whose
 *                   pointer stays behind in stack memory below the frames in use at exit;
 *                   keeps one more of each but the last in globals; prints "leaked" (the
 *                   report comes at exit)
 *   leaks freed     allocates and frees everything again; prints "freed"
 *   leaks closed    leaks one object (make_deep), then closes its standard output and
 *                   standard error (as coreutils do at exit)
 *   leaks reopened FILE
 *                   leaks one object (make_deep), closes standard error and creates FILE,
 *                   which takes descriptor 2, and writes "data\n" into it */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

struct node {
    struct node *next;
    long value[3];
};

/* Volatile: the compiler must not drop stores to globals that the program never reads. */
static struct node *volatile list_head;
static void *volatile keep_small, *volatile keep_page, *volatile keep_large;
static char *volatile middle; /* points 24 bytes into an object */
static void **volatile holder; /* holds the only pointers to a page and a large object */
static volatile long sink;

NOINLINE static struct node *make_list(int n) {
    struct node *head = NULL;
    for (int i = 0; i < n; i++) {
        struct node *x = malloc(sizeof *x); /* AT:list */
        x->next = head;
        x->value[0] = i;
        head = x;
    }
    return head;
}

NOINLINE static void make_small(int n) {
    for (int i = 0; i < n; i++) {
        char *p = malloc(40); /* AT:small */
        memset(p, i, 40);
        sink += p[3];
    }
}

NOINLINE static void *make_page(void) {
    char *p = malloc(8192); /* AT:page */
    memset(p, 1, 8192);
    return p;
}

NOINLINE static void *make_large(void) {
    char *p = malloc(300000); /* AT:large */
    memset(p, 2, 300000);
    return p;
}

/* Leaves a pointer to a new object in a stack frame far below what the exit path uses. */
NOINLINE static long make_deep(int depth) {
    volatile char pad[64];
    pad[0] = (char)depth;
    if (depth > 0)
        return make_deep(depth - 1) + pad[0];
    char *volatile p = malloc(24); /* AT:deep */
    return (long)(p != NULL) + pad[0];
}

static int fds[2];

static void *blocked_thread(void *arg) {
    (void)arg;
    /* The only pointer to this object lives in this thread's stack while it waits. */
    char *volatile mine = malloc(64);
    memset(mine, 3, 64);
    char c;
    sink += read(fds[0], &c, 1);
    sink += mine[0];
    return NULL;
}

static void clean(void) {
    list_head = make_list(1000);
    char *m = malloc(100);
    middle = m + 24;
    holder = malloc(2 * sizeof(void *));
    holder[0] = make_page();
    holder[1] = make_large();
    if (pipe(fds) != 0) abort();
    pthread_t t;
    if (pthread_create(&t, NULL, blocked_thread, NULL) != 0) abort();
    usleep(100000);
    puts("clean");
}

static void leak(void) {
    keep_small = malloc(40);
    keep_page = make_page();
    keep_large = make_large();
    list_head = make_list(1);
    make_small(10);
    sink += (long)make_list(100) & 1;
    sink += (long)make_page() & 1;
    sink += (long)make_large() & 1;
    sink += make_deep(300);
    puts("leaked");
}

static void freed(void) {
    struct node *l = make_list(100);
    while (l) {
        struct node *n = l->next;
        free(l);
        l = n;
    }
    free(make_page());
    free(make_large());
    puts("freed");
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "clean")) clean();
    else if (!strcmp(c, "leak")) leak();
    else if (!strcmp(c, "freed")) freed();
    else if (!strcmp(c, "closed")) {
        sink += make_deep(300);
        fclose(stdout);
        fclose(stderr);
        return 0;
    }
    else if (!strcmp(c, "reopened") && argc > 2) {
        sink += make_deep(300);
        close(2);
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd != 2) {
            printf("the file took descriptor %d, not 2\n", fd);
            return 3;
        }
        if (write(fd, "data\n", 5) != 5) return 4;
        return 0;
    }
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    fflush(stdout);
    return 0;
}
