/* Programs that make life hard for the allocator:
 *
 *   hostile work MB                 allocate and free (small, page and large objects) about
 *                                   MB MiB in all, checking contents; then ask for more than
 *                                   the address space allows: must fail with ENOMEM
 *   hostile maps LEFT               use up mappings until only about LEFT remain below
 *                                   vm.max_map_count, then allocate; give them back; allocate
 *   hostile room KIB MB             under the address-space limit it was started with, leave
 *                                   only KIB KiB of it unused, then allocate and free about
 *                                   MB MiB (many epochs): no allocation may fail; then fork,
 *                                   and the child allocates too; prints "ROOM n KiB", the room
 *                                   left after the fill
 *   hostile ids                     print "RUID n EUID m" (a set-user-ID copy's effect)
 *   hostile chroot DIR libc|raw     change the root directory to DIR (empty) with chroot() or
 *                                   a raw system call (an ordinary user in a user namespace
 *                                   of its own), churn through small objects keeping one in
 *                                   50, fork a child that allocates, lose one object of 100
 *                                   bytes
 *   hostile clash                   map MAP_FIXED_NOREPLACE at addresses inside the allocator's
 *                                   arenas (must fail with EEXIST) and next to them; the heap
 *                                   stays intact
 *   hostile closefds [first] [uaf]  close every descriptor above 2 (close_range), keep
 *                                   allocating, fork; with "first" the descriptors are closed
 *                                   before the program's first allocation (as a daemon does
 *                                   first thing); with "uaf" then read a freed object
 *   hostile pinned N                allocate N small objects (16-400 bytes), keeping one in
 *                                   16 to the end (each pins the epoch it came from) and
 *                                   freeing the others at once; check the kept ones
 *   hostile fdfull                  lower the soft descriptor limit to 128 (below the hard
 *                                   one), open /dev/null until EMFILE, then fork: the child
 *                                   must run (its own heap, the parent's object unchanged),
 *                                   and the limit and the full table must be as they were
 *   hostile fds                     after some allocation (and again in a forked child),
 *                                   print "FD n TARGET" for each open descriptor above 2,
 *                                   and "SELF_ADVICE 1" if process_madvise takes
 *                                   PIDFD_SELF_THREAD here (else 0)
 *   hostile dup2-over PATH          put a file of its own (PATH, created) at the numbers of
 *                                   every descriptor the allocator holds (dup2, as a program
 *                                   that picks its numbers does), write to them, allocate,
 *                                   fork; the child allocates and writes to them too: PATH
 *                                   must end with every byte written ("OK" then)
 *   hostile leader-exits            the main thread starts a worker and leaves with
 *                                   pthread_exit; the worker allocates and frees (300 000 times,
 *                                   1 024 objects live) and ends the process
 *   hostile clone heap|mmap         glibc's clone() without CLONE_VM (a fork in all but name),
 *                                   the child's stack cut from the heap or mapped apart: the
 *                                   child sees the parent's objects, changes one, allocates and
 *                                   frees, and exits 42; the parent's object must be unchanged
 *   hostile mlockall                mlockall(MCL_CURRENT | MCL_FUTURE), then allocate and free:
 *                                   prints "MLOCKALL r errno", then (if it worked) how many
 *                                   pages of an untouched 4 MiB mapping are resident and the
 *                                   VmLck and VmRSS lines, in KiB
 *   hostile mprotect [nohandler]    make a heap buffer read-only with mprotect and write to it:
 *                                   the program's SIGSEGV handler must run, in the parent and in
 *                                   a forked child; with "nohandler", the write must kill it
 *   hostile refault-threads         the program drops the page-table entries of a live 64 KiB
 *                                   buffer (madvise MADV_DONTNEED), again and again, and each
 *                                   time 4 threads read it at once: all must see its contents
 *   hostile altstack BYTES          the program handles SIGSEGV and SIGBUS on an alternate
 *                                   signal stack of BYTES (SA_ONSTACK, rounded up to pages, a
 *                                   guard page below), then reads a freed
 *                                   object: in detect mode the report must still come out
 *   hostile vmdata MB               keep MB MiB of small objects live and run a workload of
 *                                   mixed sizes, then print "VMDATA n" (VmData of
 *                                   /proc/self/status, KiB: the private writable memory that
 *                                   strict overcommit accounting and RLIMIT_DATA charge)
 *   hostile ctor                    check objects allocated by the constructor of a library
 *                                   linked into the program (libctor.so, see ctor_lib.c)
 *   hostile probe                   probe every descriptor below 4096 as programs that list
 *                                   their open descriptors do (fstat, fstat64, __fxstat,
 *                                   fcntl F_GETFD, as CPython's fd_status.py and daemons
 *                                   closing what they did not open): prints "SEEN n TARGET"
 *                                   for each that a probe found open, "OWN n" for each that
 *                                   /proc names as the allocator's, "DISAGREE n" where the
 *                                   probes differ
 * Prints "OK" on success; a failed check prints "HOSTILE FAIL: ..." and exits 2. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void fail(const char *what, long v) {
    printf("HOSTILE FAIL: %s (%ld)\n", what, v);
    fflush(stdout);
    _exit(2);
}

/* A bounded workload: a ring of live objects of mixed sizes, checked before each free.
 * Returns the number of allocations that failed (NULL with ENOMEM); any other failure aborts. */
