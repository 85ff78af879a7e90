/*
 * A free racing another call on the same object, with the window between them held open.
 *
 *   racing_free SIZE [head] [realloc=N | fault | syscall]
 *
 * A `free` looks the object up, checks its canary, then marks it dead with a compare-and-swap
 * of its size. Of two frees of one pointer, the first can finish, its memory be revoked and
 * handed to a new object of the same size, all between the second's look-up and its swap,
 * which would then find a live object of the right size and kill the new one: its memory
 * would go to a third allocation while still in use. A test cannot count on hitting that
 * window by chance, so this one holds it open: the process forks, and the parent (the
 * tracer) stops thread A of the child with a hardware watchpoint on the first byte after the
 * object, which `free` reads as part of the canary check after its look-up (with `head`: on
 * the byte before the object, the last one read before the mark by the free of a large
 * object, or of a page object in detect mode: the bytes before the object in its first
 * page). Meanwhile the child's main thread B frees the object, and allocates objects of SIZE
 * until one is backed by the same bytes of the heap's memory file as the object was (read
 * from /proc/self/maps), fills it with 'k' and keeps it. Then A goes on.
 *
 * With `realloc=N`, A's call is `realloc(object, N)` to a size that stays in place: it checks
 * the object as `free` does, then sets its new size (and canary) where the object is, which
 * must not land on the new object either.
 *
 * With `fault` or `syscall`, the object's page loses its page-table entry first (as a pageout
 * takes it), and A reads the object (`fault`: the library's fault handler maps the page
 * again) or reads 8 bytes from a pipe into it with read(2) (`syscall`: the call fails with
 * EFAULT and the library maps the page again and makes it again). Both find the object live
 * and install its page: the tracer holds A at that `UFFDIO_CONTINUE` (a system-call stop)
 * while B frees the object, lets its revocation go out, and waits for the memory to come
 * back. The install must not leave the old address mapped to the new object's memory: A's
 * read must trap, not print `A READ k`, and the kernel must not write into the new object.
 *
 * What must happen: A's call reports the race (a double free or a use after free) and the
 * child dies of it. If the call returns, B looks for the harm: it allocates more objects of
 * SIZE while the kept one is live and prints OVERLAP if one of them is backed by the kept
 * one's memory, or KEPT OBJECT CHANGED if its bytes changed.
 *
 * The parent prints `CHILD EXIT n` or `CHILD SIGNAL n`, and `HELD` once A stopped in its
 * call; `REUSED n` is the child's count of allocations until the memory came back.
 * Exit status 2: the set-up failed (a message says which step).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
    fprintf(stderr, "racing_free: %s: %s\n", what, strerror(errno));
    fflush(stderr);
    _exit(2);
}

static void put(int fd, const void *b, size_t n) {
    if (write(fd, b, n) != (ssize_t)n) die("pipe write");
}

static void get(int fd, void *b, size_t n) {
    ssize_t r;
    do r = read(fd, b, n);
    while (r < 0 && errno == EINTR);
    if (r != (ssize_t)n) die("pipe read");
}

/* --- Where an address's bytes live in the heap's memory file ---------------------------- */

struct vma {
    uintptr_t lo, hi, off;
    int pool;
};
static struct vma vmas[8192];
static int nvmas;
static char maps[4 << 20];

static void read_maps(void) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("open maps");
    size_t n = 0;
    ssize_t r;
    while (n < sizeof maps - 1 && (r = read(fd, maps + n, sizeof maps - 1 - n)) > 0) n += (size_t)r;
    close(fd);
    maps[n] = 0;
    nvmas = 0;
    for (char *line = maps; *line && nvmas < (int)(sizeof vmas / sizeof *vmas);) {
        char *end = strchr(line, '\n');
        if (end) *end = 0;
        unsigned long lo, hi, off;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perms, &off) == 4)
            vmas[nvmas++] = (struct vma){lo, hi, off, strstr(line, "nevermore-pool") != 0};
        if (!end) break;
        line = end + 1;
    }
}

/* The offset in the heap's memory file of the byte at `p`, or -1 when it is not mapped from
   that file. The mappings are read again when `p` is in none read so far from the file (new
   mappings are made inside reservations). */
static long backing(const void *p) {
    uintptr_t a = (uintptr_t)p;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < nvmas; i++)
            if (vmas[i].pool && a >= vmas[i].lo && a < vmas[i].hi) return (long)(vmas[i].off + (a - vmas[i].lo));
        read_maps();
    }
    return -1;
}

/* --- The child ------------------------------------------------------------------------ */

static size_t size;
static int watch_head;
static size_t realloc_to;
static int fault_mode; /* 1: `fault`, 2: `syscall` */
static int data_pipe[2];
static char *pin;
static char *obj;
static int to_a, from_tracer, to_tracer;

