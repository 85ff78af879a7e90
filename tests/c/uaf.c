/* Use-after-free, revocation and signal-handling cases for the alias engine.
 * Usage: uaf <case> [size]
 *   copy-freed SIZE      memcpy SIZE + 1000 bytes into an object of SIZE bytes, whose bounds
 *                        this thread looked up, after another thread freed it: prints "copied"
 *                        if the copy does not trap.
 *   read|write SIZE      free an object, then read/write it through the dangling pointer.
 *                        Before the access, 2000 newer objects of the same size are filled
 *                        with 0x5A; if the access does not trap, every newer object must
 *                        still hold the pattern: prints INTACT (exit 0) or CORRUPTED (exit 1).
 *   locked SIZE          as write, for one of 32 objects whose pages the program locked
 *                        (mlock) and that it freed without munlock.
 *   kernel-read SIZE     free an object, force revocation (free 600 other objects), then
 *                        read(2) into the dangling pointer: prints "errno=N" (the library's
 *                        `read` reports it instead).
 *   kernel-read-raw SIZE the same through syscall(SYS_read), which no library sees.
 *   kernel-read-now SIZE, kernel-read-raw-now SIZE  the same without the frees that force
 *                        the revocation: the read comes before the batch is revoked.
 *   kernel-write-now SIZE  free an object, then write(2) 8 bytes of it to a pipe at once:
 *                        prints "sent=N" (the library's `write` reports it instead).
 *   moved CALL SIZE EXTRA  CALL (read, recv, recvfrom, readv, recvmsg, recvmmsg, pread, write,
 *                        send, sendto, writev, sendmsg, sendmmsg, pwrite, the stdio calls
 *                        fread, fgets, fwrite, the wide fgetws, fgetws_unlocked and
 *                        __fgetws_chk (of (SIZE + EXTRA + 3) / 4 characters), and getrandom, readlink, readlinkat, getxattr,
 *                        listxattr, getdents64, getcwd, realpath and __realpath_chk (told the
 *                        buffer holds PATH_MAX bytes), which fill the buffer with
 *                        exactly SIZE + EXTRA bytes, at most 4000; getdents64 with whole entries of
 *                        at most 32 bytes, more than 31 of them) moves SIZE + EXTRA bytes through a
 *                        live object of SIZE bytes (reads from a socket a child fills, or a
 *                        file for pread, fread and fgets (a line of SIZE + EXTRA - 1 bytes);
 *                        writes to a file, or to a socket for send, sendto, sendmsg and
 *                        sendmmsg, at most 64 KiB): prints "moved=N" (the library reports
 *                        a call that runs past the object).
 *   copy CALL SIZE EXTRA CALL (memcpy, memmove, mempcpy, __mempcpy, memset, explicit_bzero,
 *                        bzero, __bzero, bcopy, memccpy (to the source's NUL; "memccpy-none"
 *                        for a byte it does not hold), strcpy, stpcpy, strcat,
 *                        strncpy, stpncpy, __stpncpy, strncat, their fortified names
 *                        __memcpy_chk, ... called with no size known (-1), the formatting calls
 *                        sprintf, vsprintf, snprintf, vsnprintf, __sprintf_chk, __vsprintf_chk,
 *                        __snprintf_chk, __vsnprintf_chk of "%s", strftime and strftime_l of a
 *                        format of plain characters, and the wide-character copies
 *                        wmemcpy, wmemmove, wmempcpy, wmemset, wcscpy, wcpcpy, wcscat, wcsncpy,
 *                        wcpncpy, wcsncat, the wide formatting calls swprintf, vswprintf (of
 *                        "%ls") and their fortified names, wcsftime, wcsftime_l and
 *                        __wcsftime_l of plain characters, of SIZE + EXTRA bytes rounded up to
 *                        whole characters) writes SIZE + EXTRA bytes (a string's
 *                        with its NUL) into a live object of SIZE bytes with live neighbours;
 *                        "memcpy-out" and "wmemcpy-out" read them out of it, and the
 *                        duplicates "strdup-out", "__strdup-out", "strndup-out" (told SIZE +
 *                        EXTRA) and "wcsdup-out" read a string of that length in it (when
 *                        EXTRA is 0; else one without a NUL in the object), and "qsort" and
 *                        "qsort_r" sort SIZE + EXTRA elements of one byte in it: prints "copied"
 *                        (the library reports a copy that would run past the object, before it
 *                        is made), or "BAD RETURN".
 *   scan CALL CONV SIZE EXTRA  CALL (sscanf, vsscanf, fscanf, vfscanf, scanf, vscanf, and their
 *                        __isoc99_ names, which the headers make of a program's calls) reads
 *                        a word of SIZE + EXTRA - 1 bytes (from a string, a file, or standard
 *                        input made that file) with CONV ("s" for "%d %s", "set" for
 *                        "%d %[a-z]", "c" for "%d %<SIZE + EXTRA>c") into a live object of SIZE
 *                        bytes: prints "scanned N" (the library reports a scan that wrote
 *                        past the object, when it returns).
 *   wscan CALL CONV SIZE EXTRA  the same with the wide calls (swscanf, fwscanf, wscanf, their
 *                        `v` forms, and their __isoc99_ and __isoc23_ names), and CONV "ls"
 *                        ("%d %ls": a word of (SIZE + EXTRA) / 4 - 1 wide characters);
 *                        with "offbyone" after EXTRA, a NUL is written past the object first.
 *   wscan-formats        the wide calls' formats (characters past ASCII, %ls, %ms, %as) into
 *                        heap objects that fit: prints what was scanned.
 *   scan-formats         scans with every kind of conversion (numbers, %n, %*s, %ms, %lc,
 *                        arguments past the registers, a positional format) into heap objects
 *                        that fit: prints what was scanned.
 *   conv CALL SIZE N LEN [utf8]  CALL (mbstowcs, mbsrtowcs, mbsnrtowcs, wcstombs, wcsrtombs,
 *                        wcsnrtombs) of a string of LEN characters ('a', or
 *                        'é' in C.UTF-8) into a live object of SIZE bytes, told it holds N:
 *                        prints "conv R" (the library reports a conversion that would run
 *                        past the object, before it is made); "iconv" converts LEN Latin-1
 *                        'é' to UTF-8 and prints "conv R ok|ERROR wrote=BYTES".
 *   strread CALL SIZE EXTRA  CALL (strlen, strnlen, strchr, strchrnul, strrchr, strcmp, strncmp,
 *                        strcasecmp, strncasecmp, strstr, strcasestr, strspn, strcspn, strpbrk,
 *                        memchr, rawmemchr, memrchr, memcmp, bcmp, memmem, wcslen, wcsnlen,
 *                        wcschr, wcsrchr, wmemchr, wcscmp, wcsncmp, wmemcmp) of a live object
 *                        of SIZE bytes holding a string that ends at its last byte, or (EXTRA >
 *                        0) none; memory functions told SIZE + EXTRA (wmemcmp: EXTRA more
 *                        characters than the object holds): prints "read R" (the
 *                        library reports a read past the object, in detect mode or with
 *                        check_reads=1).
 *   lookup CALL SIZE LEN CALL (getpwnam_r, getpwuid_r of root, getgrnam_r, getgrgid_r of the root
 *                        group, gethostbyname_r, gethostbyname2_r of localhost, gethostbyaddr_r
 *                        of 127.0.0.1, getservbyname_r, getservbyport_r of http,
 *                        getprotobyname_r, getprotobynumber_r of tcp, getspnam_r of root) into
 *                        a live object of SIZE bytes, told it holds LEN: prints
 *                        "lookup R NAME" or "lookup R" (the library reports an entry that
 *                        would have been written past the object). Also the enumerations
 *                        getpwent_r, getgrent_r, getspent_r (their first entry) and
 *                        fgetpwent_r, fgetgrent_r, fgetspent_r (of a file whose first entry is
 *                        root's).
 *   enumerate CALL       one of those enumerations into an object too small (ERANGE), then
 *                        its first two entries into an object smaller than the length told:
 *                        prints "enumerate R0 R1 R2 same" when they are the first two.
 *   groups SIZE COUNT    getgrouplist of root into a live object of SIZE bytes, told it holds
 *                        COUNT groups: prints "groups R N same" or "groups R N DIFF" (see
 *                        named).
 *   named CALL SIZE LEN   CALL (gethostname, getdomainname, ttyname_r and ptsname_r of a new pseudo-terminal,
 *                        confstr of _CS_PATH, strerror_r of an unknown error, __xpg_strerror_r of
 *                        ENOENT, getnameinfo-host and getnameinfo-serv of 127.0.0.1:8080 as
 *                        numbers, told LEN; if_indextoname of 1, asctime_r of time 0, ctime_r,
 *                        which take no length; getentropy of LEN bytes) into a live object of
 *                        SIZE bytes with live neighbours: prints "named R same" when its result
 *                        R and text are what the C library gives a buffer of its own told LEN,
 *                        else "named R DIFF" (the library reports a call that would have written
 *                        past the object).
 *   getline CALL SIZE N LEN  CALL (getline, getdelim, __getdelim) of a line of LEN bytes into a
 *                        live object of SIZE bytes, told it holds N: prints "getline R same N"
 *                        or "getline R grown" (the library reports a line that would have
 *                        been written past the object, when the call returns).
 *   ntop SIZE LENGTH [4] inet_ntop of an IPv6 address (an IPv4 one with "4") into a live object of
 *                        SIZE bytes, told it holds LENGTH: prints "ntop TEXT" or "ntop NULL
 *                        ERROR" (the library reports a text that would run past the object).
 *   strftime-results     strftime and strftime_l into a heap object of 10 bytes with a length past
 *                        its end (a text that fits, an empty one, one too long for the length),
 *                        and into a stack buffer: prints what each returned and made.
 *   wcsftime-results     the same with wcsftime and wcsftime_l (lengths in characters).
 *   wformat-args         the wide formatting calls (swprintf, vswprintf, __swprintf_chk,
 *                        __vswprintf_chk) with many kinds of argument, into heap objects and a
 *                        stack buffer, with a length past the object, a cut text, and a text
 *                        that cannot be made: prints what each call returned and made.
 *   fortified CALL       CALL (a fortified copy: __memcpy_chk, ...) of 50 bytes (a string's
 *                        with its NUL) into a live object of 100 bytes, told the destination
 *                        holds 40 (a wide one: 13 characters, told 10; __realpath_chk told
 *                        100): the C library's check must still end it (SIGABRT).
 *   copy-shrunk          memcpy of 200 bytes into a live object of 200 bytes (which the
 *                        library's look-up remembers), realloc of it to 100 bytes, then memcpy
 *                        of 150 bytes into it: prints "copied" (the library reports the second).
 *   format-args          each formatting call into a heap object and into a stack buffer, with
 *                        integer and floating arguments past the registers, a length past the
 *                        object's that its text fits in, and a cut text: prints each text.
 *   dead-slot CALL       CALL (read or write) of 10 bytes on a freed 100-byte object whose
 *                        neighbours of its size stay live: prints "moved=N" (the library
 *                        reports the freed buffer, also where its alias is still mapped).
 *   kernel-overflow      recv(2) of a 12 KiB datagram into a live 8 KiB object, whose end is
 *                        a guard page: prints "errno=N" (the library's `recv` reports it).
 *   double-free SIZE     free an object, churn, keep many objects of its size (one of them
 *                        almost surely where it was), free it again.
 *   gap-revoke           frees 64 page objects in two batches (odd, then even ones), for the
 *                        revocation statistics (prevent mode, stats=1).
 *   released-slab-free K, released-slab-read K
 *                        free, or read, a pointer into a slab released in this epoch after
 *                        a newer slab of its class was made (K objects per slab step).
 *   own-segv             the program's own SIGSEGV handler (sigaction) must run for a fault
 *                        that is not the allocator's.
 *   own-segv-signal      the same with signal().
 *   own-segv-raw         the same with syscall(SYS_rt_sigaction), which must also read back
 *                        the previous handler (SIG_DFL) and the program's.
 *   ignored-sent         the program ignores SIGSEGV and SIGBUS and sends them to itself
 *                        (raise): both are ignored, as without the allocator (prints
 *                        IGNORED); then a fault still kills it (SIGSEGV).
 *   own-handler-uaf      the program has SIGSEGV/SIGBUS handlers; a use-after-free must
 *                        still be reported by the allocator.
 *   own-handler-uaf-raw  the same with handlers set by syscall(SYS_rt_sigaction).
 *   blocked-uaf          a thread that blocked every signal reads freed memory.
 *   blocked-uaf-raw      the same, signals blocked with syscall(SYS_rt_sigprocmask).
 *   unique N [touch]     N allocations of random sizes (mixed with frees): no address is
 *                        ever returned twice (prints UNIQUE); with "touch", every page of
 *                        every object is written.
 *   dropped-pte          a live object's page-table entry is dropped by the program
 *                        (madvise MADV_DONTNEED): the next access must just work and see
 *                        the data (prints DATA KEPT).
 *   dropped-pte-blocked  the same after blocking every signal with
 *                        syscall(SYS_rt_sigprocmask).
 *   dropped-page         small objects of 40 and 24 bytes whose alias pages' entries are
 *                        dropped: the bytes of each page beyond the object (the page's tail
 *                        after its last slot, another slot) are read, as a read past the
 *                        object reads them when the entry is there; then each object's data is
 *                        checked (prints DATA KEPT).
 *   churn N [SLOTS [MAX]] N random small allocations and frees (sizes 0..MAX-1, 1500 by
 *                        default) replacing random slots of a ring of SLOTS (<= 1024, the
 *                        default), with every live object's contents checked: prints CHURN OK.
 *   recycle N            N allocations and frees as `churn` (objects checked); early on, 64
 *                        objects are freed while the program keeps pointers to them (a global
 *                        array), and 64 more are freed and forgotten (their addresses kept only
 *                        xored). No later object may cover a kept object's bytes: prints KEPT
 *                        NEVER REUSED or KEPT REUSED n, and DROPPED REUSED n (objects over the
 *                        forgotten ones' bytes); exit 1 on corruption only.
 *   fork-uaf SIZE        free an object (detect mode revokes it at once), fork; the child
 *                        reads it. The parent prints how the child ended.
 *   ancient N [read|free] N allocations and frees (many epochs come and go); a quarter of
 *                        the way, one object is freed, which is read at the end with `read`
 *                        (it must trap) or freed again with `free` (a double free).
 *   ring N               an object allocated first lives on while N allocations and frees
 *                        make epochs come and go (many more than the mirror table holds with
 *                        a small alias_space); then the process forks: the child checks the
 *                        object and overwrites it, the parent checks it was not changed; a
 *                        second child reads a freed page object, which must trap. Prints
 *                        RING OK, or what failed (exit 1).
 *   spike MS             allocates and frees ~64 MiB of small objects, then keeps a light
 *                        allocation load for MS milliseconds; prints the pool's memory
 *                        (POOL_KIB n, the allocated size of the memfd named nevermore-pool).
 *   phase MS [trim]      allocates ~64 MiB of small objects and frees all but one in 256, then
 *                        keeps a light allocation load of other sizes for MS milliseconds;
 *                        with "trim", calls malloc_trim(0); checks the survivors' contents
 *                        (CORRUPTED on a mismatch) and prints POOL_KIB.
 *   whole-pages N        allocates N objects of 4096 bytes and fills them; prints POOL_KIB.
 *   forked-pages N       allocates N objects of 4096 bytes, fills them, frees every other one and
 *                        forks; the child writes the objects left and prints CHILD_POOL_KIB,
 *                        the pool its copy holds; the parent then prints POOL_KIB.
 *   dump-flags           for a small, a page and a large object, and for the biggest mapping
 *                        of the pool's memfd (its canonical view), prints whether a core dump
 *                        would leave the mapping out ("dd" in /proc/self/smaps): DUMP <what>
 *                        yes|no.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <dirent.h>
#include <sys/xattr.h>
#include <sys/random.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>
#include <limits.h>
#include <locale.h>
#include <iconv.h>
#include <grp.h>
#include <pwd.h>
#include <shadow.h>
#include <netdb.h>
#include <net/if.h>
#include "pool_probe.h"
#include "raw_signals.h"

/* gets, which the headers no longer declare (C11 removed it); the C library still has it. */
extern char *gets(char *);