static long workload(long total_bytes, int tolerate_enomem) {
    enum { RING = 256 };
    unsigned char *ring[RING] = {0};
    size_t sizes[RING] = {0};
    long done = 0, failed = 0;
    uint64_t x = 88172645463325252ull;
    /* Failed requests do not count as work: bound the attempts too. */
    for (long i = 0; done < total_bytes && i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t size = x % 100 < 80 ? x % 1500 : x % 100 < 97 ? 2000 + x % 120000 : 200000 + x % 3000000;
        int k = (int)(i % RING);
        if (ring[k]) {
            for (size_t j = 0; j < sizes[k]; j += 97)
                if (ring[k][j] != (unsigned char)k) fail("contents changed", (long)j);
            free(ring[k]);
            ring[k] = 0;
        }
        errno = 0;
        unsigned char *p = malloc(size);
        if (!p) {
            if (!tolerate_enomem || errno != ENOMEM) fail("malloc failed", errno);
            failed++;
            continue;
        }
        memset(p, k, size);
        ring[k] = p;
        sizes[k] = size;
        done += (long)size;
    }
    for (int k = 0; k < RING; k++) free(ring[k]);
    return failed;
}

static int work(long mb) {
    long failed = workload(mb << 20, 0);
    (void)failed;
    /* More than any address-space limit allows: fails cleanly. */
    errno = 0;
    void *p = malloc((size_t)8 << 30);
    if (p) {
        /* Only under a generous limit can 8 GiB of address space be had. */
        struct rlimit rl;
        getrlimit(RLIMIT_AS, &rl);
        if (rl.rlim_cur != RLIM_INFINITY) fail("8 GiB allocation succeeded under an address-space limit", 0);
        free(p);
    } else if (errno != ENOMEM) {
        fail("failed allocation without ENOMEM", errno);
    }
    p = calloc(1 << 20, 1 << 20); /* 1 TiB */
    if (p) fail("1 TiB calloc succeeded", 0);
    /* Still works after the failures. */
    workload(4 << 20, 0);
    return 0;
}

static long vmdata_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) fail("open /proc/self/status", errno);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmData:", 7)) kib = atol(line + 7);
    fclose(f);
    if (kib < 0) fail("no VmData line", 0);
    return kib;
}

static int vmdata(long mb) {
    long n = (mb << 20) / 64;
    void **keep = malloc(sizeof(void *) * (size_t)n);
    if (!keep) fail("malloc failed", errno);
    for (long i = 0; i < n; i++) {
        keep[i] = malloc(48);
        if (!keep[i]) fail("malloc failed", errno);
        memset(keep[i], 7, 48);
    }
    workload(64 << 20, 0);
    printf("VMDATA %ld\n", vmdata_kib());
    for (long i = 0; i < n; i++) free(keep[i]);
    free(keep);
    return 0;
}

static long count_maps(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) fail("open /proc/self/maps", errno);
    long n = 0;
    int c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

