/* A program that confines itself with a seccomp filter while it runs, as OpenSSH's
 * pre-authentication child does: the filter allows what the program's own code calls (read,
 * write, mmap without PROT_EXEC, madvise, futex, ...), refuses open and stat with EACCES, and
 * kills the process for everything else. Then it keeps allocating.
 * usage: late_seccomp prctl|syscall churn|zap|uaf|null|sent|ioctl|uffd-ioctl [closed]
 *   closed      first close every descriptor from 3 up (the allocator's among them), as
 *               daemons do before they confine themselves
 *   churn       small, page-sized, large and growing objects, checked; then open() must fail
 *               with EACCES; prints "CHURN OK <n>" and "OPEN EACCES"
 *   zap         drops the page-table entries of live objects of every tier with madvise
 *               (MADV_DONTNEED, which the filter allows), then reads them back: the
 *               allocator's fault handler maps them again; prints "ZAP OK"
 *   uaf         writes through a pointer to a freed object (detect mode traps it)
 *   null        the program's own bug: a write near address 0 (it dies of SIGSEGV, as under
 *               the C library's malloc, not of the filter's SIGSYS)
 *   sent        another process (forked before the filter) sends SIGSEGV with kill(): the
 *               program dies of it, as under the C library's malloc
 *   ioctl       the program's own ioctl on its standard output (the filter kills it)
 *   uffd-ioctl  the program's own ioctl on the allocator's userfaultfd (the filter kills it) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DENY(nr, err) \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err))
#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
/* Allowed when argument 2 (protection bits) has nothing beyond PROT_READ|PROT_WRITE. */
#define ALLOW_RW(nr)                                                                  \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 4),                                  \
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),   \
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, ~(uint32_t)(PROT_READ | PROT_WRITE)),     \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),                                 \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    DENY(__NR_open, EACCES),
    DENY(__NR_openat, EACCES),
    DENY(__NR_fstat, EACCES),
    DENY(__NR_newfstatat, EACCES),
    ALLOW(__NR_read),
    ALLOW(__NR_write),
    ALLOW(__NR_close),
    ALLOW(__NR_exit),
    ALLOW(__NR_exit_group),
    ALLOW(__NR_futex),
    ALLOW(__NR_getpid),
    ALLOW(__NR_getrandom),
    ALLOW(__NR_brk),
    ALLOW(__NR_clock_gettime),
    ALLOW(__NR_nanosleep),
    ALLOW(__NR_rt_sigprocmask),
    ALLOW(__NR_madvise),
    ALLOW(__NR_munmap),
    ALLOW(__NR_mremap),
    ALLOW_RW(__NR_mmap),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    ALLOW_RW(__NR_mprotect),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
};

/* The allocator's userfaultfd, found before the filter forbids looking: -1 if none. */
static int find_uffd(void) {
    char path[64], target[64];
    for (int fd = 3; fd < 4096; fd++) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0) {
            target[n] = 0;
            if (strstr(target, "userfaultfd")) return fd;
        }
    }
    return -1;
}

static uint64_t seed = 0x243F6A8885A308D3ULL;
static uint64_t rnd(void) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
}

static void fill(unsigned char *p, size_t n, unsigned char v) {
    memset(p, v, n);
}