/* The XSI strerror_r, by the name the C library exports it under. */
extern int __xpg_strerror_r(int errnum, char *buf, size_t len);

/* A pseudo-terminal for "named": its master and slave descriptors. */
static int named_master = -1, named_slave = -1;
static void named_pty(void) {
    if (named_master >= 0)
        return;
    char name[128];
    named_master = posix_openpt(O_RDWR | O_NOCTTY);
    if (named_master < 0 || grantpt(named_master) || unlockpt(named_master) ||
        ptsname_r(named_master, name, sizeof name)) {
        perror("pseudo-terminal");
        exit(2);
    }
    named_slave = open(name, O_RDWR | O_NOCTTY);
    if (named_slave < 0) {
        perror("open pseudo-terminal");
        exit(2);
    }
}

/* The collation transforms as the C++ library's std::collate calls them. */
extern size_t __strxfrm_l(char *, const char *, size_t, locale_t);
extern size_t __wcsxfrm_l(wchar_t *, const wchar_t *, size_t, locale_t);

/* A stream of entries for the fget*ent_r calls: root's, then daemon's. */
static FILE *entries(const char *call) {
    const char *text = !strcmp(call, "fgetpwent_r") ? "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
                       : !strcmp(call, "fgetgrent_r") ? "root:x:0:\ndaemon:x:1:\n"
                                                      : "root:*:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n";
    FILE *f = tmpfile();
    if (!f || fputs(text, f) < 0) exit(2);
    rewind(f);
    return f;
}

/* The next entry of the enumeration CALL (getpwent_r, getgrent_r, getspent_r, fgetpwent_r,
 * fgetgrent_r, fgetspent_r; the fget ones from `entries`, opened at the first call) into BUF told LEN: 0
 * for another call, else 1 with its result in *R and the entry's name (or NULL) in *NAME. */
static int enumerate_call(const char *call, char *buf, size_t len, int *r, const char **name) {
    static FILE *f;
    struct passwd pw, *pr = NULL;
    struct group gr, *gres = NULL;
    struct spwd sp, *spr = NULL;
    if (!strncmp(call, "fget", 4) && !f) f = entries(call);
    if (!strcmp(call, "getpwent_r")) *r = getpwent_r(&pw, buf, len, &pr);
    else if (!strcmp(call, "getgrent_r")) *r = getgrent_r(&gr, buf, len, &gres);
    else if (!strcmp(call, "getspent_r")) *r = getspent_r(&sp, buf, len, &spr);
    else if (!strcmp(call, "fgetpwent_r")) *r = fgetpwent_r(f, &pw, buf, len, &pr);
    else if (!strcmp(call, "fgetgrent_r")) *r = fgetgrent_r(f, &gr, buf, len, &gres);
    else if (!strcmp(call, "fgetspent_r")) *r = fgetspent_r(f, &sp, buf, len, &spr);
    else return 0;
    *name = pr ? pr->pw_name : gres ? gres->gr_name : spr ? spr->sp_namp : NULL;
    return 1;
}

/* The C locale, for the "named" calls that take one. */
static locale_t named_locale(void) {
    static locale_t c;
    if (!c)
        c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    return c;
}

/* CALL of "named" into BUF told LEN (bytes; the wide calls are told whole characters): its
 * result as a number, its text in *TEXT. */
static long named_call(const char *call, char *buf, size_t len, const char **text) {
    *text = buf;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(8080)};
    sin.sin_addr.s_addr = htonl(0x7f000001);
    struct tm tm;
    time_t t0 = 0;
    if (!strcmp(call, "gethostname")) return gethostname(buf, len);
    if (!strcmp(call, "getdomainname")) return getdomainname(buf, len);
    if (!strcmp(call, "ttyname_r")) return named_pty(), ttyname_r(named_slave, buf, len);
    if (!strcmp(call, "ptsname_r")) return named_pty(), ptsname_r(named_master, buf, len);
    if (!strcmp(call, "confstr")) return (long)confstr(_CS_PATH, buf, len);
    if (!strcmp(call, "__xpg_strerror_r")) return __xpg_strerror_r(ENOENT, buf, len);
    if (!strcmp(call, "strerror_r")) {
        *text = strerror_r(12345, buf, len);
        return *text == buf;
    }
    if (!strcmp(call, "getnameinfo-host"))
        return getnameinfo((struct sockaddr *)&sin, sizeof sin, buf, len, NULL, 0, NI_NUMERICHOST);
    if (!strcmp(call, "getnameinfo-serv"))
        return getnameinfo((struct sockaddr *)&sin, sizeof sin, NULL, 0, buf, len, NI_NUMERICSERV);
    if (!strcmp(call, "if_indextoname")) return if_indextoname(1, buf) != NULL;
    if (!strcmp(call, "asctime_r")) return asctime_r(gmtime_r(&t0, &tm), buf) != NULL;
    if (!strcmp(call, "ctime_r")) return ctime_r(&t0, buf) != NULL;
    if (!strcmp(call, "strxfrm")) return (long)strxfrm(buf, "collation-source-text", len);
    if (!strcmp(call, "wcsxfrm"))
        return (long)wcsxfrm((wchar_t *)buf, L"collation-source-text", len / sizeof(wchar_t));
    if (!strcmp(call, "strxfrm_l")) return (long)strxfrm_l(buf, "collation-source-text", len, named_locale());
    if (!strcmp(call, "wcsxfrm_l"))
        return (long)wcsxfrm_l((wchar_t *)buf, L"collation-source-text", len / sizeof(wchar_t), named_locale());
    if (!strcmp(call, "__strxfrm_l")) return (long)__strxfrm_l(buf, "collation-source-text", len, named_locale());
    if (!strcmp(call, "__wcsxfrm_l"))
        return (long)__wcsxfrm_l((wchar_t *)buf, L"collation-source-text", len / sizeof(wchar_t), named_locale());
    if (!strcmp(call, "getentropy")) {
        *text = "";
        return getentropy(buf, len);
    }
    fprintf(stderr, "unknown call %s\n", call);
    exit(2);
}


/* The fortified functions, called as a program built with _FORTIFY_SOURCE calls them. */
extern void *__memcpy_chk(void *, const void *, size_t, size_t);
extern void *__memmove_chk(void *, const void *, size_t, size_t);
extern void *__mempcpy_chk(void *, const void *, size_t, size_t);
extern void *__memset_chk(void *, int, size_t, size_t);
extern void __explicit_bzero_chk(void *, size_t, size_t);
extern char *__strcpy_chk(char *, const char *, size_t);
extern char *__stpcpy_chk(char *, const char *, size_t);
extern char *__strcat_chk(char *, const char *, size_t);
extern char *__strncpy_chk(char *, const char *, size_t, size_t);
extern char *__strncat_chk(char *, const char *, size_t, size_t);
extern void *__mempcpy(void *, const void *, size_t);
extern char *__stpncpy(char *, const char *, size_t);
extern char *__stpncpy_chk(char *, const char *, size_t, size_t);
extern wchar_t *__wmemcpy_chk(wchar_t *, const wchar_t *, size_t, size_t);
extern wchar_t *__wmemmove_chk(wchar_t *, const wchar_t *, size_t, size_t);
extern wchar_t *__wmempcpy_chk(wchar_t *, const wchar_t *, size_t, size_t);
extern wchar_t *__wmemset_chk(wchar_t *, wchar_t, size_t, size_t);
extern wchar_t *__wcscpy_chk(wchar_t *, const wchar_t *, size_t);
extern wchar_t *__wcpcpy_chk(wchar_t *, const wchar_t *, size_t);
extern wchar_t *__wcscat_chk(wchar_t *, const wchar_t *, size_t);
extern wchar_t *__wcsncpy_chk(wchar_t *, const wchar_t *, size_t, size_t);
extern wchar_t *__wcpncpy_chk(wchar_t *, const wchar_t *, size_t, size_t);
extern wchar_t *__wcsncat_chk(wchar_t *, const wchar_t *, size_t, size_t);
extern char *__realpath_chk(const char *, char *, size_t);
extern char *__strdup(const char *);
extern ssize_t __getdelim(char **, size_t *, int, FILE *);
extern int __swprintf_chk(wchar_t *, size_t, int, size_t, const wchar_t *, ...);
extern int __vswprintf_chk(wchar_t *, size_t, int, size_t, const wchar_t *, va_list);
extern int __sprintf_chk(char *, int, size_t, const char *, ...);
extern int __vsprintf_chk(char *, int, size_t, const char *, va_list);
extern int __snprintf_chk(char *, size_t, int, size_t, const char *, ...);
extern int __vsnprintf_chk(char *, size_t, int, size_t, const char *, va_list);

/* The formatting call named `call` of `fmt` into `d` (`n` bytes where it takes a length);
 * -2 for an unknown name. */
static int format_call(const char *call, char *d, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = -2;
    if (!strcmp(call, "vsprintf")) r = vsprintf(d, fmt, ap);
    else if (!strcmp(call, "vsnprintf")) r = vsnprintf(d, n, fmt, ap);
    else if (!strcmp(call, "__vsprintf_chk")) r = __vsprintf_chk(d, 1, (size_t)-1, fmt, ap);
    else if (!strcmp(call, "__vsnprintf_chk")) r = __vsnprintf_chk(d, n, 1, (size_t)-1, fmt, ap);
    va_end(ap);
    return r;
}

#define FORMAT_ARGS "%d|%s|%.2f|%ld|%.1f|%.1f|%.1f|%.1f|%.1f|%.1f|%.1f|%.1f|%c|%x|%lu"
#define FORMAT_VALUES -7, "abc", 3.14159, 123456789012L, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 'Z', 0xbeef, 42UL

/* `call` of FORMAT_ARGS into `d` (`n` bytes where it takes a length). */
static int format_args(const char *call, char *d, size_t n) {
    if (!strcmp(call, "sprintf")) return sprintf(d, FORMAT_ARGS, FORMAT_VALUES);
    if (!strcmp(call, "snprintf")) return snprintf(d, n, FORMAT_ARGS, FORMAT_VALUES);
    if (!strcmp(call, "__sprintf_chk")) return __sprintf_chk(d, 1, (size_t)-1, FORMAT_ARGS, FORMAT_VALUES);
    if (!strcmp(call, "__snprintf_chk")) return __snprintf_chk(d, n, 1, (size_t)-1, FORMAT_ARGS, FORMAT_VALUES);
    return format_call(call, d, n, FORMAT_ARGS, FORMAT_VALUES);
}

/* `call` of "%s" with `s` into `d` (`n` bytes where it takes a length). */
static int format_string(const char *call, char *d, size_t n, const char *s) {
    if (!strcmp(call, "sprintf")) return sprintf(d, "%s", s);
    if (!strcmp(call, "snprintf")) return snprintf(d, n, "%s", s);
    if (!strcmp(call, "__sprintf_chk")) return __sprintf_chk(d, 1, (size_t)-1, "%s", s);
    if (!strcmp(call, "__snprintf_chk")) return __snprintf_chk(d, n, 1, (size_t)-1, "%s", s);
    return format_call(call, d, n, "%s", s);
}

static const char *const FORMAT_CALLS[] = {"sprintf", "vsprintf", "snprintf", "vsnprintf",
                                           "__sprintf_chk", "__vsprintf_chk", "__snprintf_chk",
                                           "__vsnprintf_chk"};

/* The `v` wide formatting call named `call` of `fmt` into `n` characters at `d`, told the
 * destination holds `dl` where the call is fortified; -2 for an unknown name. */
static int wformat_v(const char *call, wchar_t *d, size_t n, size_t dl, const wchar_t *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = -2;
    if (!strcmp(call, "vswprintf")) r = vswprintf(d, n, fmt, ap);
    else if (!strcmp(call, "__vswprintf_chk")) r = __vswprintf_chk(d, n, 1, dl, fmt, ap);
    va_end(ap);
    return r;
}

/* The wide formatting call named `call` (swprintf, vswprintf, __swprintf_chk, __vswprintf_chk)
 * of `fmt` and the arguments after it into `n` characters at `d` (`dl` for the fortified). */
#define WFORMAT(call, d, n, dl, fmt, ...)                                                        \
    (!strcmp(call, "swprintf")         ? swprintf(d, n, fmt, __VA_ARGS__)                       \
     : !strcmp(call, "__swprintf_chk") ? __swprintf_chk(d, n, 1, dl, fmt, __VA_ARGS__)         \
                                       : wformat_v(call, d, n, dl, fmt, __VA_ARGS__))

static const char *const WFORMAT_CALLS[] = {"swprintf", "vswprintf", "__swprintf_chk", "__vswprintf_chk"};

#define WFORMAT_ARGS L"%d|%ls|%.2f|%ld|%.1f|%.1f|%.1f|%.1f|%.1f|%.1f|%.1f|%.1f|%lc|%x|%lu"
#define WFORMAT_VALUES -7, L"abc", 3.14159, 123456789012L, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, L'Z', 0xbeef, 42UL

/* The wide time formatting as the C++ library's std::time_put<wchar_t> calls it. */
extern size_t __wcsftime_l(wchar_t *, size_t, const wchar_t *, const struct tm *, locale_t);

/* The wide-character copy named `call` of `k` characters (a string's with its NUL; 1 << 18
 * at most) into `p`, told the destination holds `dl` characters where the call is fortified:
 * 1 if it returned what it should, 0 if not, -1 for an unknown name. */
/* The size-bounded copies (glibc 2.38 and later has them; an older one none): weak, so that
 * the calls return -1 (unknown) unless the library under test defines them. */