static int maps(long left) {
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    long max = 0;
    if (!f || fscanf(f, "%ld", &max) != 1) fail("read max_map_count", errno);
    fclose(f);
    long have = count_maps();
    long want = max - have - left; /* mappings to use up */
    if (want < 0) want = 0;
    /* One big reservation, then every other page made writable: one VMA per two pages. */
    size_t len = (size_t)(want + 2) * 2 * 4096;
    char *r = mmap(0, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) fail("mmap reservation", errno);
    long made = 0;
    for (long i = 0; i < want / 2; i++) {
        if (mprotect(r + (size_t)(2 * i + 1) * 4096, 4096, PROT_READ)) break;
        made += 2;
    }
    printf("mappings: %ld of %ld in use, %ld made\n", count_maps(), max, made);
    fflush(stdout);
    long failed = workload(64 << 20, 1);
    printf("under pressure: %ld allocations failed with ENOMEM\n", failed);
    fflush(stdout);
    munmap(r, len);
    if (workload(16 << 20, 0)) fail("allocations failed after the mappings were given back", 0);
    return 0;
}

static int clash(void) {
    unsigned char *small = malloc(64), *big = malloc(1 << 20);
    if (!small || !big) fail("malloc", errno);
    memset(small, 0x5a, 64);
    memset(big, 0xa5, 1 << 20);
    int clashes = 0;
    /* Addresses inside the arenas, near what malloc returned (reserved, not yet handed out). */
    uintptr_t targets[] = {
        ((uintptr_t)small & ~(uintptr_t)0xfff) + (64 << 20),
        ((uintptr_t)small & ~(uintptr_t)0xfff) + (1ul << 30),
        ((uintptr_t)big & ~(uintptr_t)0xfff) + (64 << 20),
        ((uintptr_t)big & ~(uintptr_t)0xfff) + (1ul << 30),
        (uintptr_t)small & ~(uintptr_t)0xfff, /* a live object's own page */
    };
    for (unsigned i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        void *want = (void *)targets[i];
        void *p = mmap(want, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED) {
            if (errno != EEXIST) fail("MAP_FIXED_NOREPLACE failed with an unexpected errno", errno);
            clashes++;
        } else {
            if (p != want) fail("MAP_FIXED_NOREPLACE mapped elsewhere", (long)(uintptr_t)p);
            /* Free space inside our arenas would be a hole the allocator might map over later:
             * it must not happen (the arenas are reserved in full). */
            printf("mapped inside the arena at %p\n", p);
            fail("the kernel mapped inside the allocator's reservation", (long)i);
        }
        /* A plain hint at the same place: the kernel picks another address. */
        p = mmap(want, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) fail("mmap with a hint", errno);
        if (p == want) fail("a hinted mmap landed inside the allocator's reservation", (long)i);
        memset(p, 1, 4096);
        munmap(p, 4096);
    }
    workload(32 << 20, 0);
    for (int i = 0; i < 64; i++)
        if (small[i] != 0x5a) fail("small object changed", i);
    for (int i = 0; i < 1 << 20; i += 511)
        if (big[i] != 0xa5) fail("big object changed", i);
    free(small);
    free(big);
    printf("%d clashes refused with EEXIST\n", clashes);
    return 0;
}

static int closefds(int first, int uaf) {
    if (first && syscall(SYS_close_range, 3u, ~0u, 0u)) fail("close_range", errno);
    unsigned char *keep = malloc(100);
    if (!keep) fail("malloc after close_range", errno);
    memset(keep, 7, 100);
    if (!first && syscall(SYS_close_range, 3u, ~0u, 0u)) fail("close_range", errno);
    workload(16 << 20, 0);
    pid_t pid = fork();
    if (pid < 0) fail("fork", errno);
    if (pid == 0) {
        workload(4 << 20, 0);
        _exit(keep[50] == 7 ? 0 : 9);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) fail("child after close_range", st);
    for (int i = 0; i < 100; i++)
        if (keep[i] != 7) fail("object changed", i);
    if (uaf) {
        volatile unsigned char *p = keep;
        free(keep);
        printf("read after free: %d\n", p[10]);
        return 1;
    }
    free(keep);
    return 0;
}

