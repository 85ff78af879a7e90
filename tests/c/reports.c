/* Report tests: each case performs one misuse through small, non-inlined functions, so that the
 * report's stacks can be checked for the function and line of the bad access, the free and the
 * allocation. Lines the tests look for carry a marker comment (`AT:<case>-<what>`). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

struct record {
    long id;
    char name[40];
};

static volatile long sink;

NOINLINE static struct record *make_record(void) {
    struct record *r = malloc(sizeof *r); /* AT:make */
    r->id = 1;
    return r;
}

NOINLINE static void drop_record(struct record *r) {
    free(r); /* AT:drop */
    sink = 0; /* no tail call: keep this frame in the free stack */
}

NOINLINE static void touch_record(struct record *r) {
    r->id = 42; /* AT:uaf-access */
}

NOINLINE static void drop_again(struct record *r) {
    free(r); /* AT:double-free */
    sink = 2; /* differs from drop_record, so -O2 does not fold the two */
}

NOINLINE static void free_inside(struct record *r) {
    free((char *)r + 8); /* AT:invalid-free */
    sink = 3;
}

NOINLINE static void drop_half(struct record *r) {
    void (*free_sized)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
    if (!free_sized)
        abort();
    free_sized(r, sizeof *r / 2); /* AT:size-mismatch */
    sink = 4;
}

/* An array from operator new[], deleted by the scalar operator delete (both called by their
   mangled names: this is C). */
NOINLINE static struct record *new_records(void) {
    void *(*op_new_array)(unsigned long) = (void *(*)(unsigned long))dlsym(RTLD_DEFAULT, "_Znam");
    if (!op_new_array)
        abort();
    struct record *r = op_new_array(sizeof *r); /* AT:make-new-array */
    sink = 6;
    return r;
}

NOINLINE static void delete_record(struct record *r) {
    void (*op_delete)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "_ZdlPv");
    if (!op_delete)
        abort();
    op_delete(r); /* AT:alloc-dealloc-mismatch */
    sink = 7;
}

NOINLINE static void ask_size_inside(struct record *r) {
    sink = (long)malloc_usable_size((char *)r + 8); /* AT:invalid-pointer */
}

NOINLINE static char *make_big(size_t n) {
    char *p = malloc(n); /* AT:make-big */
    sink = (long)p;
    return p;
}

NOINLINE static void drop_big(char *p) {
    free(p); /* AT:drop-big */
    sink = 4;
}

NOINLINE static void read_big(char *p) {
    sink = p[1000]; /* AT:uaf-big */
}

/* Grown where it is by the second realloc (the first one moved it and gave it room): the
   object no longer ends against its guard page. */
NOINLINE static char *make_grown(size_t n) {
    char *p = realloc(realloc(malloc(n / 2), n - n / 8), n); /* AT:make-grown */
    sink = (long)p;
    return p;
}

NOINLINE static void drop_grown(char *p) {
    free(p); /* AT:drop-grown */
    sink = 5;
}

NOINLINE static void write_far_past(char *p, size_t n) {
    p[n + 8192] = 1; /* AT:overflow-room */
}

NOINLINE static void write_past(char *p, size_t n) {
    p[n + 64] = 1; /* AT:overflow */
}

NOINLINE static void write_before(struct record *r) {
    ((volatile char *)r)[-8] = 'x'; /* AT:underflow */
}

NOINLINE static void write_just_past(struct record *r) {
    ((volatile char *)r)[sizeof *r] = 'x'; /* AT:overflow-kept */
}

/* Past the record's end by a loop of the program's own: found at free, by the canary. */
NOINLINE static void scribble_past(struct record *r) {
    for (size_t i = 0; i < sizeof *r + 4; i++) ((volatile char *)r)[i] = 'x';
}

static volatile size_t copy_len = 60;

/* A copy into the record's name of more than the 40 bytes left from there: found before it. */
NOINLINE static void copy_name(struct record *r, const char *from) {
    memcpy(r->name, from, copy_len); /* AT:overflow-copy */
}

