/* Statistics printed while the program runs (`stats_interval`).
 * usage: periodic MS1 MS2 [reopen [FILE]]
 *   First, for MS1 milliseconds, the main thread allocates nothing: it spins while a second
 *   thread sends it SIGUSR1 every 200 µs, and the handler, which runs on an alternate signal
 *   stack of two pages with a no-access page below it, allocates and frees objects of several
 *   sizes (so that its thread caches run empty and are refilled there). The statistics are
 *   too big to print on such a stack: printing them there would run into the no-access page.
 *   Then, for MS2 milliseconds, the main thread allocates and frees objects itself; with
 *   "reopen", it first closes standard error and opens a file of its own, which takes its
 *   number (FILE, kept, or an unlinked temporary one), and at the end prints
 *   "STDERR FILE <bytes>": what was written into that file.
 *   Prints "PERIODIC OK <n> signals, pid <pid>" (the signals handled); exits 2 when something
 *   failed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "signal_sender.h"

static atomic_long handled;

/* Allocates and frees objects of six sizes, filled and checked. */
static int churn_once(int salt) {
    static const size_t sizes[] = {24, 72, 200, 520, 1000, 1900};
    for (int k = 0; k < 6; k++) {
        unsigned char *p = malloc(sizes[k]);
        if (!p)
            return 1;
        memset(p, salt & 0xff, sizes[k]);
        if (p[sizes[k] - 1] != (unsigned char)(salt & 0xff))
            return 1;
        free(p);
    }
    return 0;
}

static atomic_int handler_failed;

static void on_usr1(int sig) {
    (void)sig;
    if (churn_once((int)atomic_fetch_add(&handled, 1)))
        atomic_store(&handler_failed, 1);
}

int main(int argc, char **argv) {
    long ms1 = argc > 1 ? atol(argv[1]) : 1500, ms2 = argc > 2 ? atol(argv[2]) : 1200;
    long page = sysconf(_SC_PAGESIZE);
    /* A no-access page, then two pages of stack above it. */
    unsigned char *region = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED || mprotect(region, page, PROT_NONE) != 0) {
        printf("PERIODIC FAIL: mmap\n");
        return 2;
    }
    stack_t ss = {.ss_sp = region + page, .ss_size = 2 * page, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        printf("PERIODIC FAIL: sigaltstack\n");
        return 2;
    }
    if (on_usr1_on_alt_stack(on_usr1) != 0) {
        printf("PERIODIC FAIL: sigaction\n");
        return 2;
    }
    pthread_t self = pthread_self(), t;
    if (pthread_create(&t, NULL, sender, &self) != 0) {
        printf("PERIODIC FAIL: pthread_create\n");
        return 2;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (ms_since(&t0) < ms1)
        ;
    atomic_store(&stop_sending, 1);
    pthread_join(t, NULL);
    int reopen = argc > 3 && !strcmp(argv[3], "reopen");
    char path[] = "/tmp/periodic-stderr-XXXXXX";
    if (reopen) {
        close(2);
        int fd = argc > 4 ? open(argv[4], O_RDWR | O_CREAT | O_TRUNC, 0600) : mkstemp(path);
        if (fd != 2) {
            printf("PERIODIC FAIL: the file got descriptor %d\n", fd);
            return 2;
        }
        if (argc <= 4)
            unlink(path);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; ms_since(&t0) < ms2; i++)
        if (churn_once(i)) {
            printf("PERIODIC FAIL: churn\n");
            return 2;
        }
    if (atomic_load(&handler_failed) || atomic_load(&handled) == 0) {
        printf("PERIODIC FAIL: handler (%ld handled)\n", atomic_load(&handled));
        return 2;
    }
    if (reopen)
        printf("STDERR FILE %ld\n", (long)lseek(2, 0, SEEK_END));
    printf("PERIODIC OK %ld signals, pid %d\n", atomic_load(&handled), (int)getpid());
    return 0;
}