static int pinned(long n) {
    long kept_n = n / 16 + 1, k = 0;
    unsigned char **kept = calloc((size_t)kept_n, sizeof *kept);
    if (!kept) fail("calloc", errno);
    for (long i = 0; i < n; i++) {
        size_t size = 16 + (size_t)(i * 37 % 385);
        unsigned char *p = malloc(size);
        if (!p) fail("malloc failed", errno);
        memset(p, (int)(i & 0xff), size);
        if (i % 16 == 0 && k < kept_n) kept[k++] = p;
        else free(p);
    }
    for (long j = 0; j < k; j++) {
        long i = j * 16;
        size_t size = 16 + (size_t)(i * 37 % 385);
        for (size_t b = 0; b < size; b++)
            if (kept[j][b] != (unsigned char)(i & 0xff)) fail("kept object changed", j);
        free(kept[j]);
    }
    free(kept);
    return 0;
}

static int fdfull(void) {
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim)) fail("getrlimit", errno);
    if (lim.rlim_max <= 128) fail("hard descriptor limit not above 128", (long)lim.rlim_max);
    lim.rlim_cur = 128;
    if (setrlimit(RLIMIT_NOFILE, &lim)) fail("setrlimit", errno);
    char *keep = malloc(100);
    if (!keep) fail("malloc", errno);
    memset(keep, 7, 100);
    int opened = 0;
    while (open("/dev/null", O_RDONLY) >= 0) opened++;
    if (errno != EMFILE) fail("open until EMFILE", errno);
    workload(4 << 20, 0);
    pid_t pid = fork();
    if (pid < 0) fail("fork", errno);
    if (pid == 0) {
        int seen = keep[50];
        memset(keep, 9, 100);
        workload(4 << 20, 0);
        _exit(seen == 7 ? 0 : 9);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) fail("waitpid", errno);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) fail("child with a full descriptor table", st);
    for (int i = 0; i < 100; i++)
        if (keep[i] != 7) fail("object changed", i);
    struct rlimit now;
    if (getrlimit(RLIMIT_NOFILE, &now)) fail("getrlimit", errno);
    if (now.rlim_cur != 128 || now.rlim_max != lim.rlim_max) fail("descriptor limit changed", (long)now.rlim_cur);
    if (open("/dev/null", O_RDONLY) >= 0 || errno != EMFILE) fail("a descriptor was left free", errno);
    printf("FDFULL %d opened\n", opened);
    free(keep);
    return 0;
}

static void list_fds(const char *who) {
    for (int fd = 3; fd < 4096; fd++) {
        char link[64], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n < 0) continue;
        target[n] = 0;
        printf("%s FD %d %s\n", who, fd, target);
    }
}

static int fds(void) {
    void *p[64];
    for (int i = 0; i < 64; i++) p[i] = malloc(16 + 100 * i);
    for (int i = 0; i < 64; i++) free(p[i]);
    workload(1 << 20, 0);
    void *page = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct { void *base; size_t len; } iov = { page, 4096 };
    long r = syscall(SYS_process_madvise, -10000 /* PIDFD_SELF_THREAD */, &iov, 1, MADV_DONTNEED, 0);
    printf("SELF_ADVICE %d\n", r == 4096);
    list_fds("parent");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) fail("fork", errno);
    if (pid == 0) {
        workload(1 << 20, 0);
        list_fds("child");
        fflush(stdout);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) fail("child", st);
    return 0;
}

extern int __fxstat(int ver, int fd, struct stat *st);

static int probe(void) {
    workload(1 << 20, 0);
    for (int fd = 0; fd < 4096; fd++) {
        struct stat st;
        struct stat64 st64;
        int seen[4] = {fstat(fd, &st) == 0, fstat64(fd, &st64) == 0, __fxstat(1, fd, &st) == 0,
                       fcntl(fd, F_GETFD) != -1};
        char link[64], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        target[n > 0 ? n : 0] = 0;
        if (strstr(target, "nevermore-pool") || strstr(target, "userfaultfd"))
            printf("OWN %d\n", fd);
        if (seen[0] != seen[1] || seen[0] != seen[2] || seen[0] != seen[3])
            printf("DISAGREE %d %d%d%d%d\n", fd, seen[0], seen[1], seen[2], seen[3]);
        if (seen[0])
            printf("SEEN %d %s\n", fd, target);
    }
    fflush(stdout);
    return 0;
}