NOINLINE static void read_before(struct record *r) {
    sink = ((volatile char *)r)[-8]; /* AT:underflow-read */
}

NOINLINE static void touch_wild(char *p) {
    sink = *(volatile char *)(p + (700UL << 30)); /* AT:wild */
}

/* Calls fn() on the stack whose top is `top`, from a frame whose unwind rules still describe the
   8 KiB it took on the stack it was called on: code that switches stacks by hand (a coroutine
   library, an interpreter, a runtime's clone) keeps the rules of the frame it left, and a stack
   walk that believes them reads 8 KiB past the new stack's top. */
void on_stack(void *top, void (*fn)(void));
__asm__(".text\n"
        ".globl on_stack\n"
        ".type on_stack,@function\n"
        "on_stack:\n"
        ".cfi_startproc\n"
        "push %rbx\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbx, -16\n"
        "sub $0x2000, %rsp\n"
        ".cfi_def_cfa_offset 0x2010\n"
        "mov %rsp, %rbx\n"
        "lea -16(%rdi), %rsp\n"
        "call *%rsi\n"
        "mov %rbx, %rsp\n"
        "add $0x2000, %rsp\n"
        ".cfi_def_cfa_offset 16\n"
        "pop %rbx\n"
        ".cfi_def_cfa_offset 8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size on_stack, .-on_stack\n");

/* The use-after-free of the "uaf" case, every call of it made on a switched stack. */
NOINLINE static void uaf_on_switched_stack(void) {
    struct record *r = make_record();
    drop_record(r);
    touch_record(r);
}

NOINLINE static void *huge_new(void) {
    void *(*op_new)(unsigned long) = (void *(*)(unsigned long))dlsym(RTLD_DEFAULT, "_Znwm");
    if (!op_new)
        return NULL;
    void *p = op_new(1UL << 60); /* AT:oom */
    sink = (long)p;
    return p;
}

static struct record *shared;

static void *alloc_thread(void *arg) {
    (void)arg;
    printf("alloc tid %ld\n", (long)gettid());
    shared = make_record();
    return NULL;
}