static void *thread_a(void *arg) {
    (void)arg;
    /* An allocation first: a thread that has none reads a canary through the heap's own view,
       not through the object's address, where the watchpoint is. */
    free(malloc(16));
    pid_t tid = (pid_t)syscall(SYS_gettid);
    uintptr_t watch = watch_head ? (uintptr_t)obj - 1 : (uintptr_t)obj + size;
    put(to_tracer, &tid, sizeof tid);
    put(to_tracer, &watch, sizeof watch);
    char go;
    get(to_a, &go, 1);
    if (fault_mode == 1) {
        volatile char *v = obj;
        char c = v[0];
        printf("A READ %c\n", c);
        fflush(stdout);
        return 0;
    }
    if (fault_mode == 2) {
        ssize_t n = read(data_pipe[0], obj, 8);
        printf("A READ(2) %zd errno %d\n", n, n < 0 ? errno : 0);
        fflush(stdout);
        return 0;
    }
    if (realloc_to) {
        void *r = realloc(obj, realloc_to);
        printf("REALLOC %s\n", r == (void *)obj ? "IN PLACE" : "MOVED");
    } else
        free(obj);
    return 0;
}

static int child(void) {
    obj = malloc(size);
    if (!obj) die("malloc");
    memset(obj, 'o', size);
    long at = backing(obj);
    if (at < 0) {
        fprintf(stderr, "racing_free: the object is not in the heap's memory file\n");
        _exit(2);
    }
    /* An object of another size from the same epoch keeps the object's mirror (its address
       decodable and registered) while the object's memory goes round. */
    pin = malloc(size < 1000 ? 3000 : 24);
    pthread_t a;
    if (pthread_create(&a, 0, thread_a, 0)) die("pthread_create");
    if (fault_mode) {
        /* The object's page loses its entry, as a pageout would take it: A's access faults. */
        char s;
        get(from_tracer, &s, 1);
        if (madvise((void *)((uintptr_t)obj & ~(uintptr_t)4095), 4096, MADV_DONTNEED)) die("madvise");
        put(to_tracer, "d", 1);
    }
    char step;
    get(from_tracer, &step, 1); /* A is held inside its call */
    free(obj);
    if (fault_mode) {
        /* The free's revocation goes out (the batch's delay bound is 20 ms). */
        struct timespec d = {0, 30 * 1000 * 1000};
        nanosleep(&d, 0);
        free(malloc(size));
    }
    /* Until the object's memory comes back to a new object. */
    char *kept = 0;
    long n;
    for (n = 1; n <= 4000000 && !kept; n++) {
        char *q = malloc(size);
        if (!q) die("malloc");
        if (backing(q) == at)
            kept = q;
        else
            free(q);
    }
    if (!kept) {
        fprintf(stderr, "racing_free: the memory did not come back in %ld allocations\n", n - 1);
        exit(2);
    }
    memset(kept, 'k', size);
    printf("REUSED %ld\n", n - 1);
    fflush(stdout);
    put(to_tracer, "r", 1);
    pthread_join(a, 0);
    printf("A RETURNED\n");
    /* A's call returned: was the kept object given away, or written? */
    for (long i = 0; i < 4000000; i++) {
        char *q = malloc(size);
        if (!q) die("malloc");
        long b = backing(q);
        if (b >= at && b < at + (long)size) {
            printf("OVERLAP after %ld allocations\n", i + 1);
            return 1;
        }
        free(q);
    }
    for (size_t i = 0; i < size; i++)
        if (kept[i] != 'k') {
            printf("KEPT OBJECT CHANGED at %zu\n", i);
            return 1;
        }
    printf("NO OVERLAP\n");
    return 0;
}

/* --- The parent: the tracer ----------------------------------------------------------- */

static pid_t child_pid;

/* _IOWR(0xAA, 7, struct uffdio_continue): the library's install of alias pages. */
#define UFFDIO_CONTINUE_REQUEST 0xC020AA07ul

static void give_up(int sig) {
    (void)sig;
    static const char msg[] = "racing_free: thread A did not stop in its call within 60 s\n";
    write(2, msg, sizeof msg - 1);
    kill(child_pid, SIGKILL);
    _exit(2);
}

static long poke_debugreg(pid_t tid, int n, unsigned long v) {
    return ptrace(PTRACE_POKEUSER, tid, (void *)offsetof(struct user, u_debugreg[n]), (void *)v);
}

/* Stops thread `tid` where its call reads the byte at `watch` (a hardware watchpoint): DR0 =
   the byte; DR7: enable 0 (bit 0), break on reads and writes (bits 16-17 = 3), one byte (bits
   18-19 = 0). `go`: A's pipe. */