extern size_t nm_strlcpy(char *, const char *, size_t) __asm__("strlcpy") __attribute__((weak));
extern size_t nm_strlcat(char *, const char *, size_t) __asm__("strlcat") __attribute__((weak));
extern size_t nm_strlcpy_chk(char *, const char *, size_t, size_t) __asm__("__strlcpy_chk") __attribute__((weak));
extern size_t nm_strlcat_chk(char *, const char *, size_t, size_t) __asm__("__strlcat_chk") __attribute__((weak));
extern size_t nm_wcslcpy(wchar_t *, const wchar_t *, size_t) __asm__("wcslcpy") __attribute__((weak));
extern size_t nm_wcslcat(wchar_t *, const wchar_t *, size_t) __asm__("wcslcat") __attribute__((weak));
extern size_t nm_wcslcpy_chk(wchar_t *, const wchar_t *, size_t, size_t) __asm__("__wcslcpy_chk")
    __attribute__((weak));
extern size_t nm_wcslcat_chk(wchar_t *, const wchar_t *, size_t, size_t) __asm__("__wcslcat_chk")
    __attribute__((weak));

static int wcopy_call(const char *call, char *bytes, size_t k, size_t dl) {
    static wchar_t src[1 << 18];
    if (k == 0 || k > sizeof src / sizeof *src) return -1;
    wmemset(src, L'w', k - 1);
    src[k - 1] = 0;
    wchar_t *p = (wchar_t *)bytes;
    if (!strcmp(call, "wmemcpy")) return wmemcpy(p, src, k) == p;
    if (!strcmp(call, "wmemmove")) return wmemmove(p, src, k) == p;
    if (!strcmp(call, "wmempcpy")) return wmempcpy(p, src, k) == p + k;
    if (!strcmp(call, "wmemset")) return wmemset(p, L'y', k) == p;
    if (!strcmp(call, "wcscpy")) return wcscpy(p, src) == p;
    if (!strcmp(call, "wcpcpy")) return wcpcpy(p, src) == p + k - 1;
    if (!strcmp(call, "wcscat")) return wcscat(p, src) == p;
    if (!strcmp(call, "wcsncpy")) return wcsncpy(p, src, k) == p;
    if (!strcmp(call, "wcpncpy")) return wcpncpy(p, src, k) == p + k - 1;
    if (!strcmp(call, "wcsncat")) return wcsncat(p, src, k - 1) == p;
    if (!strcmp(call, "__wmemcpy_chk")) return __wmemcpy_chk(p, src, k, dl) == p;
    if (!strcmp(call, "__wmemmove_chk")) return __wmemmove_chk(p, src, k, dl) == p;
    if (!strcmp(call, "__wmempcpy_chk")) return __wmempcpy_chk(p, src, k, dl) == p + k;
    if (!strcmp(call, "__wmemset_chk")) return __wmemset_chk(p, L'y', k, dl) == p;
    if (!strcmp(call, "__wcscpy_chk")) return __wcscpy_chk(p, src, dl) == p;
    if (!strcmp(call, "__wcpcpy_chk")) return __wcpcpy_chk(p, src, dl) == p + k - 1;
    if (!strcmp(call, "__wcscat_chk")) return __wcscat_chk(p, src, dl) == p;
    if (!strcmp(call, "__wcsncpy_chk")) return __wcsncpy_chk(p, src, k, dl) == p;
    if (!strcmp(call, "__wcpncpy_chk")) return __wcpncpy_chk(p, src, k, dl) == p + k - 1;
    if (!strcmp(call, "__wcsncat_chk")) return __wcsncat_chk(p, src, k - 1, dl) == p;
    if (!strcmp(call, "wcslcpy")) return nm_wcslcpy ? nm_wcslcpy(p, src, k) == k - 1 : -1;
    if (!strcmp(call, "wcslcat")) return nm_wcslcat ? nm_wcslcat(p, src, k) == k - 1 : -1;
    if (!strcmp(call, "__wcslcpy_chk")) return nm_wcslcpy_chk ? nm_wcslcpy_chk(p, src, k, dl) == k - 1 : -1;
    if (!strcmp(call, "__wcslcat_chk")) return nm_wcslcat_chk ? nm_wcslcat_chk(p, src, k, dl) == k - 1 : -1;
    if (!strcmp(call, "wmemcpy-out")) return wmemcpy(src, p, k) == src;
    if (strstr(call, "swprintf")) return WFORMAT(call, p, k, dl, L"%ls", src) == (int)(k - 1);
    if (strstr(call, "wcsftime")) {
        /* A format of plain characters is its own text. */
        struct tm tm = {0};
        locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        size_t r = !strcmp(call, "wcsftime")     ? wcsftime(p, k, src, &tm)
                   : !strcmp(call, "wcsftime_l") ? wcsftime_l(p, k, src, &tm, c)
                                                 : __wcsftime_l(p, k, src, &tm, c);
        freelocale(c);
        return r == k - 1;
    }
    return -1;
}

/* Whether the copy `call` of `copy_call` left in `p` what it should have written there for
 * `total` bytes: the source's string (or its bytes), or the filler. */
static int copied_right(const char *call, const char *p, size_t total) {
    if (strstr(call, "-out")) return 1;
    if (strstr(call, "wmem") || strstr(call, "wcs") || strstr(call, "wcp") || strstr(call, "swprintf")) {
        size_t k = (total + 3) / 4;
        const wchar_t *w = (const wchar_t *)p;
        for (size_t i = 0; i < k; i++)
            if (w[i] != (strstr(call, "wmemset") ? L'y' : i + 1 < k ? L'w' : 0)) return 0;
        return 1;
    }
    for (size_t i = 0; i < total; i++)
        if (p[i] != (strstr(call, "memset") ? 'y' : strstr(call, "bzero") ? 0 : i + 1 < total ? 's' : 0)) return 0;
    return 1;
}

/* qsort or qsort_r (`call`) of `total` bytes at `p`, a live object of `n` bytes whose first
 * ones (as many as it holds) are the string in `src`, as elements of one byte, largest first:
 * the string's bytes, then its NUL, as copied_right wants them. 1 if it sorted them so, 0 if
 * not, -1 for another name. */
static int descending(const void *a, const void *b) {
    return *(const unsigned char *)b - *(const unsigned char *)a;
}
static int descending_r(const void *a, const void *b, void *arg) {
    ++*(int *)arg;
    return descending(a, b);
}
static int sort_call(const char *call, char *p, const char *src, size_t n, size_t total) {
    int calls = 0;
    if (strcmp(call, "qsort") && strcmp(call, "qsort_r")) return -1;
    for (size_t i = 0; i < n && i < total; i++)
        p[i] = src[i];
    if (!strcmp(call, "qsort")) qsort(p, total, 1, descending);
    else qsort_r(p, total, 1, descending_r, &calls);
    return copied_right(call, p, total) && (!strcmp(call, "qsort") || calls > 0);
}

/* The duplicate named `call` ("strdup-out", "__strdup-out", "strndup-out" told `total`,
 * "wcsdup-out") of the string in `p`, a live object of `n` bytes: a string of `total` - 1
 * bytes (for wcsdup, (total + 3) / 4 characters with the NUL) where that fits, else the whole
 * object without a NUL. 1 if the copy is the string, 0 if not, -1 for an unknown name. */
static int dup_call(const char *call, char *p, size_t n, size_t total) {
    if (!strcmp(call, "wcsdup-out")) {
        wchar_t *w = (wchar_t *)p;
        size_t k = (total + 3) / 4, room = n / 4;
        wmemset(w, L'w', k <= room ? k - 1 : room);
        if (k <= room) w[k - 1] = 0;
        wchar_t *d = wcsdup(w);
        int ok = d && wcslen(d) == k - 1;
        free(d);
        return ok;
    }
    size_t len = total <= n ? total - 1 : n;
    memset(p, 's', len);
    if (total <= n) p[len] = 0;
    char *d;
    if (!strcmp(call, "strdup-out")) d = strdup(p);
    else if (!strcmp(call, "__strdup-out")) d = __strdup(p);
    else if (!strcmp(call, "strndup-out")) d = strndup(p, total);
    else return -1;
    int ok = d && strlen(d) == total - 1;
    free(d);
    if (ok && !strcmp(call, "strndup-out") && total <= n) {
        /* A string as long as the object, without a NUL, told that length: read within. */
        memset(p, 's', n);
        d = strndup(p, n);
        ok = d && strlen(d) == n;
        free(d);
    }
    return ok;
}

/* The copy named `call` of `total` bytes from `src` (a string of total - 1 bytes) into `p`,
 * told the destination holds `dl` where the call is fortified: 1 if it returned what it
 * should, 0 if not, -1 for an unknown name. */
extern void __bzero(void *, size_t);

static int copy_call(const char *call, char *p, const char *src, size_t total, size_t dl) {
    if (!strcmp(call, "memcpy")) return memcpy(p, src, total) == p;
    if (!strcmp(call, "memmove")) return memmove(p, src, total) == p;
    if (!strcmp(call, "mempcpy")) return mempcpy(p, src, total) == p + total;
    if (!strcmp(call, "__mempcpy")) return __mempcpy(p, src, total) == p + total;
    if (!strcmp(call, "memset")) return memset(p, 'y', total) == p;
    if (!strcmp(call, "explicit_bzero")) return explicit_bzero(p, total), 1;
    if (!strcmp(call, "bzero")) return bzero(p, total), 1;
    if (!strcmp(call, "__bzero")) return __bzero(p, total), 1;
    if (!strcmp(call, "bcopy")) return bcopy(src, p, total), 1;
    if (!strcmp(call, "memccpy")) return memccpy(p, src, 0, total) == p + total;
    if (!strcmp(call, "memccpy-none")) return memccpy(p, src, 'z', total) == NULL;
    if (!strcmp(call, "strcpy")) return strcpy(p, src) == p;
    if (!strcmp(call, "stpcpy")) return stpcpy(p, src) == p + total - 1;
    if (!strcmp(call, "strcat")) return strcat(p, src) == p;
    if (!strcmp(call, "strncpy")) return strncpy(p, src, total) == p;
    if (!strcmp(call, "strncat")) return strncat(p, src, total - 1) == p;
    if (!strcmp(call, "__memcpy_chk")) return __memcpy_chk(p, src, total, dl) == p;
    if (!strcmp(call, "__memmove_chk")) return __memmove_chk(p, src, total, dl) == p;
    if (!strcmp(call, "__mempcpy_chk")) return __mempcpy_chk(p, src, total, dl) == p + total;
    if (!strcmp(call, "__memset_chk")) return __memset_chk(p, 'y', total, dl) == p;
    if (!strcmp(call, "__explicit_bzero_chk")) return __explicit_bzero_chk(p, total, dl), 1;
    if (!strcmp(call, "__strcpy_chk")) return __strcpy_chk(p, src, dl) == p;
    if (!strcmp(call, "__stpcpy_chk")) return __stpcpy_chk(p, src, dl) == p + total - 1;
    if (!strcmp(call, "__strcat_chk")) return __strcat_chk(p, src, dl) == p;
    if (!strcmp(call, "__strncpy_chk")) return __strncpy_chk(p, src, total, dl) == p;
    if (!strcmp(call, "__strncat_chk")) return __strncat_chk(p, src, total - 1, dl) == p;
    if (!strcmp(call, "stpncpy")) return stpncpy(p, src, total) == p + total - 1;
    if (!strcmp(call, "__stpncpy")) return __stpncpy(p, src, total) == p + total - 1;
    if (!strcmp(call, "__stpncpy_chk")) return __stpncpy_chk(p, src, total, dl) == p + total - 1;
    if (!strcmp(call, "strlcpy")) return nm_strlcpy ? nm_strlcpy(p, src, total) == total - 1 : -1;
    if (!strcmp(call, "strlcat")) return nm_strlcat ? nm_strlcat(p, src, total) == total - 1 : -1;
    if (!strcmp(call, "__strlcpy_chk")) return nm_strlcpy_chk ? nm_strlcpy_chk(p, src, total, dl) == total - 1 : -1;
    if (!strcmp(call, "__strlcat_chk")) return nm_strlcat_chk ? nm_strlcat_chk(p, src, total, dl) == total - 1 : -1;
    if (!strcmp(call, "strftime") || !strcmp(call, "strftime_l")) {
        /* A format of plain characters is its own text. */
        struct tm tm = {0};
        locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        size_t r = !strcmp(call, "strftime") ? strftime(p, total, src, &tm) : strftime_l(p, total, src, &tm, c);
        freelocale(c);
        return r == total - 1;
    }
    return wcopy_call(call, p, (total + 3) / 4, dl == (size_t)-1 ? dl : dl / 4);
}

/* The plain (GNU) sscanf, which the headers rename to __isoc99_sscanf. */
extern int gnu_sscanf(const char *, const char *, ...) __asm__("sscanf");
extern int __isoc99_sscanf(const char *, const char *, ...);
extern int __isoc99_fscanf(FILE *, const char *, ...);
extern int __isoc99_scanf(const char *, ...);
extern int __isoc99_vsscanf(const char *, const char *, va_list);
extern int __isoc99_vfscanf(FILE *, const char *, va_list);
extern int __isoc99_vscanf(const char *, va_list);
extern int plain_vsscanf(const char *, const char *, va_list) __asm__("vsscanf");
extern int plain_vfscanf(FILE *, const char *, va_list) __asm__("vfscanf");
extern int plain_vscanf(const char *, va_list) __asm__("vscanf");
extern int plain_fscanf(FILE *, const char *, ...) __asm__("fscanf");
extern int plain_scanf(const char *, ...) __asm__("scanf");
/* C23's names (glibc 2.38 and later: what GCC 15 calls by default), weak: a C library older
 * than that has none, and the calls then return -2 (not run) unless the library under test
 * defines them. */
extern int c23_sscanf(const char *, const char *, ...) __asm__("__isoc23_sscanf") __attribute__((weak));
extern int c23_fscanf(FILE *, const char *, ...) __asm__("__isoc23_fscanf") __attribute__((weak));
extern int c23_scanf(const char *, ...) __asm__("__isoc23_scanf") __attribute__((weak));
extern int c23_vsscanf(const char *, const char *, va_list) __asm__("__isoc23_vsscanf") __attribute__((weak));
extern int c23_vfscanf(FILE *, const char *, va_list) __asm__("__isoc23_vfscanf") __attribute__((weak));
extern int c23_vscanf(const char *, va_list) __asm__("__isoc23_vscanf") __attribute__((weak));

