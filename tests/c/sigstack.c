/* How much stack the allocator takes inside a signal handler on an alternate stack.
 * usage: sigstack MS BUDGET
 *   A second thread sends the main thread SIGUSR1 every 200 µs for MS milliseconds, twice.
 *   The handler runs on an alternate stack and allocates, reallocates and frees objects of
 *   every kind (small, page-sized, large, zeroed, aligned), among them objects the main
 *   thread allocated, which meanwhile allocates and frees too (so that handlers also
 *   interrupt the allocator). Every 4th round of its own, the main thread sends itself the
 *   signal, and that handler also forks (and once more at the end); the child allocates
 *   and frees before it exits. (Only there: the child of a fork in a handler that
 *   interrupted the allocator holding a lock exits 127; docs/usage.md, Signals.)
 *   First run: the alternate stack is 256 KiB filled with a pattern. The handler notes how
 *   deep the stack is at its entry (the kernel's signal frame, whose size depends on the
 *   processor's register state); the pattern shows how deep it went at most. The difference
 *   is what the handler's calls took: the allocator's, and a little of the handler's own.
 *   Second run: the alternate stack is the entry depth plus BUDGET bytes, with a no-access
 *   page below it, so that going deeper kills the program (SIGSEGV).
 *   Prints "SIGSTACK frame F used U handled N forks K" after the first run, "SIGSTACK OK" after the
 *   second; exits 2 when something failed. Link with -Wl,-z,now: a lazily bound first call
 *   would take the dynamic linker's stack inside the handler. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "signal_sender.h"

#define FILL 0xA5
#define RING 1024

static void *ring[RING];
static atomic_int ring_lock;
static atomic_long handled;
static atomic_int failed;
static atomic_long forks;
static uintptr_t stack_top;
static atomic_long entry_depth;
static volatile sig_atomic_t fork_now;

static void lock(void) {
    while (atomic_exchange(&ring_lock, 1))
        ;
}

static void unlock(void) {
    atomic_store(&ring_lock, 0);
}

/* Puts `p` (of `size` bytes, filled with `salt`) into the ring and frees what was there
 * after checking its first byte. The handler only tries the lock: it may have interrupted
 * its own thread holding it. */
static void swap_into_ring(unsigned char *p, size_t size, int salt, int in_handler) {
    memset(p, salt, size);
    if (in_handler ? atomic_exchange(&ring_lock, 1) : (lock(), 0)) {
        free(p);
        return;
    }
    unsigned k = (unsigned)salt * 2654435761u % RING;
    unsigned char *old = ring[k];
    ring[k] = p;
    unlock();
    free(old);
}

static void churn(int salt, int in_handler) {
    static const size_t sizes[] = {1, 24, 72, 200, 520, 1000, 1900, 3000, 4096, 5000, 70000, 300000};
    for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t size = sizes[(k + (unsigned)salt) % (sizeof sizes / sizeof *sizes)];
        unsigned char *p = malloc(size);
        if (!p) {
            atomic_store(&failed, 1);
            return;
        }
        swap_into_ring(p, size, salt + (int)k, in_handler);
    }
    unsigned char *z = calloc(100, 7);
    void *a = NULL;
    unsigned char *r = realloc(NULL, 40);
    if (!z || z[699] != 0 || posix_memalign(&a, 256, 300) != 0 || !r) {
        atomic_store(&failed, 1);
        return;
    }
    r = realloc(r, 9000);
    if (r)
        r = realloc(r, 100);
    free(r);
    free(a);
    free(z);
}

static void on_usr1(int sig) {
    (void)sig;
    char here;
    long depth = (long)(stack_top - (uintptr_t)&here);
    if (depth > atomic_load(&entry_depth))
        atomic_store(&entry_depth, depth);
    long n = atomic_fetch_add(&handled, 1);
    churn((int)n, 1);
    if (fork_now) {
        fork_now = 0;
        pid_t pid = fork();
        if (pid == 0) {
            churn((int)n, 1);
            _exit(atomic_load(&failed) ? 3 : 0);
        }
        atomic_fetch_add(&forks, 1);
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            atomic_store(&failed, 1);
    }
}

/* Runs the signal storm for `ms` with an alternate stack of `size` bytes (a no-access page
 * below it) filled with FILL; returns how deep it was used, or -1. */
static long storm(long ms, size_t size) {
    long page = sysconf(_SC_PAGESIZE);
    size_t len = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
    unsigned char *region = mmap(NULL, len + (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED || mprotect(region, (size_t)page, PROT_NONE) != 0)
        return -1;
    /* The stack starts right above the no-access page. */
    unsigned char *base = region + page;
    memset(base, FILL, size);
    stack_top = (uintptr_t)(base + size);
    stack_t ss = {.ss_sp = base, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0)
        return -1;
    atomic_store(&stop_sending, 0);
    pthread_t self = pthread_self(), t;
    if (pthread_create(&t, NULL, sender, &self) != 0)
        return -1;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; ms_since(&t0) < ms; i++) {
        churn(i, 0);
        if (i % 4 == 3) {
            /* The signal is handled before pthread_kill returns, outside the allocator. */
            fork_now = 1;
            pthread_kill(self, SIGUSR1);
            fork_now = 0;
        }
    }
    atomic_store(&stop_sending, 1);
    pthread_join(t, NULL);
    /* At least one fork in each run, however few rounds the signals left the main thread. */
    fork_now = 1;
    pthread_kill(self, SIGUSR1);
    /* No more signals: leave the alternate stack before unmapping it. */
    stack_t off = {.ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    size_t untouched = 0;
    while (untouched < size && base[untouched] == FILL)
        untouched++;
    munmap(region, len + (size_t)page);
    return (long)(size - untouched);
}

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 1500, budget = argc > 2 ? atol(argv[2]) : 3072;
    if (on_usr1_on_alt_stack(on_usr1) != 0) {
        printf("SIGSTACK FAIL: sigaction\n");
        return 2;
    }
    long used = storm(ms, 256 * 1024);
    long frame = atomic_load(&entry_depth);
    if (used < 0 || atomic_load(&failed) || atomic_load(&handled) == 0) {
        printf("SIGSTACK FAIL: first run (%ld handled)\n", atomic_load(&handled));
        return 2;
    }
    printf("SIGSTACK frame %ld used %ld handled %ld forks %ld\n", frame, used - frame, atomic_load(&handled),
           atomic_load(&forks));
    fflush(stdout);
    atomic_store(&handled, 0);
    if (storm(ms, (size_t)(frame + budget) & ~(size_t)15) < 0 || atomic_load(&failed) || atomic_load(&handled) == 0) {
        printf("SIGSTACK FAIL: second run (%ld handled)\n", atomic_load(&handled));
        return 2;
    }
    printf("SIGSTACK OK\n");
    return 0;
}