static void *free_thread(void *arg) {
    (void)arg;
    printf("free tid %ld\n", (long)gettid());
    drop_record(shared);
    return NULL;
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(c, "uaf")) {
        struct record *r = make_record();
        drop_record(r);
        touch_record(r);
    } else if (!strcmp(c, "double-free")) {
        struct record *r = make_record();
        drop_record(r);
        drop_again(r);
    } else if (!strcmp(c, "invalid-free")) {
        free_inside(make_record());
    } else if (!strcmp(c, "size-mismatch")) {
        drop_half(make_record());
    } else if (!strcmp(c, "alloc-dealloc-mismatch")) {
        delete_record(new_records());
    } else if (!strcmp(c, "invalid-pointer")) {
        ask_size_inside(make_record());
    } else if (!strcmp(c, "overflow")) {
        size_t n = 300000;
        write_past(make_big(n), n);
    } else if (!strcmp(c, "overflow-grown")) {
        /* The write lands in the mapped gap between the canary and the guard page: the canary
           bytes that fill the gap report it at free. */
        size_t n = 300000;
        char *p = make_grown(n);
        write_past(p, n);
        drop_grown(p);
    } else if (!strcmp(c, "overflow-room")) {
        /* Past the grown object's view, into the room it keeps to grow further: no access
           there, so the write traps at once. */
        size_t n = 300000;
        write_far_past(make_grown(n), n);
    } else if (!strcmp(c, "overflow-page")) {
        /* An object of whole pages: the write lands on its guard page and traps at once. */
        size_t n = 8192;
        write_past(make_big(n), n);
    } else if (!strcmp(c, "overflow-page-object")) {
        /* Any page object, in detect mode, lies against its guard page. */
        size_t n = 5000;
        write_past(make_big(n), n);
    } else if (!strcmp(c, "uaf-big")) {
        /* A large object: its descriptor is recycled at free, the report still has the stacks. */
        char *p = make_big(300000);
        drop_big(p);
        for (int i = 0; i < 50; i++) free(malloc(300000)); /* descriptors and memory reused */
        read_big(p);
    } else if (!strcmp(c, "uaf-cut")) {
        /* A large object cut down where it is, then freed: the pages the cut gave back are
           the freed object's too. */
        char *p = make_big(1 << 20);
        char *q = realloc(p, 600000);
        if (q != p) {
            printf("moved\n");
            return 1;
        }
        drop_big(q);
        sink = q[900000]; /* AT:uaf-cut */
    } else if (!strcmp(c, "underflow")) {
        /* The program's first record starts an alias page; the page before it was never
           handed out. */
        struct record *r = make_record();
        if ((uintptr_t)r & 4095) {
            printf("not at a page's start\n");
            return 2;
        }
        write_before(r);
    } else if (!strcmp(c, "switched-stack")) {
        /* A stack of 64 KiB with 16 KiB that cannot be read above its top. */
        enum { STACK = 64 << 10, ABOVE = 16 << 10 };
        char *s = mmap(NULL, STACK + ABOVE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (s == MAP_FAILED || mprotect(s + STACK, ABOVE, PROT_NONE)) {
            printf("no stack\n");
            return 2;
        }
        on_stack(s + STACK, uaf_on_switched_stack);
    } else if (!strcmp(c, "overflow-kept")) {
        /* A record written one byte past its end and never freed: the check at exit finds it. */
        write_just_past(make_record());
        return 0;
    } else if (!strcmp(c, "underflow-read")) {
        /* The same, read. */
        struct record *r = make_record();
        if ((uintptr_t)r & 4095) {
            printf("not at a page's start\n");
            return 2;
        }
        read_before(r);
    } else if (!strcmp(c, "wild")) {
        touch_wild((char *)make_record());
    } else if (!strcmp(c, "oom")) {
        sink = (long)huge_new();
    } else if (!strcmp(c, "forkexec")) {
        /* The child execs this program again, which then commits a use-after-free. */
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], "uaf", (char *)NULL);
            _exit(126);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        printf("child %s %d\n", WIFEXITED(st) ? "exited" : "killed",
               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        return 0;
    } else if (!strcmp(c, "tids")) {
        /* One thread allocates, another frees, the main thread touches: three thread ids. */
        pthread_t t;
        pthread_create(&t, NULL, alloc_thread, NULL);
        pthread_join(t, NULL);
        pthread_create(&t, NULL, free_thread, NULL);
        pthread_join(t, NULL);
        printf("access tid %ld\n", (long)gettid());
        touch_record(shared);
    } else if (!strcmp(c, "fork-tids")) {
        /* The parent allocates before the fork; the child's report must name the child. */
        drop_record(make_record());
        pid_t pid = fork();
        if (pid == 0) {
            printf("child tid %ld\n", (long)gettid());
            struct record *r = make_record();
            drop_record(r);
            touch_record(r);
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        printf("parent tid %ld child %s %d\n", (long)gettid(), WIFEXITED(st) ? "exited" : "killed",
               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        return 0;
    } else if (!strcmp(c, "overflow-freed")) {
        struct record *r = make_record();
        printf("object %p\n", (void *)r);
        scribble_past(r);
        drop_record(r);
    } else if (!strcmp(c, "overflow-copy")) {
        static const char text[64] = "a name far longer than the room a record has for it";
        struct record *r = make_record();
        printf("object %p\n", (void *)r);
        copy_name(r, text);
    } else if (!strcmp(c, "exit")) {
        return atoi(argv[2]);
    } else {
        fprintf(stderr, "usage: reports CASE\n");
        return 2;
    }
    puts("survived");
    return 0;
}