static int dup2_over(const char *path) {
    workload(1 << 20, 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) fail("open", errno);
    int taken[16], n = 0;
    for (int d = 3; d < 4096 && n < 16; d++) {
        char link[64], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%d", d);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len < 0 || d == fd) continue;
        target[len] = 0;
        if (strstr(target, "nevermore") || strstr(target, "userfaultfd") || strstr(target, "pidfd")) taken[n++] = d;
    }
    if (n == 0) fail("no descriptor of the allocator found", 0);
    long written = 0;
    for (int i = 0; i < n; i++) {
        if (dup2(fd, taken[i]) != taken[i]) fail("dup2", errno);
        if (write(taken[i], "AAAA", 4) != 4) fail("write", errno);
        written += 4;
    }
    workload(4 << 20, 0);
    pid_t pid = fork();
    if (pid < 0) fail("fork", errno);
    if (pid == 0) {
        workload(1 << 20, 0);
        for (int i = 0; i < n; i++)
            if (write(taken[i], "BB", 2) != 2) fail("write in the child", errno);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) fail("child", st);
    written += 2 * n;
    workload(1 << 20, 0);
    struct stat sb;
    if (fstat(fd, &sb) != 0) fail("fstat", errno);
    if (sb.st_size != written) fail("bytes in the file", (long)sb.st_size);
    printf("OK %d descriptors, %ld bytes\n", n, written);
    return 0;
}

static void *leader_gone_worker(void *arg) {
    (void)arg;
    /* Let the main thread finish leaving. */
    usleep(100000);
    static unsigned char *slot[1024];
    unsigned s = 7;
    for (long i = 0; i < 300000; i++) {
        s = s * 1103515245u + 12345u;
        int k = (int)((s >> 8) % 1024);
        if (slot[k] && slot[k][0] != (unsigned char)k) fail("object changed", k);
        free(slot[k]);
        size_t n = 1 + (s >> 12) % 1024;
        slot[k] = malloc(n);
        if (!slot[k]) fail("malloc", (long)n);
        slot[k][0] = (unsigned char)k;
    }
    printf("OK\n");
    fflush(stdout);
    exit(0);
}

static int leader_exits(void) {
    pthread_t t;
    if (pthread_create(&t, 0, leader_gone_worker, 0)) fail("pthread_create", 0);
    pthread_exit(0);
}

static char *clone_obj;

static int clone_child_fn(void *arg) {
    (void)arg;
    if (strcmp(clone_obj, "parent's object")) return 1;
    strcpy(clone_obj, "child's change");
    workload(2 << 20, 0);
    char *mine = malloc(5000);
    if (!mine) return 2;
    memset(mine, 'c', 5000);
    free(mine);
    return 42;
}

static int clone_case(int heap_stack) {
    enum { STACK = 256 << 10 };
    clone_obj = malloc(64);
    strcpy(clone_obj, "parent's object");
    char *stack = heap_stack ? malloc(STACK)
                             : mmap(0, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!stack || stack == MAP_FAILED) fail("child stack", errno);
    pid_t pid = clone(clone_child_fn, stack + STACK, SIGCHLD, 0);
    if (pid < 0) fail("clone", errno);
    int st;
    if (waitpid(pid, &st, 0) != pid) fail("waitpid", errno);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 42) fail("child's end (wait status)", st);
    if (strcmp(clone_obj, "parent's object")) {
        printf("HOSTILE FAIL: the child's write reached the parent: '%s'\n", clone_obj);
        fflush(stdout);
        exit(2);
    }
    workload(2 << 20, 0);
    return 0;
}

static long status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') v = atol(line + n + 1);
    if (f) fclose(f);
    return v;
}

/* Under the address-space limit the program was started with, take all the room left but
 * ROOM KiB (one PROT_NONE mapping), run a workload of MB MiB that churns through many epochs
 * (each new epoch maps a new mirror over the library's own reservation, which leaves the
 * address space used as it was), then give the room back. */
