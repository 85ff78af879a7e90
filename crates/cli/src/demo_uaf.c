/* nevermore demo: a use-after-free that hijacks a function pointer.
 *
 * A session object is freed at logout, but the program keeps the pointer. The next allocation
 * of the same size is a job holding a function pointer; under a classic allocator it gets the
 * freed session's memory. The attacker then sets the "user name" of the stale session, which
 * writes their value over the job's function pointer, and the program calls it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct session {
    char user[16];
    long credits;
};

struct job {
    void (*run)(void);
    char name[16];
};

static void attacker_wins(void) {
    puts("WIN: attacker_wins() ran: the function pointer was hijacked");
    exit(0);
}

static void print_report(void) {
    puts("job ran normally");
}

__attribute__((noinline)) static struct session *login(const char *user) {
    struct session *s = malloc(sizeof *s);
    strcpy(s->user, user);
    s->credits = 10;
    return s;
}

__attribute__((noinline)) static void logout(struct session *s) {
    free(s); /* the bug: the caller keeps using `s` */
}

__attribute__((noinline)) static struct job *schedule(void) {
    struct job *j = malloc(sizeof *j);
    j->run = print_report;
    strcpy(j->name, "daily-report");
    return j;
}

__attribute__((noinline)) static void rename_user(struct session *s, uintptr_t attacker_bytes) {
    *(volatile uintptr_t *)s->user = attacker_bytes; /* use after free: a write */
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    struct session *s = login("alice");
    logout(s);
    struct job *j = schedule();
    printf("session %p, job %p (%s)\n", (void *)s, (void *)j, (void *)s == (void *)j ? "same memory" : "different memory");
    rename_user(s, (uintptr_t)&attacker_wins);
    j->run();
    puts("no hijack: the job's function pointer was untouched");
    return 0;
}