/* The `v` scanning call named `call` of `fmt` from `in` (a string) or `f`. */
static int scan_v(const char *call, const char *in, FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = -2;
    if (!strcmp(call, "vsscanf")) r = plain_vsscanf(in, fmt, ap);
    else if (!strcmp(call, "__isoc99_vsscanf")) r = __isoc99_vsscanf(in, fmt, ap);
    else if (!strcmp(call, "vfscanf")) r = plain_vfscanf(f, fmt, ap);
    else if (!strcmp(call, "__isoc99_vfscanf")) r = __isoc99_vfscanf(f, fmt, ap);
    else if (!strcmp(call, "vscanf")) r = plain_vscanf(fmt, ap);
    else if (!strcmp(call, "__isoc99_vscanf")) r = __isoc99_vscanf(fmt, ap);
    else if (!strcmp(call, "__isoc23_vsscanf")) r = c23_vsscanf ? c23_vsscanf(in, fmt, ap) : -2;
    else if (!strcmp(call, "__isoc23_vfscanf")) r = c23_vfscanf ? c23_vfscanf(f, fmt, ap) : -2;
    else if (!strcmp(call, "__isoc23_vscanf")) r = c23_vscanf ? c23_vscanf(fmt, ap) : -2;
    va_end(ap);
    return r;
}

extern wchar_t *__fgetws_chk(wchar_t *, size_t, int, FILE *);

/* The wide scanning calls by every name: the plain (GNU) ones, C99's (what the headers make
 * of a program's calls) and C23's (weak, as above). */
extern int gnu_swscanf(const wchar_t *, const wchar_t *, ...) __asm__("swscanf");
extern int gnu_fwscanf(FILE *, const wchar_t *, ...) __asm__("fwscanf");
extern int gnu_wscanf(const wchar_t *, ...) __asm__("wscanf");
extern int gnu_vswscanf(const wchar_t *, const wchar_t *, va_list) __asm__("vswscanf");
extern int gnu_vfwscanf(FILE *, const wchar_t *, va_list) __asm__("vfwscanf");
extern int gnu_vwscanf(const wchar_t *, va_list) __asm__("vwscanf");
extern int c99_swscanf(const wchar_t *, const wchar_t *, ...) __asm__("__isoc99_swscanf");
extern int c99_fwscanf(FILE *, const wchar_t *, ...) __asm__("__isoc99_fwscanf");
extern int c99_wscanf(const wchar_t *, ...) __asm__("__isoc99_wscanf");
extern int c99_vswscanf(const wchar_t *, const wchar_t *, va_list) __asm__("__isoc99_vswscanf");
extern int c99_vfwscanf(FILE *, const wchar_t *, va_list) __asm__("__isoc99_vfwscanf");
extern int c99_vwscanf(const wchar_t *, va_list) __asm__("__isoc99_vwscanf");
extern int c23_swscanf(const wchar_t *, const wchar_t *, ...) __asm__("__isoc23_swscanf") __attribute__((weak));
extern int c23_fwscanf(FILE *, const wchar_t *, ...) __asm__("__isoc23_fwscanf") __attribute__((weak));
extern int c23_wscanf(const wchar_t *, ...) __asm__("__isoc23_wscanf") __attribute__((weak));
extern int c23_vswscanf(const wchar_t *, const wchar_t *, va_list) __asm__("__isoc23_vswscanf") __attribute__((weak));
extern int c23_vfwscanf(FILE *, const wchar_t *, va_list) __asm__("__isoc23_vfwscanf") __attribute__((weak));
extern int c23_vwscanf(const wchar_t *, va_list) __asm__("__isoc23_vwscanf") __attribute__((weak));

/* The wide `v` scanning call named `call` of `fmt` from `in` (a wide string) or `f`. */
static int wscan_v(const char *call, const wchar_t *in, FILE *f, const wchar_t *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = -2;
    if (!strcmp(call, "vswscanf")) r = gnu_vswscanf(in, fmt, ap);
    else if (!strcmp(call, "__isoc99_vswscanf")) r = c99_vswscanf(in, fmt, ap);
    else if (!strcmp(call, "vfwscanf")) r = gnu_vfwscanf(f, fmt, ap);
    else if (!strcmp(call, "__isoc99_vfwscanf")) r = c99_vfwscanf(f, fmt, ap);
    else if (!strcmp(call, "vwscanf")) r = gnu_vwscanf(fmt, ap);
    else if (!strcmp(call, "__isoc99_vwscanf")) r = c99_vwscanf(fmt, ap);
    else if (!strcmp(call, "__isoc23_vswscanf")) r = c23_vswscanf ? c23_vswscanf(in, fmt, ap) : -2;
    else if (!strcmp(call, "__isoc23_vfwscanf")) r = c23_vfwscanf ? c23_vfwscanf(f, fmt, ap) : -2;
    else if (!strcmp(call, "__isoc23_vwscanf")) r = c23_vwscanf ? c23_vwscanf(fmt, ap) : -2;
    va_end(ap);
    return r;
}

/* The wide scanning call named `call` of `fmt` with an int and a buffer, from `in` or `f`. */
static int wscan_call(const char *call, const wchar_t *in, FILE *f, const wchar_t *fmt, int *x, void *p) {
    if (!strcmp(call, "swscanf")) return gnu_swscanf(in, fmt, x, p);
    if (!strcmp(call, "__isoc99_swscanf")) return c99_swscanf(in, fmt, x, p);
    if (!strcmp(call, "fwscanf")) return gnu_fwscanf(f, fmt, x, p);
    if (!strcmp(call, "__isoc99_fwscanf")) return c99_fwscanf(f, fmt, x, p);
    if (!strcmp(call, "wscanf")) return gnu_wscanf(fmt, x, p);
    if (!strcmp(call, "__isoc99_wscanf")) return c99_wscanf(fmt, x, p);
    if (!strcmp(call, "__isoc23_swscanf")) return c23_swscanf ? c23_swscanf(in, fmt, x, p) : -2;
    if (!strcmp(call, "__isoc23_fwscanf")) return c23_fwscanf ? c23_fwscanf(f, fmt, x, p) : -2;
    if (!strcmp(call, "__isoc23_wscanf")) return c23_wscanf ? c23_wscanf(fmt, x, p) : -2;
    return wscan_v(call, in, f, fmt, x, p);
}

/* The scanning call named `call` (the symbol's name: the headers make a program's `sscanf`
 * `__isoc99_sscanf`) of `fmt` with an int and a buffer, from `in` or `f`. */
static int scan_call(const char *call, const char *in, FILE *f, const char *fmt, int *x, char *p) {
    if (!strcmp(call, "sscanf")) return gnu_sscanf(in, fmt, x, p);
    if (!strcmp(call, "__isoc99_sscanf")) return __isoc99_sscanf(in, fmt, x, p);
    if (!strcmp(call, "fscanf")) return plain_fscanf(f, fmt, x, p);
    if (!strcmp(call, "__isoc99_fscanf")) return __isoc99_fscanf(f, fmt, x, p);
    if (!strcmp(call, "scanf")) return plain_scanf(fmt, x, p);
    if (!strcmp(call, "__isoc99_scanf")) return __isoc99_scanf(fmt, x, p);
    if (!strcmp(call, "__isoc23_sscanf")) return c23_sscanf ? c23_sscanf(in, fmt, x, p) : -2;
    if (!strcmp(call, "__isoc23_fscanf")) return c23_fscanf ? c23_fscanf(f, fmt, x, p) : -2;
    if (!strcmp(call, "__isoc23_scanf")) return c23_scanf ? c23_scanf(fmt, x, p) : -2;
    return scan_v(call, in, f, fmt, x, p);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static long fill_in(const char *dir, const char *call, char *p, size_t total);

/* The calls that fill a buffer of `total` bytes at `p` with what the kernel holds (a link's
 * target, a directory's entries, an attribute's value or names, the working directory), made
 * to fill exactly `total` bytes of it, in a directory of their own: returns what the call
 * returns (getcwd: the path's length with its NUL), -2 for an unknown name or a set-up that
 * failed. The call is made by a child, so that the directory is removed however it ends; the
 * process ends as the child did, by its signal too. */
static long fill_call(const char *call, char *p, size_t total) {
    char dir[] = "/tmp/nevermore-fill-XXXXXX";
    if (!mkdtemp(dir) || total > 4000) return -2;
    int fds[2];
    if (pipe(fds)) return -2;
    pid_t pid = fork();
    if (pid == 0) {
        long r = fill_in(dir, call, p, total);
        _exit(write(fds[1], &r, sizeof r) == sizeof r ? 0 : 3);
    }
    close(fds[1]);
    long r = -2;
    int st = 0;
    int got = read(fds[0], &r, sizeof r) == sizeof r;
    waitpid(pid, &st, 0);
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (WIFSIGNALED(st)) {
        signal(WTERMSIG(st), SIG_DFL);
        raise(WTERMSIG(st));
    }
    return got ? r : -2;
}

/* `fill_call`'s set-up and call, in `dir`. */
static long fill_in(const char *dir, const char *call, char *p, size_t total) {
    size_t base = strlen(dir);
    char name[4096];
    long r = -2;
    if (!strcmp(call, "readlink") || !strcmp(call, "readlinkat")) {
        /* A link whose target is `total` bytes long (readlink writes no NUL). */
        char target[4096], link[64];
        memset(target, 't', total);
        target[total] = 0;
        snprintf(link, sizeof link, "%s/l", dir);
        if (symlink(target, link)) return -2;
        r = !strcmp(call, "readlink") ? readlink(link, p, total) : readlinkat(AT_FDCWD, link, p, total);
        unlink(link);
    } else if (!strcmp(call, "getxattr") || !strcmp(call, "listxattr")) {
        /* A value of `total` bytes, or one name of `total` bytes with its NUL. */
        snprintf(name, sizeof name, "%s/f", dir);
        int fd = open(name, O_CREAT | O_WRONLY, 0600);
        if (fd < 0) return -2;
        close(fd);
        char key[512] = "user.", value[4096];
        memset(value, 'v', total);
        if (!strcmp(call, "getxattr")) {
            if (setxattr(name, "user.k", value, total, 0)) return -2;
            r = getxattr(name, "user.k", p, total);
        } else {
            if (total > 255 || total < 7) return -2;
            memset(key + 5, 'k', total - 6);
            key[total - 1] = 0;
            if (setxattr(name, key, "v", 1, 0)) return -2;
            r = listxattr(name, p, total);
        }
        unlink(name);
    } else if (!strcmp(call, "getdents64")) {
        /* Entries of 32 bytes ("entry0000") and "." and ".." (24 each), more than fit: the
         * call returns within 32 bytes of `total`. */
        for (size_t k = 0; k < (total - 48) / 32 + 4; k++) {
            snprintf(name, sizeof name, "%s/entry%04zu", dir, k);
            int fd = open(name, O_CREAT | O_WRONLY, 0600);
            if (fd < 0) return -2;
            close(fd);
        }
        int fd = open(dir, O_RDONLY | O_DIRECTORY);
        r = getdents64(fd, p, total);
        close(fd);
        for (size_t k = 0; k < (total - 48) / 32 + 4; k++) {
            snprintf(name, sizeof name, "%s/entry%04zu", dir, k);
            unlink(name);
        }
    } else if (!strcmp(call, "getcwd") || !strcmp(call, "realpath") || !strcmp(call, "__realpath_chk")) {
        /* A working directory whose path and NUL take `total` bytes. */
        if (total < base + 3) return -2;
        if (chdir(dir)) return -2;
        size_t left = total - 1 - base;
        while (left > 0) {
            size_t c = left - 1 > 200 ? 200 : left - 1;
            if (left - (c + 1) == 1) c--;
            memset(name, 'd', c);
            name[c] = 0;
            if (mkdir(name, 0700) || chdir(name)) return -2;
            left -= c + 1;
        }
        if (!strcmp(call, "realpath")) r = realpath(".", p) ? (long)strlen(p) + 1 : -1;
        /* A buffer the compiler took for `PATH_MAX` bytes (a field of a structure). */
        else if (!strcmp(call, "__realpath_chk")) r = __realpath_chk(".", p, PATH_MAX) ? (long)strlen(p) + 1 : -1;
        else r = getcwd(p, total) ? (long)strlen(p) + 1 : -1;
    }
    return r;
}

static volatile char sink;

static void churn_and_check(size_t size, char *dangling, int write) {
    enum { N = 2000 };
    static char *newer[N];
    for (int i = 0; i < N; i++) {
        newer[i] = malloc(size);
        memset(newer[i], 0x5A, size);
    }
    if (write)
        memset(dangling, 0xEE, size);
    else
        for (size_t i = 0; i < size; i += 64) sink = dangling[i];
    for (int i = 0; i < N; i++)
        for (size_t j = 0; j < size; j++)
            if (newer[i][j] != 0x5A) {
                printf("CORRUPTED: newer object %d byte %zu\n", i, j);
                return;
            }
    printf("INTACT\n");
}

static sigjmp_buf jb;
static void on_segv(int sig) {
    (void)sig;
    siglongjmp(jb, 1);
}
static void on_segv_info(int sig, siginfo_t *si, void *ctx) {
    (void)si;
    (void)ctx;
    printf("PROGRAM HANDLER %d\n", sig);
    fflush(stdout);
    _exit(3);
}

static char *freed_for_thread;
/* Blocks every signal with the system call itself (8-byte kernel set), as some programs do. */
static void block_all_raw(void) {
    unsigned long all = ~0UL;
    if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, 8) != 0) {
        perror("rt_sigprocmask");
        exit(2);
    }
}
static void *blocked_reader(void *arg) {
    sigset_t all;
    sigfillset(&all);
    if (arg)
        block_all_raw();
    else
        pthread_sigmask(SIG_BLOCK, &all, NULL);
    sink = freed_for_thread[8];
    printf("no trap\n");
    return NULL;
}

/* The VmFlags of the mapping containing `addr` (or, with addr 0, of the biggest mapping of the
 * memfd named nevermore-pool) contain "dd"? -1 when there is no such mapping. */
static int dont_dump(uintptr_t addr) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0, found = -1;
    unsigned long best = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = addr ? (addr >= lo && addr < hi) : (strstr(line, "nevermore-pool") && hi - lo > best);
            if (in && !addr) best = hi - lo;
        } else if (in && !strncmp(line, "VmFlags:", 8)) {
            found = strstr(line, " dd") != NULL;
        }
    }
    if (f) fclose(f);
    return found;
}