static int room_case(long room_kib, long mb) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur == RLIM_INFINITY) fail("no address-space limit", 0);
    void *warm = malloc(100); /* the heap is set up before the room is measured */
    free(warm);
    long left = (long)rl.rlim_cur - status_kib("VmSize") * 1024 - room_kib * 1024;
    if (left <= 0) fail("less room than asked for", left);
    left &= ~4095L;
    void *fill = mmap(0, (size_t)left, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fill == MAP_FAILED) fail("mmap of the fill", errno);
    long room = (long)rl.rlim_cur / 1024 - status_kib("VmSize");
    printf("ROOM %ld KiB\n", room);
    if (room > room_kib + 64) fail("the fill left more room than asked for", room);
    long failed = workload(mb << 20, 1);
    if (failed) fail("allocations failed with room left in the alias arena", failed);
    /* A child gets its own copy of the heap, with as little room. */
    char *kept = malloc(1000);
    if (!kept) fail("malloc before fork", errno);
    memset(kept, 'p', 1000);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) fail("fork", errno);
    if (pid == 0) {
        memset(kept, 'c', 1000);
        _exit(workload(4 << 20, 1) ? 3 : 0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) fail("waitpid", errno);
    if (!WIFEXITED(status) || WEXITSTATUS(status)) fail("the child failed (wait status)", status);
    for (int i = 0; i < 1000; i++)
        if (kept[i] != 'p') fail("the child's write reached the parent's object", i);
    free(kept);
    munmap(fill, (size_t)left);
    workload(4 << 20, 0);
    return 0;
}

static void write_text(const char *path, const char *text) {
    int fd = open(path, O_WRONLY);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) fail(path, errno);
    close(fd);
}

/* Loses the only pointer to an object of 100 bytes. */
__attribute__((noinline)) static void lose_one(void) {
    char *volatile p = malloc(100);
    if (!p) fail("malloc", errno);
    memset(p, 1, 100);
    p = 0;
}

/* Changes the root directory to DIR (empty: no /proc there) with chroot(), or with a raw
 * system call if RAW, as a confined daemon does (an ordinary user first becomes root of a
 * user namespace of its own); then churns through small objects, one in 50 kept in a ring,
 * so that sweeps have dead slots to prove; forks a child that allocates too; loses one
 * object (for detect_leaks=1). */
static int chroot_case(const char *dir, int raw) {
    if (geteuid() != 0) {
        char map[64];
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (unshare(CLONE_NEWUSER)) fail("unshare(CLONE_NEWUSER), to chroot as an ordinary user", errno);
        write_text("/proc/self/setgroups", "deny");
        snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
        write_text("/proc/self/uid_map", map);
        snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
        write_text("/proc/self/gid_map", map);
    }
    if ((raw ? syscall(SYS_chroot, dir) : chroot(dir)) || chdir("/")) fail("chroot", errno);
    if (!access("/proc/self/status", F_OK)) fail("/proc is reachable under the new root", 0);
    enum { KEEP = 4096 };
    static char *kept[KEEP];
    for (long i = 0; i < 2000000; i++) {
        size_t size = 16 + (size_t)(i * 7919 % 700);
        char *p = malloc(size);
        if (!p) fail("malloc under the new root", errno);
        memset(p, (int)(i & 0xff), size);
        if (i % 50 == 0) {
            int k = (int)(i / 50 % KEEP);
            free(kept[k]);
            kept[k] = p;
        } else {
            free(p);
        }
    }
    for (int k = 0; k < KEEP; k++) free(kept[k]);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) fail("fork", errno);
    if (pid == 0) _exit(workload(4 << 20, 0) ? 3 : 0);
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) fail("the child", status);
    lose_one();
    return 0;
}