static void hold_at_watch(pid_t tid, uintptr_t watch, int go) {
    int st;
    if (poke_debugreg(tid, 0, watch) || poke_debugreg(tid, 7, 1ul | 3ul << 16)) die("setting the watchpoint");
    if (ptrace(PTRACE_CONT, tid, 0, 0)) die("PTRACE_CONT");
    put(go, "g", 1);
    for (;;) {
        if (waitpid(tid, &st, __WALL) != tid) die("waiting for thread A");
        if (!WIFSTOPPED(st)) {
            fprintf(stderr, "racing_free: thread A ended before its call read the watched byte\n");
            _exit(2);
        }
        if (WSTOPSIG(st) == SIGTRAP) return;
        /* Another stop (a signal for A): let it through. */
        int sig = st >> 16 ? 0 : WSTOPSIG(st);
        if (ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig)) die("PTRACE_CONT");
    }
}

/* Has the child drop the object's page-table entry, lets thread `tid` go, and stops it at the
   entry of its first `UFFDIO_CONTINUE` (the library mapping the page again). Signals for A
   (the SIGBUS of its fault) are let through; system-call stops show as SIGTRAP. */
static void hold_at_install(pid_t tid, int go, int to_child, int from_child) {
    int st;
    char d;
    put(to_child, "s", 1);
    get(from_child, &d, 1);
    if (ptrace(PTRACE_SYSCALL, tid, 0, 0)) die("PTRACE_SYSCALL");
    put(go, "g", 1);
    for (;;) {
        if (waitpid(tid, &st, __WALL) != tid || !WIFSTOPPED(st)) die("waiting for thread A");
        struct user_regs_struct r;
        if (WSTOPSIG(st) == SIGTRAP && !ptrace(PTRACE_GETREGS, tid, 0, &r) && r.orig_rax == SYS_ioctl &&
            (long)r.rax == -ENOSYS && r.rsi == UFFDIO_CONTINUE_REQUEST)
            return;
        int sig = (WSTOPSIG(st) == SIGTRAP || st >> 16) ? 0 : WSTOPSIG(st);
        if (ptrace(PTRACE_SYSCALL, tid, 0, (void *)(long)sig)) die("PTRACE_SYSCALL");
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: racing_free SIZE [head] [realloc=N | fault | syscall]\n");
        return 2;
    }
    size = strtoul(argv[1], 0, 0);
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "head"))
            watch_head = 1;
        else if (!strcmp(argv[i], "fault"))
            fault_mode = 1;
        else if (!strcmp(argv[i], "syscall"))
            fault_mode = 2;
        else if (!strncmp(argv[i], "realloc=", 8))
            realloc_to = strtoul(argv[i] + 8, 0, 0);
    }
    int a_pipe[2], t_pipe[2], c_pipe[2];
    if (pipe2(a_pipe, O_CLOEXEC) || pipe2(t_pipe, O_CLOEXEC) || pipe2(c_pipe, O_CLOEXEC) || pipe2(data_pipe, O_CLOEXEC))
        die("pipe");
    put(data_pipe[1], "AAAAAAAA", 8);
    fflush(stdout);
    pid_t c = fork();
    if (c < 0) die("fork");
    if (c == 0) {
        to_a = a_pipe[0];
        from_tracer = c_pipe[0];
        to_tracer = t_pipe[1];
        int status = child();
        fflush(stdout);
        _exit(status);
    }
    /* A watchpoint on a byte the call never reads (or a call that maps nothing) leaves the
       child waiting for ever. */
    child_pid = c;
    signal(SIGALRM, give_up);
    alarm(60);
    pid_t tid;
    uintptr_t watch;
    get(t_pipe[0], &tid, sizeof tid);
    get(t_pipe[0], &watch, sizeof watch);
    int st;
    if (ptrace(PTRACE_SEIZE, tid, 0, 0)) die("PTRACE_SEIZE");
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0)) die("PTRACE_INTERRUPT");
    if (waitpid(tid, &st, __WALL) != tid || !WIFSTOPPED(st)) die("waiting for the interrupt");
    if (fault_mode)
        hold_at_install(tid, a_pipe[1], c_pipe[1], t_pipe[0]);
    else
        hold_at_watch(tid, watch, a_pipe[1]);
    alarm(0);
    printf("HELD\n");
    fflush(stdout);
    put(c_pipe[1], "f", 1);
    char r;
    get(t_pipe[0], &r, 1);
    if (poke_debugreg(tid, 7, 0)) die("clearing the watchpoint");
    if (ptrace(PTRACE_DETACH, tid, 0, 0)) die("PTRACE_DETACH");
    if (waitpid(c, &st, 0) != c) die("waitpid");
    if (WIFSIGNALED(st))
        printf("CHILD SIGNAL %d\n", WTERMSIG(st));
    else
        printf("CHILD EXIT %d\n", WEXITSTATUS(st));
    return 0;
}
