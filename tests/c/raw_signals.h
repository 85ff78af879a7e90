/* Signal actions set with the system call itself, as programs that skip the C library's
 * sigaction do: the kernel's struct sigaction (x86-64), and a restorer of the program's own
 * (rt_sigreturn), which the kernel requires with SA_RESTORER. */
#ifndef RAW_SIGNALS_H
#define RAW_SIGNALS_H
#include <sys/syscall.h>
#include <unistd.h>

struct kernel_action {
    void *handler;
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};
#define KERNEL_SA_RESTORER 0x04000000UL

void raw_restore_rt(void);
__asm__(".text\n.globl raw_restore_rt\n.type raw_restore_rt,@function\n"
        "raw_restore_rt:\n\tmov $15, %eax\n\tsyscall\n\thlt\n");

/* syscall(SYS_rt_sigaction) of `handler` with `flags` (and the restorer), an empty mask. */
static inline long raw_action(int sig, void *handler, unsigned long flags, struct kernel_action *old) {
    struct kernel_action k = {handler, flags | KERNEL_SA_RESTORER, raw_restore_rt, 0};
    return syscall(SYS_rt_sigaction, sig, &k, old, 8);
}
#endif