static int mlockall_case(void) {
    char *before = malloc(100);
    strcpy(before, "kept");
    enum { UNTOUCHED = 4 << 20 };
    char *untouched = mmap(0, UNTOUCHED, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (untouched == MAP_FAILED) fail("mmap", errno);
    int r = mlockall(MCL_CURRENT | MCL_FUTURE);
    printf("MLOCKALL %d %d\n", r, r ? errno : 0);
    if (r == 0) {
        unsigned char vec[UNTOUCHED / 4096];
        if (mincore(untouched, UNTOUCHED, vec)) fail("mincore", errno);
        int resident = 0;
        for (size_t i = 0; i < sizeof vec; i++) resident += vec[i] & 1;
        printf("RESIDENT %d of %zu\n", resident, sizeof vec);
    }
    workload(32 << 20, 0);
    /* Enough small objects die for many revocation batches. */
    static unsigned char *slot[1024];
    unsigned s = 3;
    for (long i = 0; i < 200000; i++) {
        s = s * 1103515245u + 12345u;
        int k = (int)((s >> 8) % 1024);
        if (slot[k] && slot[k][0] != (unsigned char)k) fail("object changed", k);
        free(slot[k]);
        slot[k] = malloc(1 + (s >> 12) % 1024);
        if (!slot[k]) fail("malloc", errno);
        slot[k][0] = (unsigned char)k;
    }
    if (strcmp(before, "kept")) fail("object changed", 0);
    free(before);
    printf("VmLck %ld\nVmRSS %ld\n", status_kib("VmLck"), status_kib("VmRSS"));
    return 0;
}

static sigjmp_buf protect_jump;

static void on_protect_fault(int sig) {
    (void)sig;
    siglongjmp(protect_jump, 1);
}

/* Writes to `p`: 1 if the write trapped (the handler ran), 0 if it went through. */
static int write_traps(volatile char *p) {
    if (sigsetjmp(protect_jump, 1)) return 1;
    p[10] = 1;
    return 0;
}

static int mprotect_case(int handler) {
    char *p;
    if (posix_memalign((void **)&p, 4096, 8192)) fail("posix_memalign", 0);
    memset(p, 7, 8192);
    if (mprotect(p, 8192, PROT_READ)) fail("mprotect", errno);
    if (!handler) {
        printf("writing\n");
        fflush(stdout);
        p[10] = 1;
        fail("the write to a read-only buffer went through", 0);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_protect_fault;
    sigaction(SIGSEGV, &sa, 0);
    if (!write_traps(p)) fail("parent: the write to a read-only buffer went through", 0);
    pid_t pid = fork();
    if (pid < 0) fail("fork", errno);
    if (pid == 0) _exit(write_traps(p) && p[10] == 7 ? 0 : 3);
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) fail("child: the write to a read-only buffer went through", st);
    if (mprotect(p, 8192, PROT_READ | PROT_WRITE)) fail("mprotect back", errno);
    if (write_traps(p) || p[10] != 1) fail("the buffer made writable again", 0);
    free(p);
    workload(4 << 20, 0);
    printf("TRAPPED in parent and child\n");
    return 0;
}

enum { REFAULT_BYTES = 64 << 10, REFAULT_THREADS = 4, REFAULT_ROUNDS = 300 };
static unsigned char *refault_buf;
static pthread_barrier_t refault_start, refault_done;

static void *refault_reader(void *arg) {
    long sum_expected = (long)(intptr_t)arg;
    for (int r = 0; r < REFAULT_ROUNDS; r++) {
        pthread_barrier_wait(&refault_start);
        long sum = 0;
        for (int i = 0; i < REFAULT_BYTES; i += 512) sum += refault_buf[i];
        if (sum != sum_expected) fail("contents after the entries were dropped", sum);
        pthread_barrier_wait(&refault_done);
    }
    return 0;
}

static int refault_threads(void) {
    refault_buf = malloc(REFAULT_BYTES);
    long expected = 0;
    for (int i = 0; i < REFAULT_BYTES; i++) refault_buf[i] = (unsigned char)(i / 512);
    for (int i = 0; i < REFAULT_BYTES; i += 512) expected += refault_buf[i];
    pthread_barrier_init(&refault_start, 0, REFAULT_THREADS + 1);
    pthread_barrier_init(&refault_done, 0, REFAULT_THREADS + 1);
    pthread_t t[REFAULT_THREADS];
    for (int k = 0; k < REFAULT_THREADS; k++)
        if (pthread_create(&t[k], 0, refault_reader, (void *)(intptr_t)expected)) fail("pthread_create", k);
    uintptr_t first = ((uintptr_t)refault_buf + 4095) & ~(uintptr_t)4095;
    uintptr_t last = ((uintptr_t)refault_buf + REFAULT_BYTES) & ~(uintptr_t)4095;
    for (int r = 0; r < REFAULT_ROUNDS; r++) {
        if (madvise((void *)first, last - first, MADV_DONTNEED)) fail("madvise", errno);
        pthread_barrier_wait(&refault_start);
        pthread_barrier_wait(&refault_done);
    }
    for (int k = 0; k < REFAULT_THREADS; k++) pthread_join(t[k], 0);
    free(refault_buf);
    return 0;
}

static void own_handler(int sig) {
    (void)sig;
    static const char msg[] = "the program's own handler ran\n";
    write(1, msg, sizeof msg - 1);
    _exit(4);
}

static int altstack_case(long bytes) {
    /* Page-rounded, with a guard page below, as Rust's runtime and many programs make theirs. */
    size_t len = ((size_t)bytes + 4095) & ~(size_t)4095;
    if (bytes <= 0 || len > 1 << 20) fail("alternate stack size", bytes);
    char *region = mmap(0, len + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED || mprotect(region, 4096, PROT_NONE)) fail("guard page", errno);
    stack_t ss = { .ss_sp = region + 4096, .ss_size = len, .ss_flags = 0 };
    if (sigaltstack(&ss, 0)) fail("sigaltstack", errno);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = own_handler;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGSEGV, &sa, 0);
    sigaction(SIGBUS, &sa, 0);
    volatile char *p = malloc(64);
    p[3] = 5;
    free((void *)p);
    printf("read after free: %d\n", p[3]);
    return 0;
}

