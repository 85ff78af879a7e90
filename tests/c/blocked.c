/*
 * Heap memory read while every signal is blocked.
 *
 * The kernel's pageout (swap, a DAMON scheme, MADV_PAGEOUT) drops the page-table entries of
 * live heap pages; the program's next access traps, and the allocator's fault handler maps the
 * page again. A fault raised while SIGBUS is blocked reaches no handler: the kernel kills the
 * process. The C library blocks every signal in a new thread's first steps and in an exiting
 * thread's last ones, and reads heap memory there. Each case pages that memory out first (and
 * checks in /proc/self/pagemap that it is out) and must end with "<case> OK". The process
 * keeps to one processor: MADV_PAGEOUT passes over a page that still waits in another
 * processor's batch of pages to put on the kernel's lists, as a page just allocated may.
 *
 * Usage: blocked CASE
 *   start  setlocale(LC_ALL, "C.UTF-8"), then 20 times: page out the LC_CTYPE data, start a
 *          thread (its first steps read that data) and join it
 *   exit   8 detached threads with 16 MiB stacks page out their own DTVs and exit one after
 *          another; exits trim the C library's cache of stacks (40 MiB), reading the DTVs of
 *          the stacks cached before
 *   free   a thread that never allocated blocks every signal with the system call itself, as
 *          the C library does, and frees objects whose pages were paged out
 *   handler  a SIGUSR1 handler installed with every signal in its mask reads a heap object
 *          whose page was paged out
 * Prints "<case> OK", or "FAIL <case>: ..." and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

static const char *current = "";

static void fail(const char *what, long a) {
    printf("FAIL %s: %s (%ld; errno %d)\n", current, what, a, errno);
    fflush(stdout);
    exit(1);
}

/* Whether the page of `p` has a page-table entry (bit 63 of its pagemap entry). */
static int present(const void *p) {
    int fd = open("/proc/self/pagemap", O_RDONLY);
    uint64_t e = 0;
    if (fd < 0 || pread(fd, &e, sizeof e, (off_t)((uintptr_t)p / PAGE * sizeof e)) != sizeof e)
        fail("reading /proc/self/pagemap", (long)(uintptr_t)p);
    close(fd);
    return (int)(e >> 63);
}

/* Pages out the pages of [p, p + n) and checks that the first one lost its entry. */
static void page_out(const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p & ~(PAGE - 1), e = ((uintptr_t)p + n + PAGE - 1) & ~(PAGE - 1);
    if (madvise((void *)a, e - a, MADV_PAGEOUT) != 0)
        fail("madvise(MADV_PAGEOUT)", (long)a);
    if (present(p))
        fail("the page is still mapped after MADV_PAGEOUT", (long)(uintptr_t)p);
}

static void *nothing(void *arg) { return arg; }

static void start_case(void) {
    if (!setlocale(LC_ALL, "C.UTF-8"))
        fail("setlocale(LC_ALL, \"C.UTF-8\")", 0);
    for (int i = 0; i < 20; i++) {
        /* The global locale's data: the copy shares it; LC_CTYPE's comes first. */
        locale_t l = duplocale(LC_GLOBAL_LOCALE);
        if (!l)
            fail("duplocale", i);
        const void *ctype = *(void *const *)l;
        freelocale(l);
        page_out(ctype, 64);
        pthread_t t;
        if (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0)
            fail("pthread_create/join", i);
    }
}

#define EXITERS 8
static volatile int exited, go;

static void *exiter(void *arg) {
    long i = (long)arg;
    /* The DTV (x86-64: %fs:8 points at its second entry; the first holds its length). */
    uintptr_t *dtv;
    __asm__ volatile("mov %%fs:8, %0" : "=r"(dtv));
    size_t n = dtv[-2];
    /* Not before every thread was made: making one writes a DTV, perhaps on this page. */
    while (!__atomic_load_n(&go, __ATOMIC_SEQ_CST))
        usleep(1000);
    struct timespec d = {0, 20000000L * i};
    nanosleep(&d, NULL);
    page_out(dtv - 2, (n + 2) * 2 * sizeof(uintptr_t));
    __atomic_add_fetch(&exited, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void exit_case(void) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 16UL << 20);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    for (long i = 0; i < EXITERS; i++) {
        pthread_t t;
        if (pthread_create(&t, &a, exiter, (void *)i) != 0)
            fail("pthread_create", i);
    }
    __atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&exited, __ATOMIC_SEQ_CST) < EXITERS)
        usleep(10000);
    /* The last exits trim the cache after their counts. */
    usleep(300000);
}

#define FREED 16
static void *objects[FREED];

static void *free_blocked(void *arg) {
    uint64_t all = ~0ULL, old = 0;
    if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8) != 0)
        fail("rt_sigprocmask", 0);
    for (int i = 0; i < FREED; i++)
        free(objects[i]);
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
    return arg;
}

static void free_case(void) {
    /* Small objects on pages of their own, and page objects. */
    for (int i = 0; i < FREED; i++) {
        size_t n = i % 2 ? 5000 : 100;
        objects[i] = malloc(n);
        memset(objects[i], i, n);
        for (int j = 0; j < 64 && i % 2 == 0; j++) {
            /* The next small object on another page than the last one. */
            if (i < 2 || ((uintptr_t)objects[i] ^ (uintptr_t)objects[i - 2]) >= PAGE)
                break;
            objects[i] = malloc(n);
            memset(objects[i], i, n);
        }
    }
    for (int i = 0; i < FREED; i++)
        page_out(objects[i], i % 2 ? 5000 : 100);
    pthread_t t;
    if (pthread_create(&t, NULL, free_blocked, NULL) != 0 || pthread_join(t, NULL) != 0)
        fail("pthread_create/join", 0);
}

static volatile unsigned char *touched;
static volatile int seen;

static void on_usr1(int sig) { seen = touched[7] + sig; }

static void handler_case(void) {
    unsigned char *p = malloc(100);
    memset(p, 9, 100);
    touched = p;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigfillset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        fail("sigaction", 0);
    page_out(p, 100);
    raise(SIGUSR1);
    if (seen != 9 + SIGUSR1)
        fail("the handler read a wrong byte", seen);
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {{"start", start_case}, {"exit", exit_case}, {"free", free_case},
                 {"handler", handler_case}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (argc < 2 || strcmp(argv[1], cases[i].name) != 0)
            continue;
        current = cases[i].name;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(sched_getcpu(), &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0)
            fail("sched_setaffinity", 0);
        cases[i].run();
        printf("%s OK\n", current);
        return 0;
    }
    fprintf(stderr, "usage: blocked start|exit|free|handler\n");
    return 2;
}