static int intact(const unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

#define SLOTS 4096

/* Many rounds of objects of every tier: enough for new slabs, new epochs (their mirrors are
 * registered with userfaultfd), revocation batches and large objects' views. */
static long churn(void) {
    static unsigned char *obj[SLOTS];
    static size_t len[SLOTS];
    long made = 0;
    for (long step = 0; step < 600000; step++) {
        size_t i = rnd() % SLOTS;
        if (obj[i]) {
            if (!intact(obj[i], len[i], (unsigned char)i)) {
                printf("CORRUPT slot %zu\n", i);
                exit(3);
            }
            if (rnd() % 8 == 0 && len[i] < 100000) {
                /* Grow it: realloc keeps the contents. */
                size_t n = len[i] * 2 + 1;
                unsigned char *q = realloc(obj[i], n);
                if (!q) exit(4);
                if (!intact(q, len[i], (unsigned char)i)) {
                    printf("REALLOC LOST slot %zu\n", i);
                    exit(3);
                }
                fill(q, n, (unsigned char)i);
                obj[i] = q, len[i] = n;
                continue;
            }
            free(obj[i]);
            obj[i] = NULL;
        }
        uint64_t r = rnd() % 1000;
        size_t n = r < 900 ? rnd() % 1025 : r < 990 ? 4096 * (1 + rnd() % 3) : 150000 + rnd() % 300000;
        obj[i] = malloc(n);
        if (!obj[i]) exit(4);
        fill(obj[i], n, (unsigned char)i);
        len[i] = n;
        made++;
    }
    for (size_t i = 0; i < SLOTS; i++) free(obj[i]);
    return made;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int uffd = find_uffd();
    if (argc > 3 && !strcmp(argv[3], "closed")) syscall(SYS_close_range, 3U, ~0U, 0);
    if (!strcmp(argv[2], "sent") && fork() == 0) {
        usleep(300000);
        kill(getppid(), SIGSEGV);
        _exit(0);
    }
    /* Before the filter: stdio's buffer. */
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return 2;
    int r = !strcmp(argv[1], "prctl") ? prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)
                                      : syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
    if (r) {
        perror("seccomp");
        return 2;
    }
    if (!strcmp(argv[2], "churn")) {
        printf("CHURN OK %ld\n", churn());
        int fd = open("/etc/hostname", O_RDONLY);
        if (fd < 0 && errno == EACCES) printf("OPEN EACCES\n");
        return 0;
    }
    if (!strcmp(argv[2], "zap")) {
        static const size_t sizes[] = {24, 200, 1000, 4096, 3 * 4096, 50000, 300000};
        enum { N = sizeof sizes / sizeof sizes[0] };
        unsigned char *obj[N];
        for (int i = 0; i < N; i++) {
            obj[i] = malloc(sizes[i]);
            if (!obj[i]) return 4;
            fill(obj[i], sizes[i], (unsigned char)(0x40 + i));
        }
        for (int i = 0; i < N; i++) {
            uintptr_t lo = (uintptr_t)obj[i] & ~(uintptr_t)4095;
            uintptr_t hi = ((uintptr_t)obj[i] + sizes[i] + 4095) & ~(uintptr_t)4095;
            if (madvise((void *)lo, hi - lo, MADV_DONTNEED)) {
                printf("MADVISE FAILED %d\n", errno);
                return 5;
            }
        }
        for (int i = 0; i < N; i++) {
            if (!intact(obj[i], sizes[i], (unsigned char)(0x40 + i))) {
                printf("LOST object %d\n", i);
                return 3;
            }
            free(obj[i]);
        }
        printf("ZAP OK\n");
        return 0;
    }
    if (!strcmp(argv[2], "uaf")) {
        volatile char *p = malloc(64);
        p[0] = 1;
        free((void *)p);
        p[8] = 2;
        printf("NOT TRAPPED\n");
        return 0;
    }
    if (!strcmp(argv[2], "null")) {
        *(volatile int *)16 = 1;
        printf("NOT TRAPPED\n");
        return 0;
    }
    if (!strcmp(argv[2], "sent")) {
        for (int i = 0; i < 50; i++) {
            struct timespec ts = {0, 100000000};
            syscall(SYS_nanosleep, &ts, NULL); /* glibc's nanosleep is clock_nanosleep */
        }
        printf("NOT KILLED\n");
        return 0;
    }
    if (!strcmp(argv[2], "ioctl")) {
        int n = 0;
        ioctl(1, FIONREAD, &n);
        printf("IOCTL PASSED\n");
        return 0;
    }
    if (!strcmp(argv[2], "uffd-ioctl")) {
        if (uffd < 0) return 5;
        /* UFFDIO_CONTINUE with a zeroed request, from the program's code. */
        uint64_t req[4] = {0};
        syscall(SYS_ioctl, uffd, 0xc020aa07UL, req);
        printf("UFFD IOCTL PASSED\n");
        return 0;
    }
    return 2;
}