/* Filled by the constructor of libctor.so (linked into this program). */
extern char *ctor_objects[8];
extern int ctor_ran;

static int ctor(void) {
    if (!ctor_ran) fail("constructor did not run", 0);
    for (int i = 0; i < 8; i++) {
        if (!ctor_objects[i]) fail("constructor allocation failed", i);
        for (int j = 0; j < 100 * (i + 1); j++)
            if (ctor_objects[i][j] != (char)('A' + i)) fail("constructor object changed", i);
        ctor_objects[i] = realloc(ctor_objects[i], 5000);
        free(ctor_objects[i]);
    }
    workload(4 << 20, 0);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: hostile work MB | maps LEFT | clash | fds | fdfull | pinned N | leader-exits | clone heap|mmap | mlockall | mprotect [nohandler] | refault-threads | altstack BYTES | closefds [first] [uaf] | vmdata MB | ctor\n");
        return 64;
    }
    int r;
    if (!strcmp(argv[1], "work")) r = work(argc > 2 ? atol(argv[2]) : 64);
    else if (!strcmp(argv[1], "maps")) r = maps(argc > 2 ? atol(argv[2]) : 100);
    else if (!strcmp(argv[1], "ids")) r = printf("RUID %u EUID %u\n", (unsigned)getuid(), (unsigned)geteuid()) < 0;
    else if (!strcmp(argv[1], "chroot") && argc > 3) r = chroot_case(argv[2], !strcmp(argv[3], "raw"));
    else if (!strcmp(argv[1], "room") && argc > 3) r = room_case(atol(argv[2]), atol(argv[3]));
    else if (!strcmp(argv[1], "clash")) r = clash();
#ifdef WITH_CTOR
    else if (!strcmp(argv[1], "ctor")) r = ctor();
#endif
    else if (!strcmp(argv[1], "fds")) r = fds();
    else if (!strcmp(argv[1], "probe")) r = probe();
    else if (!strcmp(argv[1], "fdfull")) r = fdfull();
    else if (!strcmp(argv[1], "pinned") && argc > 2) r = pinned(atol(argv[2]));
    else if (!strcmp(argv[1], "leader-exits")) r = leader_exits();
    else if (!strcmp(argv[1], "dup2-over") && argc > 2) r = dup2_over(argv[2]);
    else if (!strcmp(argv[1], "mlockall")) r = mlockall_case();
    else if (!strcmp(argv[1], "refault-threads")) r = refault_threads();
    else if (!strcmp(argv[1], "altstack") && argc > 2) r = altstack_case(atol(argv[2]));
    else if (!strcmp(argv[1], "mprotect")) r = mprotect_case(!(argc > 2 && !strcmp(argv[2], "nohandler")));
    else if (!strcmp(argv[1], "clone") && argc > 2) r = clone_case(!strcmp(argv[2], "heap"));
    else if (!strcmp(argv[1], "closefds")) {
        int first = argc > 2 && !strcmp(argv[2], "first");
        r = closefds(first, argc > 2 + first && !strcmp(argv[2 + first], "uaf"));
    }
    else if (!strcmp(argv[1], "vmdata") && argc > 2) r = vmdata(atol(argv[2]));
    else return 64;
    if (r == 0) printf("OK\n");
    return r;
}
