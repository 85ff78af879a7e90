/* Runs a program with userfaultfd refused by a seccomp filter (as Docker's default profile
 * does), and optionally MADV_GUARD_INSTALL refused too (as on kernels before 6.13), or
 * answered 0 without being carried out and process_madvise unknown (as under qemu-user), or
 * memfd_create refused with ENOSYS (as man-db's sandbox for its filters does); or, with
 * --service, userfaultfd allowed and the process killed for mincore and ptrace (as systemd's
 * SystemCallFilter=@system-service does).
 * Usage: seccomp_run [--no-guard | --fake-guard | --no-memfd | --service] PROGRAM ARGS... */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MADV_GUARD_INSTALL_ 102

int main(int argc, char **argv) {
    int no_guard = argc > 1 && !strcmp(argv[1], "--no-guard");
    int no_memfd = argc > 1 && !strcmp(argv[1], "--no-memfd");
    int fake_guard = argc > 1 && !strcmp(argv[1], "--fake-guard");
    int as_service = argc > 1 && !strcmp(argv[1], "--service");
    char **prog = argv + 1 + no_guard + no_memfd + fake_guard + as_service;
    if (!*prog) return 2;
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_userfaultfd, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_memfd_create, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, no_memfd ? (SECCOMP_RET_ERRNO | ENOSYS) : SECCOMP_RET_ALLOW),
        /* qemu-user knows no process_madvise either: revocations then go through madvise. */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_madvise, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, fake_guard ? (SECCOMP_RET_ERRNO | ENOSYS) : SECCOMP_RET_ALLOW),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MADV_GUARD_INSTALL_, 0, 1),
        BPF_STMT(BPF_RET | BPF_K,
                 no_guard     ? (SECCOMP_RET_ERRNO | EINVAL)
                 : fake_guard ? (SECCOMP_RET_ERRNO | 0) /* returns 0, does nothing */
                              : SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    /* A service's filter as systemd's SystemCallFilter=@system-service makes it: the process
     * is killed for a call outside the set, among them mincore and ptrace; userfaultfd is in. */
    struct sock_filter service[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mincore, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ptrace, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog p = {.len = sizeof f / sizeof f[0], .filter = f};
    if (as_service) p = (struct sock_fprog){.len = sizeof service / sizeof service[0], .filter = service};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p)) {
        perror("seccomp");
        return 2;
    }
    execvp(prog[0], prog);
    perror("exec");
    return 127;
}