/* A light allocation load of small objects (32..231 bytes, a ring of 256) for `ms` ms. */
static void light_load(long ms) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *ring[256] = {0};
    unsigned k = 0;
    do {
        for (int i = 0; i < 1000; i++, k++) {
            free(ring[k % 256]);
            ring[k % 256] = malloc(32 + k % 200);
        }
        usleep(1000);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/* Slot k of a ring of objects: checks the object there (filled with k + its length), frees
 * it, and puts a new one of n bytes in its place, filled the same way. Prints "<what>
 * CORRUPTED" or "<what> NULL" and returns 1 when something is wrong. */
static int ring_replace(const char *what, unsigned char **ring, size_t *len, int k, size_t n) {
    if (ring[k]) {
        for (size_t j = 0; j < len[k]; j++)
            if (ring[k][j] != (unsigned char)(k + len[k])) {
                printf("%s CORRUPTED\n", what);
                return 1;
            }
        free(ring[k]);
    }
    len[k] = n;
    ring[k] = malloc(n);
    if (!ring[k]) {
        printf("%s NULL\n", what);
        return 1;
    }
    memset(ring[k], (int)(k + n), n);
    return 0;
}

static void *free_in_thread(void *p) {
    free(p);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *c = argv[1];
    size_t size = argc > 2 ? strtoul(argv[2], NULL, 0) : 24;
    if (!strcmp(c, "dump-flags")) {
        static const size_t sizes[] = {24, 5000, 300000};
        for (int i = 0; i < 3; i++) {
            char *p = malloc(sizes[i]);
            memset(p, 1, sizes[i]);
            int dd = dont_dump((uintptr_t)p);
            printf("DUMP object-%zu %s\n", sizes[i], dd < 0 ? "unknown" : dd ? "no" : "yes");
        }
        int dd = dont_dump(0);
        printf("DUMP canonical %s\n", dd < 0 ? "unknown" : dd ? "no" : "yes");
        return 0;
    }
    if (!strcmp(c, "copy-freed")) {
        /* A copy past the end of an object of SIZE bytes that another thread freed, the
         * object's bounds looked up by this one (its memset) before: prints "copied" if it
         * does not trap. */
        static char src[1 << 20];
        char *p = malloc(size);
        memset(p, 0x11, size);
        pthread_t t;
        if (pthread_create(&t, NULL, free_in_thread, p) || pthread_join(t, NULL)) return 2;
        memcpy(p, src, size + 1000);
        printf("copied\n");
        return 0;
    }
    if (!strcmp(c, "read") || !strcmp(c, "write")) {
        char *p = malloc(size);
        memset(p, 0x11, size);
        free(p);
        churn_and_check(size, p, c[0] == 'w');
        return 0;
    }
    if (!strcmp(c, "locked")) {
        /* Objects whose pages the program locked (mlock, as for a key's buffer) and freed
         * without munlock, which is allowed. */
        enum { K = 32 };
        char *p[K];
        for (int i = 0; i < K; i++) {
            p[i] = malloc(size);
            memset(p[i], 0x11, size);
            if (mlock(p[i], size)) {
                printf("mlock failed (%d)\n", errno);
                return 2;
            }
        }
        for (int i = 0; i < K; i++) free(p[i]);
        for (int i = 0; i < 600; i++) free(malloc(6000)); /* fills and flushes a revocation batch */
        churn_and_check(size, p[K / 2], 1);
        return 0;
    }
    if (!strcmp(c, "kernel-read") || !strcmp(c, "kernel-read-raw") || !strcmp(c, "kernel-read-now") ||
        !strcmp(c, "kernel-read-raw-now") || !strcmp(c, "kernel-write-now")) {
        char *p = malloc(size);
        memset(p, 0x11, size);
        free(p);
        /* Fills and flushes a revocation batch (not for the -now cases). */
        for (int i = 0; !strstr(c, "-now") && i < 600; i++) free(malloc(6000));
        int fd[2];
        if (pipe(fd)) return 2;
        if (!strcmp(c, "kernel-write-now")) {
            printf("sent=%ld\n", (long)write(fd[1], p, 8));
            return 0;
        }
        if (write(fd[1], "abcdefgh", 8) != 8) return 2;
        errno = 0;
        long r = strstr(c, "-raw") ? syscall(SYS_read, fd[0], p, 8) : read(fd[0], p, 8);
        printf("read=%ld errno=%d\n", r, r < 0 ? errno : 0);
        return 0;
    }
    if (!strcmp(c, "moved") && argc > 4) {
        const char *call = argv[2];
        size_t n = (size_t)atol(argv[3]), total = n + (size_t)atol(argv[4]);
        char *p = malloc(n);
        memset(p, 0x22, n);
        static char data[1 << 20];
        if (total > sizeof data) return 2;
        memset(data, 'x', total);
        /* gets writes its line and a NUL: a line of total - 1 characters moves total bytes. */
        if (!strcmp(call, "gets") && total > 0) data[total - 1] = '\n';
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 2;
        FILE *f = tmpfile();
        if (!f || pwrite(fileno(f), data, total, 0) != (long)total) return 2;
        int reading = !strcmp(call, "read") || !strcmp(call, "readv") || !strncmp(call, "recv", 4);
        if (reading) {
            /* A writer that may block until the reader takes it all (or is gone). */
            if (fork() == 0) {
                close(sv[1]);
                _exit(write(sv[0], data, total) == (long)total ? 0 : 2);
            }
            close(sv[0]);
        }
        struct iovec iov = {p, total};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        long r = -2;
        if (!strcmp(call, "read")) r = read(sv[1], p, total);
        else if (!strcmp(call, "recv")) r = recv(sv[1], p, total, MSG_WAITALL);
        else if (!strcmp(call, "recvfrom")) r = recvfrom(sv[1], p, total, MSG_WAITALL, 0, 0);
        else if (!strcmp(call, "readv")) r = readv(sv[1], &iov, 1);
        else if (!strcmp(call, "recvmsg")) r = recvmsg(sv[1], &m, MSG_WAITALL);
        else if (!strcmp(call, "recvmmsg")) {
            struct mmsghdr mm = {.msg_hdr = m};
            r = recvmmsg(sv[1], &mm, 1, MSG_WAITALL, 0) == 1 ? (long)mm.msg_len : -1;
        }
        else if (!strcmp(call, "pread")) r = pread(fileno(f), p, total, 0);
        else if (!strcmp(call, "write")) r = write(fileno(f), p, total);
        else if (!strcmp(call, "send")) r = send(sv[0], p, total < 65536 ? total : 65536, 0);
        else if (!strcmp(call, "sendto")) r = sendto(sv[0], p, total < 65536 ? total : 65536, 0, 0, 0);
        else if (!strcmp(call, "writev")) r = writev(fileno(f), &iov, 1);
        else if (!strcmp(call, "sendmsg") || !strcmp(call, "sendmmsg")) {
            iov.iov_len = total < 65536 ? total : 65536;
            struct mmsghdr mm = {.msg_hdr = m};
            r = !strcmp(call, "sendmsg") ? sendmsg(sv[0], &m, 0)
                : sendmmsg(sv[0], &mm, 1, 0) == 1 ? (long)mm.msg_len : -1;
        }
        else if (!strcmp(call, "pwrite")) r = pwrite(fileno(f), p, total, 0);
        else if (!strcmp(call, "fread")) r = (long)fread(p, 1, total, f);
        else if (!strcmp(call, "fgets")) r = fgets(p, (int)total, f) ? (long)strlen(p) + 1 : -1;
        else if (!strncmp(call, "fgetws", 6) || !strcmp(call, "__fgetws_chk")) {
            /* Told the buffer holds (SIZE + EXTRA + 3) / 4 wide characters (no size known to the
             * fortified call): moves the bytes of that many, the last a NUL. */
            wchar_t *w = (wchar_t *)p;
            int wn = (int)((total + 3) / 4);
            wchar_t *got = !strcmp(call, "fgetws") ? fgetws(w, wn, f)
                           : !strcmp(call, "fgetws_unlocked") ? fgetws_unlocked(w, wn, f)
                                                              : __fgetws_chk(w, (size_t)-1, wn, f);
            r = got ? (long)(wcslen(w) + 1) * 4 : -1;
        }
        else if (!strcmp(call, "fwrite")) r = (long)fwrite(p, 1, total, f);
        else if (!strcmp(call, "gets")) {
            if (dup2(fileno(f), 0) != 0) return 2;
            r = gets(p) ? (long)strlen(p) + 1 : -1;
        }
        else if (!strcmp(call, "getrandom")) r = getrandom(p, total, 0);
        else r = fill_call(call, p, total);
        if (r == -2) return 2;
        printf("moved=%ld\n", r);
        return 0;
    }
    if (!strcmp(c, "copy") && argc > 4) {
        const char *call = argv[2];
        size_t n = (size_t)atol(argv[3]), total = n + (size_t)atol(argv[4]);
        static char src[1 << 20], out[1 << 20];
        if (total >= sizeof src) return 2;
        memset(src, 's', total - 1);
        src[total - 1] = 0;
        char *p = malloc(n);
        char *next[8];
        for (int i = 0; i < 8; i++) {
            next[i] = malloc(n);
            memset(next[i], 0x44, n);
        }
        memset(p, 0, n < 8 ? n : 8);
        if (strstr(call, "bzero")) memset(p, 'q', n);
        int ok = sort_call(call, p, src, n, total);
        if (ok < 0) ok = copy_call(call, p, src, total, (size_t)-1);
        if (ok == 1 && !copied_right(call, p, total)) ok = 0;
        if (ok < 0 && !strcmp(call, "memcpy-out")) ok = memcpy(out, p, total) == out;
        if (ok < 0) ok = dup_call(call, p, n, total);
        if (ok < 0) ok = format_string(call, p, total, src) == -2 ? -1 : 1;
        if (ok < 0) return 2;
        printf(ok ? "copied\n" : "BAD RETURN\n");
        fflush(stdout);
        for (int i = 0; i < 8; i++)
            free(next[i]);
        free(p);
        return 0;
    }
    if (!strcmp(c, "scan") && argc > 5) {
        const char *call = argv[2], *conv = argv[3];
        size_t n = (size_t)atol(argv[4]), total = n + (size_t)atol(argv[5]);
        static char in[1 << 20];
        if (total + 8 >= sizeof in) return 2;
        memcpy(in, "7 ", 2);
        memset(in + 2, 's', total - 1);
        in[total + 1] = 0;
        char fmt[32];
        if (!strcmp(conv, "s")) strcpy(fmt, "%d %s");
        else if (!strcmp(conv, "set")) strcpy(fmt, "%d %[a-z]");
        else if (!strcmp(conv, "c")) {
            snprintf(fmt, sizeof fmt, "%%d %%%zuc", total);
            in[total + 1] = 's'; /* %c takes `total` characters: the word and one more */
            in[total + 2] = 0;
        } else return 2;
        char path[] = "/tmp/nevermore-scan-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0 || write(fd, in, strlen(in)) != (long)strlen(in)) return 2;
        unlink(path);
        lseek(fd, 0, SEEK_SET);
        FILE *f = fdopen(dup(fd), "r");
        if (!f || dup2(fd, 0) != 0) return 2;
        char *p = malloc(n);
        char *next[8];
        for (int i = 0; i < 8; i++) {
            next[i] = malloc(n);
            memset(next[i], 0x44, n);
        }
        int x = 0;
        int r = scan_call(call, in, f, fmt, &x, p);
        if (r == -2) return 2;
        printf("scanned %d x=%d\n", r, x);
        fflush(stdout);
        for (int i = 0; i < 8; i++)
            free(next[i]);
        free(p);
        return 0;
    }
    if (!strcmp(c, "wscan") && argc > 5) {
        /* As "scan", with the wide calls: the format and a string source are wide; CONV "ls"
         * ("%d %ls") writes wide characters, a word of (SIZE + EXTRA) / 4 - 1 of them. */
        const char *call = argv[2], *conv = argv[3];
        size_t n = (size_t)atol(argv[4]), total = n + (size_t)atol(argv[5]);
        int wide = !strcmp(conv, "ls");
        size_t word = wide ? total / 4 - 1 : total - 1;
        static char in[1 << 20];
        static wchar_t win[1 << 20];
        if (word + 8 >= sizeof win / sizeof *win) return 2;
        memcpy(in, "7 ", 2);
        memset(in + 2, 's', word);
        in[word + 2] = 0;
        wchar_t fmt[32];
        if (!strcmp(conv, "s")) wcscpy(fmt, L"%d %s");
        else if (wide) wcscpy(fmt, L"%d %ls");
        else if (!strcmp(conv, "set")) wcscpy(fmt, L"%d %[a-z]");
        else if (!strcmp(conv, "c")) {
            swprintf(fmt, sizeof fmt / sizeof *fmt, L"%%d %%%zuc", total);
            in[word + 2] = 's'; /* %c takes `total` characters: the word and one more */
            in[word + 3] = 0;
        } else return 2;
        for (size_t i = 0; i <= strlen(in); i++)
            win[i] = (unsigned char)in[i];
        char path[] = "/tmp/nevermore-wscan-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0 || write(fd, in, strlen(in)) != (long)strlen(in)) return 2;
        unlink(path);
        lseek(fd, 0, SEEK_SET);
        FILE *f = fdopen(dup(fd), "r");
        if (!f || dup2(fd, 0) != 0) return 2;
        char *p = malloc(n);
        char *next[8];
        for (int i = 0; i < 8; i++) {
            next[i] = malloc(n);
            memset(next[i], 0x44, n);
        }
        int x = 0;
        if (argc > 6 && !strcmp(argv[6], "offbyone"))
            p[n] = 0; /* the program's own write past the end, before the call */
        int r = wscan_call(call, win, f, fmt, &x, p);
        if (r == -2) return 2;
        printf("scanned %d x=%d\n", r, x);
        fflush(stdout);
        for (int i = 0; i < 8; i++)
            free(next[i]);
        free(p);
        return 0;
    }
    if (!strcmp(c, "wscan-formats")) {
        /* The wide calls' formats, with characters past ASCII in them, into objects that fit. */
        char *a = malloc(16), *b = malloc(16), *m = 0;
        wchar_t *w = malloc(8 * sizeof *w), *lw = malloc(4 * sizeof *lw);
        int i = 0, j = 0, n = 0;
        double d = 0;
        long l = 0;
        int r = c99_swscanf(L"\u00e912 skip 2.5 abc def 34 XYZ w 99 \u00e9xy", L"\u00e9%d %*s %lf %n%15s %ms %ld %3c %lc %d \u00e9%3ls", &i,
                            &d, &n, a, &m, &l, b, w, &j, lw);
        b[3] = 0;
        printf("numbers %d %d %g %d %ld %s %s %s %s %d %s\n", r, i, d, n, l, a, m, b, (int)w[0] == 'w' ? "w" : "?", j,
               !wcscmp(lw, L"xy") ? "xy" : "?");
        char *s[6];
        for (int q = 0; q < 6; q++)
            s[q] = malloc(4);
        r = c99_swscanf(L"a b c d e f", L"%3s %3s %3s %3s %3s %3s", s[0], s[1], s[2], s[3], s[4], s[5]);
        printf("many %d %s%s%s%s%s%s\n", r, s[0], s[1], s[2], s[3], s[4], s[5]);
        char *g = 0;
        r = gnu_swscanf(L"allocated", L"%as", &g);
        printf("gnu %d %s\n", r, g ? g : "(null)");
        free(g);
        free(m);
        return 0;
    }
    if (!strcmp(c, "scan-formats")) {
        char *a = malloc(16), *b = malloc(16), *m = 0;
        wchar_t *w = malloc(8 * sizeof *w);
        int i = 0, j = 0, k = 0, n = 0;
        double d = 0;
        long l = 0;
        int r = __isoc99_sscanf("12 skip 2.5 abc def 34 XYZ w 99", "%d %*s %lf %n%15s %ms %ld %3c %lc %d", &i,
                                &d, &n, a, &m, &l, b, w, &j);
        b[3] = 0;
        printf("numbers %d %d %g %d %ld %s %s %s %s %d\n", r, i, d, n, l, a, m, b, (int)w[0] == 'w' ? "w" : "?", j);
        /* Arguments past the registers. */
        char *s[6];
        for (int q = 0; q < 6; q++)
            s[q] = malloc(4);
        r = __isoc99_sscanf("a b c d e f", "%3s %3s %3s %3s %3s %3s", s[0], s[1], s[2], s[3], s[4], s[5]);
        printf("many %d %s%s%s%s%s%s\n", r, s[0], s[1], s[2], s[3], s[4], s[5]);
        /* By position: not followed, still scanned. */
        r = __isoc99_sscanf("5 xyz", "%2$d %1$s", a, &k);
        printf("positional %d %d %s\n", r, k, a);
        /* The GNU %as allocates. */
        char *g = 0;
        r = gnu_sscanf("allocated", "%as", &g);
        printf("gnu %d %s\n", r, g ? g : "(null)");
        free(g);
        free(m);
        return 0;
    }
    if (!strcmp(c, "fortified") && argc > 2) {
        static char src[64];
        memset(src, 's', 49);
        char *p = malloc(100);
        memset(p, 0, 100);
        if (!strcmp(argv[2], "__realpath_chk")) {
            /* A buffer the compiler knows to be smaller than PATH_MAX. */
            if (!__realpath_chk(".", p, 100)) return 2;
        } else if (copy_call(argv[2], p, src, 50, 40) < 0) return 2;
        printf("copied\n");
        fflush(stdout);
        free(p);
        return 0;
    }
    if (!strcmp(c, "copy-shrunk")) {
        static char src[256];
        memset(src, 's', sizeof src);
        char *p = malloc(200);
        memcpy(p, src, 200);
        memcpy(p, src, 200);
        p = realloc(p, 100);
        memcpy(p, src, 150);
        printf("copied\n");
        fflush(stdout);
        free(p);
        return 0;
    }
    if (!strcmp(c, "conv") && argc > 5) {
        /* CALL (mbstowcs, wcstombs) of a string of LEN characters ('a', or with "utf8" 'é', two
         * bytes in UTF-8) into a live object of SIZE bytes with live neighbours, told it holds N
         * (characters for mbstowcs, bytes for wcstombs). */
        const char *call = argv[2];
        size_t size = (size_t)atol(argv[3]), n = (size_t)atol(argv[4]), len = (size_t)atol(argv[5]);
        int utf8 = argc > 6;
        if (utf8 && !setlocale(LC_ALL, "C.UTF-8")) return 2;
        char *p = malloc(size), *next[8];
        for (int i = 0; i < 8; i++)
            next[i] = malloc(size);
        size_t r;
        if (!strcmp(call, "mbstowcs") || !strcmp(call, "mbsrtowcs") || !strcmp(call, "mbsnrtowcs")) {
            char *s = malloc(len + 1);
            const char *from = s;
            mbstate_t st;
            memset(&st, 0, sizeof st);
            memset(s, 'a', len);
            s[len] = 0;
            if (!strcmp(call, "mbsrtowcs")) r = mbsrtowcs((wchar_t *)p, &from, n, &st);
            else if (!strcmp(call, "mbsnrtowcs")) r = mbsnrtowcs((wchar_t *)p, &from, len + 1, n, NULL);
            else r = mbstowcs((wchar_t *)p, s, n);
            free(s);
        } else if (!strcmp(call, "iconv")) {
            /* LEN Latin-1 'é' (one byte each) to UTF-8 (two each), told the output holds N:
             * prints what it returned (or the error), how many bytes it wrote, and "BAD" when
             * its pointers, lengths or bytes are not what they should be. */
            iconv_t cd = iconv_open("UTF-8", "LATIN1");
            if (cd == (iconv_t)-1) return 2;
            char *s = malloc(len + 1), *in = s, *out = p;
            memset(s, '\xe9', len);
            size_t inleft = len, outleft = n;
            r = iconv(cd, &in, &inleft, &out, &outleft);
            int e = errno;
            size_t wrote = (size_t)(out - p);
            int right = wrote == n - outleft && wrote % 2 == 0 && (size_t)(in - s) == wrote / 2 &&
                        inleft == len - wrote / 2;
            for (size_t i = 0; right && i < wrote; i += 2)
                right = (unsigned char)p[i] == 0xc3 && (unsigned char)p[i + 1] == 0xa9;
            printf("conv %zd %s wrote=%zu%s\n", (ssize_t)r, r == (size_t)-1 ? strerrorname_np(e) : "ok", wrote,
                   right ? "" : " BAD");
            iconv_close(cd);
            free(s);
            for (int i = 0; i < 8; i++)
                free(next[i]);
            free(p);
            return 0;
        } else {
            wchar_t *w = malloc((len + 1) * sizeof *w);
            const wchar_t *from = w;
            mbstate_t st;
            memset(&st, 0, sizeof st);
            wmemset(w, utf8 ? L'\u00e9' : L'a', len);
            w[len] = 0;
            if (!strcmp(call, "wcsrtombs")) r = wcsrtombs(p, &from, n, &st);
            else if (!strcmp(call, "wcsnrtombs")) r = wcsnrtombs(p, &from, len + 1, n, NULL);
            else r = wcstombs(p, w, n);
            free(w);
        }
        printf("conv %zu\n", r);
        for (int i = 0; i < 8; i++)
            free(next[i]);
        free(p);
        return 0;
    }
    if (!strcmp(c, "conv1") && argc > 4) {
        /* CALL (wcrtomb or wctomb: 'é', two bytes in UTF-8; mbrtowc or mbtowc: "a", or with
         * "part" the first of the two bytes of 'é') converted to or from one character at offset OFF of a live
         * object of SIZE bytes with live neighbours, in the C.UTF-8 locale. Prints "conv R". */
        const char *call = argv[2];
        size_t size = (size_t)atol(argv[3]), off = (size_t)atol(argv[4]);
        int part = argc > 5;
        if (!setlocale(LC_ALL, "C.UTF-8") || off >= size) return 2;
        char *p = malloc(size), *next[8];
        for (int i = 0; i < 8; i++)
            next[i] = malloc(size);
        mbstate_t st;
        memset(&st, 0, sizeof st);
        size_t r;
        if (!strcmp(call, "wcrtomb")) r = wcrtomb(p + off, L'\u00e9', &st);
        else if (!strcmp(call, "mbrtowc")) r = mbrtowc((wchar_t *)(p + off), part ? "\xc3" : "a", part ? 1 : 2, &st);
        else if (!strcmp(call, "wctomb")) r = (size_t)wctomb(p + off, L'\u00e9');
        else if (!strcmp(call, "mbtowc")) r = (size_t)mbtowc((wchar_t *)(p + off), part ? "\xc3" : "a", part ? 1 : 2);
        else return 2;
        printf("conv %zd\n", (ssize_t)r);
        for (int i = 0; i < 8; i++)
            free(next[i]);
        free(p);
        return 0;
    }
    if (!strcmp(c, "strread") && argc > 4) {
        /* CALL (a string or memory read: strlen, memcmp, ...) of a live object of SIZE bytes
         * full of 'a' (the other string 'A' for the caseless comparisons) whose last byte is a
         * NUL, or with EXTRA > 0 none, its neighbours zeroed; the memory functions are given
         * SIZE + EXTRA as their length. Prints "read R" (R: what the call returned, a pointer
         * as its offset from the object, -1 for null). */
        const char *call = argv[2];
        size_t n = (size_t)atol(argv[3]), extra = (size_t)atol(argv[4]), len = n + extra;
        char *p = malloc(n), *q = malloc(n), *next[8];
        for (int i = 0; i < 8; i++)
            next[i] = calloc(1, n);
        int caseless = strstr(call, "case") != NULL;
        memset(p, 'a', n);
        memset(q, caseless ? 'A' : 'a', n);
        if (!extra) p[n - 1] = q[n - 1] = 0;
        wchar_t *w = (wchar_t *)p, *v = (wchar_t *)q;
        size_t wn = n / sizeof(wchar_t);
        if (!strncmp(call, "wcs", 3) || !strncmp(call, "wmem", 4)) {
            wmemset(w, L'a', wn);
            wmemset(v, L'a', wn);
            if (!extra) w[wn - 1] = v[wn - 1] = 0;
        }
        const char *at = NULL;
        long r = -2;
        if (!strcmp(call, "strlen")) r = (long)strlen(p);
        else if (!strcmp(call, "strnlen")) r = (long)strnlen(p, len);
        else if (!strcmp(call, "strchr")) at = strchr(p, 'z'), r = -1;
        else if (!strcmp(call, "strchrnul")) at = strchrnul(p, 'z');
        else if (!strcmp(call, "strrchr")) at = strrchr(p, 'a');
        else if (!strcmp(call, "strcmp")) r = strcmp(p, q);
        else if (!strcmp(call, "strncmp")) r = strncmp(p, q, len);
        else if (!strcmp(call, "strcasecmp")) r = strcasecmp(p, q);
        else if (!strcmp(call, "strncasecmp")) r = strncasecmp(p, q, len);
        else if (!strcmp(call, "strstr")) at = strstr(p, "zz"), r = -1;
        else if (!strcmp(call, "strspn")) r = (long)strspn(p, "a");
        else if (!strcmp(call, "strcspn")) r = (long)strcspn(p, "z");
        else if (!strcmp(call, "strpbrk")) at = strpbrk(p, "z"), r = -1;
        else if (!strcmp(call, "memchr")) at = memchr(p, 'z', len), r = -1;
        else if (!strcmp(call, "memrchr")) at = memrchr(p, 'z', len), r = -1;
        else if (!strcmp(call, "memcmp")) r = memcmp(p, q, len) != 0;
        else if (!strcmp(call, "bcmp")) r = bcmp(p, q, len) != 0;
        else if (!strcmp(call, "memmem")) at = memmem(p, len, "zz", 2), r = -1;
        else if (!strcmp(call, "strcasestr")) at = strcasestr(p, "zz"), r = -1;
        else if (!strcmp(call, "rawmemchr")) at = rawmemchr(p, 0);
        else if (!strcmp(call, "wcsnlen")) r = (long)wcsnlen(w, wn + extra);
        else if (!strcmp(call, "wcschr")) at = (const char *)wcschr(w, L'z'), r = -1;
        else if (!strcmp(call, "wcsrchr")) at = (const char *)wcsrchr(w, L'a');
        else if (!strcmp(call, "wmemchr")) at = (const char *)wmemchr(w, L'z', wn + extra), r = -1;
        else if (!strcmp(call, "wcsncmp")) r = wcsncmp(w, v, wn + extra);
        else if (!strcmp(call, "wcslen")) r = (long)wcslen(w);
        else if (!strcmp(call, "wcscmp")) r = wcscmp(w, v);
        else if (!strcmp(call, "wmemcmp")) r = wmemcmp(w, v, wn + extra) != 0;
        else return 2;
        if (at) r = at - p;
        printf("read %ld\n", r);
        for (int i = 0; i < 8; i++)
            free(next[i]);
        free(p);
        free(q);
        return 0;
    }
    if (!strcmp(c, "lookup") && argc > 4) {
        /* CALL (getpwnam_r, getpwuid_r: root's entry; getgrnam_r, getgrgid_r: the root group's)
         * into a buffer that is a live object of SIZE bytes with live neighbours, told it holds
         * LEN: prints "lookup R NAME" (R the call's result, NAME the entry's name) or "lookup
         * R" for none. */
        const char *call = argv[2];
        size_t n = (size_t)atol(argv[3]), len = (size_t)atol(argv[4]);
        char *buf = malloc(n), *next[8];
        for (int i = 0; i < 8; i++)
            next[i] = malloc(n);
        struct passwd pw, *pr = NULL;
        struct group gr, *gres = NULL;
        const char *name = NULL;
        int r;
        struct hostent he, *hr = NULL;
        struct servent se, *sr = NULL;
        struct protoent pe, *per = NULL;
        struct spwd sp, *spr = NULL;
        struct in_addr lo = {htonl(0x7f000001)};
        int herr = 0;
        if (!strcmp(call, "getpwnam_r")) r = getpwnam_r("root", &pw, buf, len, &pr);
        else if (!strcmp(call, "getpwuid_r")) r = getpwuid_r(0, &pw, buf, len, &pr);
        else if (!strcmp(call, "getgrnam_r")) r = getgrnam_r("root", &gr, buf, len, &gres);
        else if (!strcmp(call, "getgrgid_r")) r = getgrgid_r(0, &gr, buf, len, &gres);
        else if (!strcmp(call, "gethostbyname_r")) r = gethostbyname_r("localhost", &he, buf, len, &hr, &herr);
        else if (!strcmp(call, "gethostbyname2_r"))
            r = gethostbyname2_r("localhost", AF_INET, &he, buf, len, &hr, &herr);
        else if (!strcmp(call, "gethostbyaddr_r"))
            r = gethostbyaddr_r(&lo, sizeof lo, AF_INET, &he, buf, len, &hr, &herr);
        else if (!strcmp(call, "getservbyname_r")) r = getservbyname_r("http", "tcp", &se, buf, len, &sr);
        else if (!strcmp(call, "getservbyport_r")) r = getservbyport_r(htons(80), "tcp", &se, buf, len, &sr);
        else if (!strcmp(call, "getprotobyname_r")) r = getprotobyname_r("tcp", &pe, buf, len, &per);
        else if (!strcmp(call, "getprotobynumber_r")) r = getprotobynumber_r(6, &pe, buf, len, &per);
        else if (!strcmp(call, "getspnam_r")) r = getspnam_r("root", &sp, buf, len, &spr);
        else if (enumerate_call(call, buf, len, &r, &name)) {
        } else return 2;
        if (pr) name = pr->pw_name;
        if (gres) name = gres->gr_name;
        if (hr) name = hr->h_name;
        if (sr) name = sr->s_name;
        if (per) name = per->p_name;
        if (spr) name = spr->sp_namp;
        printf(name ? "lookup %d %s\n" : "lookup %d\n", r, name);
        for (int i = 0; i < 8; i++)
            free(next[i]);
        free(buf);
        return 0;
    }
    if (!strcmp(c, "enumerate") && argc > 2) {
        /* CALL (an enumeration of `enumerate_call`) of its first entry into a live object of
         * 8 bytes told 8 (ERANGE), then of the first two into one of 100 bytes told 1024 (the
         * library tells the C library 100):
         * prints "enumerate R0 R1 R2 same" (the results) when the two entries are the first two
         * the non-reentrant call of the C library gives (the ERANGE skipped none), else "DIFF". */
        const char *call = argv[2], *want[2] = {NULL, NULL}, *name;
        char first[2][64] = {"", ""};
        FILE *f = !strncmp(call, "fget", 4) ? entries(call) : NULL;
        for (int i = 0; i < 2; i++) {
            if (!strcmp(call, "getpwent_r")) { struct passwd *p = getpwent(); want[i] = p ? p->pw_name : NULL; }
            else if (!strcmp(call, "getgrent_r")) { struct group *g = getgrent(); want[i] = g ? g->gr_name : NULL; }
            else if (!strcmp(call, "getspent_r")) { struct spwd *p = getspent(); want[i] = p ? p->sp_namp : NULL; }
            else if (!strcmp(call, "fgetpwent_r")) { struct passwd *p = fgetpwent(f); want[i] = p ? p->pw_name : NULL; }
            else if (!strcmp(call, "fgetgrent_r")) { struct group *g = fgetgrent(f); want[i] = g ? g->gr_name : NULL; }
            else { struct spwd *p = fgetspent(f); want[i] = p ? p->sp_namp : NULL; }
            snprintf(first[i], sizeof first[i], "%s", want[i] ? want[i] : "");
        }
        setpwent();
        setgrent();
        setspent();
        char *small = malloc(8), *buf = malloc(100);
        int r[3];
        enumerate_call(call, small, 8, &r[0], &name);
        int same = 1;
        for (int i = 0; i < 2; i++) {
            enumerate_call(call, buf, 1024, &r[i + 1], &name);
            same = same && name && !strcmp(name, first[i]);
        }
        printf("enumerate %d %d %d %s\n", r[0], r[1], r[2], same && first[1][0] ? "same" : "DIFF");
        free(small);
        free(buf);
        return 0;
    }
    if (!strcmp(c, "groups") && argc > 3) {
        /* getgrouplist of root and group 0 into a live object of SIZE bytes with live
         * neighbours, told it holds COUNT groups: prints "groups R N same" (R its result, N the
         * count it left) when both and the groups are what it gives a list of its own. */
        size_t n = (size_t)atol(argv[2]);
        int count = atoi(argv[3]), count0 = count;
        static gid_t own[1024];
        if (count > 1024) return 2;
        int r0 = getgrouplist("root", 0, own, &count0);
        gid_t *list = malloc(n), *next[8];
        for (int i = 0; i < 8; i++)
            next[i] = malloc(n);
        int r = getgrouplist("root", 0, list, &count);
        int same = r == r0 && count == count0 && (r < 0 || !memcmp(list, own, (size_t)r * sizeof(gid_t)));
        printf("groups %d %d %s\n", r, count, same ? "same" : "DIFF");
        for (int i = 0; i < 8; i++)
            free(next[i]);
        free(list);
        return 0;
    }
    if (!strcmp(c, "named") && argc > 4) {
        const char *call = argv[2], *text, *want;
        size_t n = (size_t)atol(argv[3]), len = (size_t)atol(argv[4]);
        static char own[4096] __attribute__((aligned(16)));
        if (len > sizeof own) return 2;
        /* Both buffers start with the same bytes, so a byte the call leaves alone (as a look-up
         * into too small a buffer may) compares equal, and one written differently does not. */
        memset(own, 'x', len);
        long r0 = named_call(call, own, len, &want);
        char *buf = malloc(n), *next[8];
        for (int i = 0; i < 8; i++)
            next[i] = malloc(n);
        memset(buf, 'x', n);
        long r = named_call(call, buf, len, &text);
        size_t k = strnlen(text, n), k0 = strnlen(want, len);
        int same = r == r0 && k == k0 && !memcmp(text, want, k);
        /* Into the buffers themselves, every byte up to the smaller length matches too (what
         * the call wrote, a wide text's, and the bytes it left alone). */
        if (text == buf && want == own)
            same = same && !memcmp(buf, own, n < len ? n : len);
        printf("named %ld %s\n", r, same ? "same" : "DIFF");
        for (int i = 0; i < 8; i++)
            free(next[i]);
        free(buf);
        return 0;
    }
    if (!strcmp(c, "getline") && argc > 5) {
        /* CALL (getline, getdelim, __getdelim) of a line of LEN bytes and its newline from a
         * file into a live object of SIZE bytes with live neighbours, told it holds N: prints
         * what it returned, "same" with the size it left when the buffer was kept, or "grown",
         * and "BAD" when the line read is not the file's. */
        const char *call = argv[2];
        size_t size = (size_t)atol(argv[3]), n = (size_t)atol(argv[4]), len = (size_t)atol(argv[5]);
        FILE *f = tmpfile();
        if (!f) return 2;
        for (size_t i = 0; i < len; i++)
            fputc('g', f);
        fputs("\nnext\n", f);
        rewind(f);
        char *p = malloc(size), *kept = p, *next[8];
        for (int i = 0; i < 8; i++)
            next[i] = malloc(size);
        ssize_t (*volatile gl)(char **, size_t *, FILE *) = getline;
        ssize_t (*volatile gd)(char **, size_t *, int, FILE *) = getdelim;
        ssize_t r = !strcmp(call, "getline")    ? gl(&p, &n, f)
                    : !strcmp(call, "getdelim") ? gd(&p, &n, '\n', f)
                                                : __getdelim(&p, &n, '\n', f);
        int right = r == (ssize_t)len + 1 && p[len] == '\n' && p[len + 1] == 0;
        for (size_t i = 0; right && i < len; i++)
            right = p[i] == 'g';
        if (p == kept) printf("getline %zd same %zu%s\n", r, n, right ? "" : " BAD");
        else printf("getline %zd grown%s\n", r, right ? "" : " BAD");
        fclose(f);
        for (int i = 0; i < 8; i++)
            free(next[i]);
        free(p);
        return 0;
    }
    if (!strcmp(c, "ntop") && argc > 3) {
        /* An address's text (40 bytes with its NUL for IPv6, 16 for IPv4) into a live object of
         * SIZE bytes with live neighbours, told it holds LENGTH. */
        size_t n = (size_t)atol(argv[2]);
        unsigned char a6[16], a4[4] = {255, 255, 255, 255};
        for (int i = 0; i < 16; i++)
            a6[i] = (unsigned char)(0x11 * (i / 2 + 1));
        char *p = malloc(n), *next[8];
        for (int i = 0; i < 8; i++)
            next[i] = malloc(n);
        errno = 0;
        const char *r = inet_ntop(argc > 4 ? AF_INET : AF_INET6, argc > 4 ? (void *)a4 : (void *)a6, p,
                                  (socklen_t)atol(argv[3]));
        if (r) printf("ntop %s%s\n", r == p ? "" : "BAD RETURN ", p);
        else printf("ntop NULL %s\n", strerror(errno));
        for (int i = 0; i < 8; i++)
            free(next[i]);
        free(p);
        return 0;
    }
    if (!strcmp(c, "strftime-results")) {
        /* 2026-12-05 11:06:14, a Saturday. */
        struct tm tm = {.tm_year = 126, .tm_mon = 11, .tm_mday = 5, .tm_hour = 11, .tm_min = 6, .tm_sec = 14,
                        .tm_wday = 6, .tm_yday = 338};
        char *p = malloc(10), on_stack[100];
        size_t r = strftime(p, 100, "%Y-%m", &tm);
        printf("fits %zu %s\n", r, p);
        r = strftime(p, 100, "", &tm);
        printf("empty %zu %d\n", r, p[0]);
        /* Longer than the object and than the length: 0, as under glibc, and no report. */
        r = strftime(p, 20, "%A %d %B %Y %H:%M:%S", &tm);
        printf("too long %zu\n", r);
        r = strftime(on_stack, sizeof on_stack, "%A %d %B %Y %H:%M:%S", &tm);
        printf("stack %zu %s\n", r, on_stack);
        locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        r = strftime_l(p, 100, "%d.%m.", &tm, c);
        printf("locale %zu %s\n", r, p);
        freelocale(c);
        free(p);
        return 0;
    }
    if (!strcmp(c, "wcsftime-results")) {
        /* The same as strftime-results, wide. */
        struct tm tm = {.tm_year = 126, .tm_mon = 11, .tm_mday = 5, .tm_hour = 11, .tm_min = 6, .tm_sec = 14,
                        .tm_wday = 6, .tm_yday = 338};
        wchar_t *p = malloc(10 * sizeof *p), on_stack[100];
        size_t r = wcsftime(p, 100, L"%Y-%m", &tm);
        printf("fits %zu %ls\n", r, p);
        r = wcsftime(p, 100, L"", &tm);
        printf("empty %zu %d\n", r, (int)p[0]);
        r = wcsftime(p, 20, L"%A %d %B %Y %H:%M:%S", &tm);
        printf("too long %zu\n", r);
        r = wcsftime(on_stack, 100, L"%A %d %B %Y %H:%M:%S", &tm);
        printf("stack %zu %ls\n", r, on_stack);
        locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        r = wcsftime_l(p, 100, L"%d.%m.", &tm, c);
        printf("locale %zu %ls\n", r, p);
        freelocale(c);
        free(p);
        return 0;
    }
    if (!strcmp(c, "wformat-args")) {
        for (size_t i = 0; i < sizeof WFORMAT_CALLS / sizeof *WFORMAT_CALLS; i++) {
            const char *call = WFORMAT_CALLS[i];
            wchar_t *p = malloc(100 * sizeof *p), *q = malloc(25 * sizeof *q), on_stack[100];
            int r = WFORMAT(call, p, 100, (size_t)-1, WFORMAT_ARGS, WFORMAT_VALUES);
            printf("%s heap %d %ls\n", call, r, p);
            r = WFORMAT(call, on_stack, 100, (size_t)-1, WFORMAT_ARGS, WFORMAT_VALUES);
            printf("%s stack %d %ls\n", call, r, on_stack);
            /* A length past the object's end with a text that fits, a cut text, and a text the
             * call cannot make (not a character in this locale): -1, no report. */
            r = WFORMAT(call, q, 4096, (size_t)-1, L"%ls", L"fits");
            printf("%s roomy %d %ls\n", call, r, q);
            /* A cut text may be left unterminated (glibc 2.36 writes 9 characters and no
             * terminator): Q is cleared first, and nothing may be written past its 10 units. */
            wmemset(q, 0, 25);
            r = WFORMAT(call, q, 10, (size_t)-1, L"%ls", L"0123456789abcdef");
            int past = 0;
            for (int k = 10; k < 25; k++)
                past |= q[k] != 0;
            printf("%s cut %d %ls%s\n", call, r, q, past ? " PAST" : "");
            errno = 0;
            r = WFORMAT(call, q, 4096, (size_t)-1, L"%s", "\xff\xfe");
            printf("%s not-a-character %d %s\n", call, r, errno == EILSEQ ? "EILSEQ" : "?");
            free(p);
            free(q);
        }
        return 0;
    }
    if (!strcmp(c, "format-args")) {
        for (size_t i = 0; i < sizeof FORMAT_CALLS / sizeof *FORMAT_CALLS; i++) {
            const char *call = FORMAT_CALLS[i];
            char *p = malloc(100), *q = malloc(100), on_stack[100];
            int r = format_args(call, p, 100);
            printf("%s heap %d %s\n", call, r, p);
            r = format_args(call, on_stack, sizeof on_stack);
            printf("%s stack %d %s\n", call, r, on_stack);
            if (strstr(call, "snprintf")) {
                /* A length past the object's end, with a text that fits, and a cut text. */
                r = format_string(call, q, 4096, "fits");
                printf("%s roomy %d %s\n", call, r, q);
                r = format_string(call, q, 10, "0123456789abcdef");
                printf("%s cut %d %s\n", call, r, q);
            }
            free(p);
            free(q);
        }
        return 0;
    }
    if (!strcmp(c, "dead-slot") && argc > 2) {
        enum { K = 64 };
        char *o[K];
        for (int i = 0; i < K; i++) {
            o[i] = malloc(100);
            memset(o[i], 0x33, 100);
        }
        char *a = o[K / 2];
        free(a);
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || write(sv[1], "0123456789", 10) != 10) return 2;
        long r = !strcmp(argv[2], "write") ? write(sv[0], a, 10) : read(sv[0], a, 10);
        printf("moved=%ld\n", r);
        for (int i = 0; i < K; i++)
            if (i != K / 2) free(o[i]);
        return 0;
    }
    if (!strcmp(c, "kernel-overflow")) {
        char *p = malloc(8192);
        memset(p, 0x11, 8192);
        int sv[2];
        static char datagram[12288];
        if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) return 2;
        if (send(sv[0], datagram, sizeof datagram, 0) != (long)sizeof datagram) return 2;
        errno = 0;
        long r = recv(sv[1], p, sizeof datagram, 0);
        printf("recv=%ld errno=%d\n", r, r < 0 ? errno : 0);
        return 0;
    }
    if (!strcmp(c, "double-free")) {
        char *p = malloc(size);
        /* An object of another size from the same epoch keeps p's mirror (and so p's address
         * decodable), while p's own group dies and its memory goes round. */
        char *pin = malloc(size < 1000 ? 3000 : 24);
        free(p);
        for (int round = 0; round < 50; round++) {
            char *q[300];
            for (int i = 0; i < 300; i++) q[i] = malloc(size);
            for (int i = 0; i < 300; i++) free(q[i]);
        }
        /* Enough live objects of the size that one of them almost surely sits where p was,
         * under a new address: freeing p must not free it. */
        static char *keep[3000];
        int nkeep = size < 20000 ? 3000 : 200;
        for (int i = 0; i < nkeep; i++) keep[i] = malloc(size);
        free(p);
        printf("second free returned (keep=%p, pin=%p)\n", (void *)keep[0], (void *)pin);
        return 0;
    }
    if (!strcmp(c, "gap-revoke")) {
        /* 64 page objects on consecutive pool pages: free the odd ones, let their batch go out
         * (the delay bound is 20 ms), then free the even ones: their ranges are separated only
         * by revoked pages and can be revoked as one. */
        char *p[64];
        struct timespec d = {0, 30 * 1000 * 1000};
        for (int i = 0; i < 64; i++) p[i] = malloc(4000);
        for (int i = 1; i < 64; i += 2) free(p[i]);
        nanosleep(&d, 0);
        free(malloc(4000));
        for (int i = 0; i < 64; i += 2) free(p[i]);
        nanosleep(&d, 0);
        free(malloc(4000));
        printf("GAP OK\n");
        return 0;
    }
    if (!strcmp(c, "gap-revoke-long")) {
        /* 50 page objects on consecutive pool pages. A batch's delay bound is checked when a
         * unit arrives at a multiple of 16 pending ones. Batch 1: objects 1..33. Batch 2:
         * object 0 and objects 34..49, 33 revoked pages apart: revoked as one range. */
        char *p[50];
        struct timespec d = {0, 30 * 1000 * 1000};
        for (int i = 0; i < 50; i++) p[i] = malloc(4000);
        for (int i = 1; i <= 32; i++) free(p[i]);
        nanosleep(&d, 0);
        free(p[33]);
        free(p[0]);
        for (int i = 34; i <= 48; i++) free(p[i]);
        nanosleep(&d, 0);
        free(p[49]);
        printf("GAP OK\n");
        return 0;
    }
    if (!strcmp(c, "released-slab-free") || !strcmp(c, "released-slab-read")) {
        /* K objects of one class fill the first lanes of a slab A; K more start slab B; freeing
         * the first K releases A (its pages are freed when the next epoch starts), and K more
         * start slab C in the same epoch. A stale pointer into A must still be seen as freed:
         * not as one of C's live objects (C may reuse A's slot table). */
        char *a[64], *b[64], *cc[64];
        int k = size > 0 && size <= 64 ? (int)size : 8;
        for (int i = 0; i < k; i++) a[i] = malloc(48);
        for (int i = 0; i < k; i++) b[i] = malloc(48);
        for (int i = 0; i < k; i++) free(a[i]);
        for (int i = 0; i < k; i++) cc[i] = malloc(48);
        if (!strcmp(c, "released-slab-free")) {
            free(a[0]);
            printf("second free returned\n");
        } else {
            sink = a[0][0];
            printf("read through a dangling pointer returned\n");
        }
        for (int i = 0; i < k; i++) free(b[i]), free(cc[i]);
        return 0;
    }
    if (!strcmp(c, "own-segv") || !strcmp(c, "own-segv-signal") || !strcmp(c, "own-segv-raw")) {
        if (!strcmp(c, "own-segv-signal"))
            signal(SIGSEGV, on_segv);
        else if (!strcmp(c, "own-segv-raw")) {
            struct kernel_action before, now;
            memset(&before, 0xff, sizeof before);
            memset(&now, 0, sizeof now);
            if (raw_action(SIGSEGV, (void *)on_segv, SA_NODEFER, &before) ||
                syscall(SYS_rt_sigaction, SIGSEGV, NULL, &now, 8)) {
                perror("rt_sigaction");
                return 2;
            }
            if (before.handler != (void *)SIG_DFL || now.handler != (void *)on_segv || !(now.flags & SA_NODEFER)) {
                printf("read back %p then %p\n", before.handler, now.handler);
                return 1;
            }
        } else {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_segv;
            sigaction(SIGSEGV, &sa, NULL);
        }
        char *p = malloc(100); /* the allocator is up and its handler installed */
        free(p);
        if (!sigsetjmp(jb, 1)) {
            sink = *(volatile char *)16;
            printf("no fault\n");
            return 1;
        }
        printf("HANDLED\n");
        return 0;
    }
    if (!strcmp(c, "ignored-sent")) {
        signal(SIGSEGV, SIG_IGN);
        signal(SIGBUS, SIG_IGN);
        char *p = malloc(100);
        free(p);
        raise(SIGSEGV);
        raise(SIGBUS);
        printf("IGNORED\n");
        fflush(stdout);
        sink = *(volatile char *)16;
        printf("no fault\n");
        return 1;
    }
    if (!strcmp(c, "own-handler-uaf") || !strcmp(c, "own-handler-uaf-raw")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv_info;
        sa.sa_flags = SA_SIGINFO;
        if (c[15]) {
            raw_action(SIGSEGV, (void *)on_segv_info, SA_SIGINFO, NULL);
            raw_action(SIGBUS, (void *)on_segv_info, SA_SIGINFO, NULL);
        } else {
            sigaction(SIGSEGV, &sa, NULL);
            sigaction(SIGBUS, &sa, NULL);
        }
        char *p = malloc(size);
        free(p);
        sink = p[1];
        printf("no trap\n");
        return 0;
    }
    if (!strcmp(c, "blocked-uaf") || !strcmp(c, "blocked-uaf-raw")) {
        freed_for_thread = malloc(size);
        free(freed_for_thread);
        pthread_t t;
        pthread_create(&t, NULL, blocked_reader, c[11] ? "raw" : NULL);
        pthread_join(t, NULL);
        return 0;
    }
    if (!strcmp(c, "dropped-pte") || !strcmp(c, "dropped-pte-blocked")) {
        if (c[11])
            block_all_raw();
        char *p = malloc(5000);
        memset(p, 0x42, 5000);
        uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
        if (madvise((void *)page, 4096, MADV_DONTNEED)) {
            perror("madvise");
            return 2;
        }
        for (int i = 0; i < 5000; i++)
            if (p[i] != 0x42) {
                printf("DATA LOST at %d\n", i);
                return 1;
            }
        printf("DATA KEPT\n");
        free(p);
        return 0;
    }
    if (!strcmp(c, "dropped-page")) {
        /* 40 bytes: a slot of 48, 85 to a page and a tail of 16 bytes after the last; 24: a
         * slot of 32, filling the page. */
        size_t sizes[2] = {40, 24};
        for (int k = 0; k < 2; k++) {
            unsigned char *p = malloc(sizes[k]);
            memset(p, 0x42 + k, sizes[k]);
            uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
            if (madvise((void *)page, 4096, MADV_DONTNEED)) {
                perror("madvise");
                return 2;
            }
            volatile unsigned char *last = (volatile unsigned char *)(page + 4095);
            volatile unsigned char *first = (volatile unsigned char *)page;
            (void)*last;
            (void)*first;
            for (size_t i = 0; i < sizes[k]; i++)
                if (p[i] != 0x42 + k) {
                    printf("DATA LOST at %zu of %zu\n", i, sizes[k]);
                    return 1;
                }
            free(p);
        }
        printf("DATA KEPT\n");
        return 0;
    }
    if (!strcmp(c, "churn") || !strcmp(c, "survivors")) {
        /* Allocations replace random slots of a ring of 1024, contents checked at every free.
         * "survivors": 1 allocation in 100 goes to a ring of 20000 instead and lives long, so
         * it keeps its group's dead slots from being reused (which adaptive grouping answers
         * with smaller groups). */
        long n = argc > 2 ? atol(argv[2]) : 100000;
        int survivors = !strcmp(c, "survivors");
        enum { SHORT = 1024, LONG = 20000 };
        long slots = !survivors && argc > 3 ? atol(argv[3]) : SHORT;
        long max = !survivors && argc > 4 ? atol(argv[4]) : 1500;
        if (slots < 1 || slots > SHORT || max < 1) {
            printf("CHURN BAD ARGUMENTS\n");
            return 2;
        }
        static unsigned char *ring[SHORT + LONG];
        static size_t len[SHORT + LONG];
        unsigned s = survivors ? 12345 : 99;
        for (long i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            int k = (int)((s >> 8) % (unsigned)slots);
            if (survivors && (s >> 4) % 100 == 0) k = SHORT + (int)((s >> 8) % LONG);
            if (ring_replace("CHURN", ring, len, k, (s >> 12) % (survivors ? 1025 : (unsigned)max)))
                return 1;
        }
        printf("CHURN OK\n");
        return 0;
    }
    if (!strcmp(c, "recycle")) {
        long n = argc > 2 ? atol(argv[2]) : 1000000;
        enum { RING = 1024, KEEP = 64, OBJ = 48 };
        static unsigned char *ring[RING];
        static size_t len[RING];
        static void *volatile kept[KEEP];
        static uintptr_t kept_at[KEEP], dropped_at[KEEP];
        int nkept = 0, ndropped = 0;
        long reused_kept = 0, reused_dropped = 0;
        unsigned s = 4242;
        for (long i = 0; i < n; i++) {
            /* Past the first epochs (which the program's early objects keep), a freed object
             * now and then, either remembered or forgotten. */
            if (i >= n / 16 && i < n / 4 && i % ((n / 4 - n / 16) / (2 * KEEP)) == 0 && ndropped < KEEP) {
                void *o = malloc(OBJ);
                memset(o, 1, OBJ);
                free(o);
                if (nkept <= ndropped) {
                    kept_at[nkept] = (uintptr_t)o;
                    kept[nkept++] = o;
                } else {
                    dropped_at[ndropped++] = (uintptr_t)o ^ 0x5a5a5a5a5aull;
                }
            }
            s = s * 1103515245u + 12345u;
            int k = (int)((s >> 8) % RING);
            if (ring_replace("RECYCLE", ring, len, k, (s >> 12) % 1500))
                return 1;
            /* A new object over the bytes of a kept (or a forgotten) freed object. */
            uintptr_t a = (uintptr_t)ring[k], e = a + (len[k] ? len[k] : 1);
            for (int j = 0; j < nkept; j++)
                reused_kept += a < kept_at[j] + OBJ && kept_at[j] < e;
            for (int j = 0; j < ndropped; j++) {
                uintptr_t d = dropped_at[j] ^ 0x5a5a5a5a5aull;
                reused_dropped += a < d + OBJ && d < e;
            }
        }
        printf(reused_kept ? "KEPT REUSED %ld\n" : "KEPT NEVER REUSED\n", reused_kept);
        printf("DROPPED REUSED %ld\n", reused_dropped);
        return 0;
    }
    if (!strcmp(c, "fork-uaf")) {
        char *p = malloc(size);
        char *live = malloc(size);
        memset(live, 0x33, size);
        free(p);
        pid_t pid = fork();
        if (pid == 0) {
            if (live[size - 1] != 0x33) _exit(9); /* live data is intact in the child */
            sink = p[0];
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        if (WIFSIGNALED(st))
            printf("CHILD SIGNAL %d\n", WTERMSIG(st));
        else
            printf("CHILD EXIT %d\n", WEXITSTATUS(st));
        return 0;
    }
    if (!strcmp(c, "ancient")) {
        long n = argc > 2 ? atol(argv[2]) : 1000000;
        char *ring[1024] = {0}, *old = NULL;
        unsigned s = 99;
        for (long i = 0; i < n; i++) {
            if (i == n / 4) { /* past the first epochs, which the program's early objects keep */
                old = malloc(100);
                memset(old, 7, 100);
                free(old);
            }
            s = s * 1103515245u + 12345u;
            int k = (s >> 8) & 1023;
            free(ring[k]);
            ring[k] = malloc((s >> 12) % 1025);
        }
        printf("churned\n");
        fflush(stdout);
        if (argc > 3 && !strcmp(argv[3], "read")) {
            sink = old[10];
            printf("no trap\n");
        }
        if (argc > 3 && !strcmp(argv[3], "free")) {
            free(old);
            printf("freed twice\n");
        }
        return 0;
    }
    if (!strcmp(c, "ring")) {
        long n = argc > 2 ? atol(argv[2]) : 1000000;
        char *keep = malloc(100), *ring[1024] = {0};
        memset(keep, 7, 100);
        unsigned s = 5;
        for (long i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            int k = (s >> 8) & 1023;
            free(ring[k]);
            size_t sz = (s >> 12) % 1025;
            ring[k] = malloc(sz);
            if (sz && !ring[k]) {
                printf("MALLOC FAILED after %ld allocations\n", i);
                return 1;
            }
            if (sz) memset(ring[k], 1, sz);
        }
        char *dead = malloc(5000); /* a page object: its alias pages are its own */
        memset(dead, 1, 5000);
        free(dead);
        usleep(30000); /* past the longest delay of a revocation batch: the next free sends it */
        free(malloc(64));
        pid_t pid = fork();
        if (pid == 0) {
            for (int j = 0; j < 100; j++)
                if (keep[j] != 7) _exit(3);
            memset(keep, 9, 100);
            _exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("CHILD FAILED (status %d)\n", st);
            return 1;
        }
        for (int j = 0; j < 100; j++)
            if (keep[j] != 7) {
                printf("CHANGED by the child\n");
                return 1;
            }
        pid = fork();
        if (pid == 0) {
            sink = dead[0];
            _exit(0);
        }
        waitpid(pid, &st, 0);
        if (!WIFSIGNALED(st)) {
            printf("FREED OBJECT DID NOT TRAP (status %d)\n", st);
            return 1;
        }
        printf("RING OK\n");
        return 0;
    }
    if (!strcmp(c, "spike")) {
        enum { N = 100000 };
        static char *big[N];
        for (int i = 0; i < N; i++) {
            big[i] = malloc(640);
            memset(big[i], 1, 640);
        }
        for (int i = 0; i < N; i++) free(big[i]);
        light_load((long)size);
        printf("POOL_KIB %ld\n", pool_kib());
        return 0;
    }
    if (!strcmp(c, "phase")) {
        enum { N = 100000, KEEP = 256 };
        static char *obj[N];
        for (int i = 0; i < N; i++) {
            obj[i] = malloc(640);
            memset(obj[i], i % KEEP ? 1 : (char)(i / KEEP), 640);
        }
        for (int i = 0; i < N; i++)
            if (i % KEEP) free(obj[i]);
        light_load((long)size);
        if (argc > 3 && !strcmp(argv[3], "trim")) malloc_trim(0);
        for (int i = 0; i < N; i += KEEP)
            for (int j = 0; j < 640; j++)
                if (obj[i][j] != (char)(i / KEEP)) {
                    printf("CORRUPTED: survivor %d byte %d\n", i, j);
                    return 1;
                }
        printf("POOL_KIB %ld\n", pool_kib());
        return 0;
    }
    if (!strcmp(c, "whole-pages")) {
        long n = argc > 2 ? atol(argv[2]) : 2000;
        for (long i = 0; i < n; i++) memset(malloc(4096), 1, 4096);
        printf("POOL_KIB %ld\n", pool_kib());
        return 0;
    }
    if (!strcmp(c, "forked-pages")) {
        long n = argc > 2 ? atol(argv[2]) : 2000;
        char **o = calloc((size_t)n, sizeof *o);
        for (long i = 0; i < n; i++) memset(o[i] = malloc(4096), 1, 4096);
        for (long i = 0; i < n; i += 2) free(o[i]);
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            for (long i = 1; i < n; i += 2) o[i][0]++;
            printf("CHILD_POOL_KIB %ld\n", pool_kib());
            exit(0);
        }
        int st;
        if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
            return 1;
        printf("POOL_KIB %ld\n", pool_kib());
        return 0;
    }
    if (!strcmp(c, "unique")) {
        long n = argc > 2 ? atol(argv[2]) : 100000;
        uintptr_t *seen = calloc((size_t)n, sizeof *seen);
        char *live[64] = {0};
        unsigned s = 7;
        for (long i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            int k = (s >> 8) & 63;
            free(live[k]);
            size_t sz = (s >> 4) % 4 == 0 ? (s >> 12) % 200000 : (s >> 12) % 1500;
            live[k] = malloc(sz);
            seen[i] = (uintptr_t)live[k];
            if (argc > 3 && !strcmp(argv[3], "touch") && live[k])
                for (size_t at = 0; at < sz; at += 4096)
                    live[k][at] = 1;
        }
        /* sort and look for repeats */
        int cmp(const void *a, const void *b) {
            uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
            return x < y ? -1 : x > y;
        }
        qsort(seen, (size_t)n, sizeof *seen, cmp);
        for (long i = 1; i < n; i++)
            if (seen[i] == seen[i - 1]) {
                printf("REPEATED %#lx\n", (unsigned long)seen[i]);
                return 1;
            }
        printf("UNIQUE %ld\n", n);
        return 0;
    }
    return 2;
}
