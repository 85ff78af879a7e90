/* A thread that sends SIGUSR1 to another every 200 µs until `stop_sending` is set, the
 * handler's installation (on the alternate stack), and a millisecond clock: shared by the programs that storm a thread with signals whose handler
 * allocates (periodic.c, sigstack.c). */
#ifndef SIGNAL_SENDER_H
#define SIGNAL_SENDER_H
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop_sending;

/* Thread body; `main_thread` points at the pthread_t to signal. */
static void *sender(void *main_thread) {
    pthread_t to = *(pthread_t *)main_thread;
    while (!atomic_load(&stop_sending)) {
        pthread_kill(to, SIGUSR1);
        usleep(200);
    }
    return NULL;
}

/* Installs `handler` for SIGUSR1, run on the alternate stack; 0, or -1 on failure. */
static int on_usr1_on_alt_stack(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGUSR1, &sa, NULL);
}

static long ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}
#endif
