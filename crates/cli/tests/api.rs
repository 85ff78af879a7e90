mod common;

// API conformance of the allocator against glibc semantics: `tests/c/api_conformance.c`, one
// test per section of the program (each section checks its own functions and prints `FAIL: ...`
// on stderr for every failed check).

use common::*;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

/// The program, compiled once per test binary (tests of this file run in parallel).
fn bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile("api_conformance.c", &[]))
}

/// Exit 0, `OK` on stdout, and not a single `nevermore:` line on stderr.
fn assert_clean(o: &Output) {
    assert_ok(o);
    assert!(stdout(o).contains("OK"), "no OK on stdout:\n{}\nstderr:\n{}", stdout(o), stderr(o));
    assert!(!stderr(o).contains("nevermore:"), "unexpected report on stderr:\n{}", stderr(o));
}

fn section(name: &str) {
    let o = run_preloaded(bin(), &[name], &[]);
    assert_clean(&o);
}

/// malloc(0) unique and freeable, 16-byte alignment, non-overlapping live blocks, NULL + ENOMEM
/// for impossible sizes (also every size from SIZE_MAX - 4199 to SIZE_MAX, for malloc and calloc).
#[test]
fn malloc_semantics() {
    section("malloc");
}

/// calloc overflow (NULL + ENOMEM), zero-sized requests, zeroed memory also right after dirty
/// blocks of the same size were freed.
#[test]
fn calloc_semantics() {
    section("calloc");
}

/// realloc keeps contents growing 1 -> 2 MiB and back, random jumps, failing realloc (also to
/// sizes just below SIZE_MAX, from blocks of several sizes) leaves the block alone, realloc(p, 0)
/// returns NULL, reallocarray overflow.
#[test]
fn realloc_semantics() {
    section("realloc");
}

/// posix_memalign (EINVAL, ENOMEM), aligned_alloc and memalign for every power of two up to
/// 1 GiB, valloc and pvalloc page alignment and rounding.
#[test]
fn aligned_allocation() {
    section("align");
}

/// `syscall()` and `prctl()`, which the library provides: the results and `errno` of the C
/// library's, all six arguments passed (`process_vm_readv` refuses a sixth that is not 0).
#[test]
fn syscall_and_prctl_behave_as_the_c_library_s() {
    section("syscall");
    // And without the library, so that the checks are known to hold for the C library's own.
    let o = program(bin()).arg("syscall").env_remove("LD_PRELOAD").output().unwrap();
    assert_clean(&o);
}

/// malloc_usable_size >= the request, 0 for NULL.
#[test]
fn usable_size() {
    section("usable");
}

/// The bytes up to malloc_usable_size belong to the program (glibc documents so): using them is
/// no overflow.
#[test]
fn usable_size_bytes_are_writable() {
    section("usable-write");
}

/// mallinfo2 counts allocated bytes, malloc_trim returns 0 or 1, mallopt returns 1 for known
/// parameters and does not crash on unknown ones.
#[test]
fn mallinfo_trim_mallopt() {
    section("misc");
}

/// 100k random malloc/calloc/posix_memalign/realloc/free operations with pattern checks.
#[test]
fn random_operations() {
    section("random");
}

/// Successful calls leave errno alone; free never changes it (glibc >= 2.33 guarantees so).
#[test]
fn errno_is_preserved() {
    section("errno");
}

/// Large but possible requests (1 GiB, a 64 MiB realloc, a 256 MiB calloc, 1 GiB alignment)
/// succeed and keep their contents.
#[test]
fn large_requests_succeed() {
    section("big");
}

/// A buffer grown a little at a time by `realloc` keeps its contents, in both modes, and is not
/// copied at every step: a growing large object gets room to grow where it is, and when that
/// is used up its run and address space are lengthened where they end, so each of the three
/// buffers grown alone stays one large object, and two buffers grown in turn (neither can
/// always grow where it ends) move a logarithmic number of times: measured 29 large objects
/// in prevent mode, 30 in detect mode; with room alone, 41 for the three single buffers; with
/// a copy per step, 16 k for the first buffer alone, in 7 minutes. And the pool reuses what it
/// frees: the rest of a split free run merges again with its neighbours (it used not to, and
/// the pool's pages ran out at 29 MiB).
#[test]
fn growing_buffers_are_not_copied_at_every_step() {
    for mode in ["mode=prevent", "mode=detect"] {
        let o = run_preloaded_timeout(bin(), &["grow"], &[("NEVERMORE_OPTIONS", &format!("{mode},stats=1"))], 300);
        assert_ok(&o);
        assert!(stdout(&o).contains("OK"), "{mode}: no OK:\n{}\n{}", stdout(&o), stderr(&o));
        let err = stderr(&o);
        let large = counter(&err, "large objects");
        assert!(large <= 40, "{mode}: {large} large objects for five growing buffers:\n{err}");
        let pool = counters(&err, "pool pages");
        let (peak, ever) = (pool[1], pool[2]);
        assert!(2 * ever <= 3 * peak, "{mode}: {ever} pool pages ever used for a peak of {peak} in use:\n{err}");
    }
}

/// A big buffer cut down by `realloc` keeps its contents and gives back the memory past its
/// new end, in both modes: cut by a third in place (the view's tail unmapped, its pool pages
/// punched), to a sixty-fourth by a move, and a page at a time from 16 MiB to 256 KiB (which
/// re-armed canary bytes over the whole rest of the view at every step: 3.5 s, now 0.2 s).
#[test]
fn shrinking_buffers_give_their_memory_back() {
    for mode in ["mode=prevent", "mode=detect"] {
        let o = run_preloaded(bin(), &["shrink"], &[("NEVERMORE_OPTIONS", mode)]);
        assert_clean(&o);
    }
}

/// `__libc_malloc` and the other internal names glibc exports give and take the same objects
/// as `malloc` and `free` (mixed both ways, in both modes), and C23's `free_sized` and
/// `free_aligned_sized` accept the sizes objects were allocated with (a product for `calloc`,
/// the new size after `realloc`, 0 for `malloc(0)`); wrong sizes: `misuse::sized_free_of_the_wrong_size`.
#[test]
fn glibc_names_and_sized_frees() {
    for mode in ["mode=prevent", "mode=detect"] {
        let o = run_preloaded(bin(), &["names"], &[("NEVERMORE_OPTIONS", mode)]);
        assert_clean(&o);
    }
}

/// The library exports the interface docs/usage.md lists ("What the library replaces"), and
/// nothing more: a stray export takes the place of the program's own symbol of that name (a
/// personality routine exported by mistake made Rust programs abort at their first panic,
/// `real_programs::rust_panics_unwind`).
#[test]
fn exports_are_the_documented_interface() {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(lib_path()).expect("read the library");
    let file = object::File::parse(&*data).expect("parse the library");
    let mut exported: Vec<String> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition() && s.is_global())
        .map(|s| s.name().unwrap().to_string())
        .collect();
    exported.sort();
    exported.dedup();
    let mut want: Vec<&str> = EXPORTS.split_whitespace().collect();
    want.sort();
    assert_eq!(exported, want, "exported symbols differ from the documented interface");
    let usage = std::fs::read_to_string(repo_root().join("docs/usage.md")).unwrap();
    for name in want.iter().filter(|n| !n.starts_with("_Z")) {
        assert!(usage.contains(&format!("`{name}`")), "`{name}` is exported but docs/usage.md does not name it");
    }
}

/// glibc's allocation functions, their internal names, C23's sized frees, the C++ operators,
/// the C library calls the allocator wraps, the I/O calls it makes again (stdio's and
/// `readdir` among them), `setlocale` and `newlocale`, and `opendir` and `fdopendir` (`io`).
const EXPORTS: &str = "
    malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc pvalloc
    cfree malloc_usable_size malloc_trim mallopt mallinfo mallinfo2 malloc_stats malloc_info
    __libc_malloc __libc_free __libc_calloc __libc_realloc __libc_memalign __libc_valloc
    __libc_pvalloc __libc_mallinfo free_sized free_aligned_sized
    _Znwm _Znam _ZnwmSt11align_val_t _ZnamSt11align_val_t _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t
    _ZnwmSt11align_val_tRKSt9nothrow_t _ZnamSt11align_val_tRKSt9nothrow_t
    _ZdlPv _ZdaPv _ZdlPvm _ZdaPvm _ZdlPvSt11align_val_t _ZdaPvSt11align_val_t
    _ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t _ZdlPvRKSt9nothrow_t _ZdaPvRKSt9nothrow_t
    _ZdlPvSt11align_val_tRKSt9nothrow_t _ZdaPvSt11align_val_tRKSt9nothrow_t
    sigaction signal bsd_signal ssignal __sysv_signal sysv_signal sigset sigignore sighold sigrelse sigblock
    sigsetmask sigaltstack sigprocmask pthread_sigmask clone _Fork syscall prctl mlockall munlockall dlopen fcntl fcntl64
    getrlimit getrlimit64 setrlimit setrlimit64 prlimit prlimit64
    read write pread pread64 pwrite pwrite64 readv writev preadv preadv64 pwritev pwritev64
    preadv2 preadv64v2 pwritev2 pwritev64v2 recv recvfrom recvmsg send sendto sendmsg
    epoll_wait epoll_pwait poll ppoll __read_chk __pread_chk __pread64_chk __recv_chk __recvfrom_chk
    __poll_chk open open64 openat openat64 creat stat stat64 lstat lstat64 fstatat fstatat64 statx
    access faccessat unlink unlinkat mkdir rmdir chdir chroot readlink rename renameat renameat2 link linkat
    symlink symlinkat readlinkat mkdirat mknod mkfifo chmod fchmodat chown lchown fchownat truncate
    truncate64 utimensat statfs statfs64 fstat fstat64 getrandom getdents64 recvmmsg sendmmsg
    execve execv execvp execvpe execl execlp execle
    fopen fopen64 freopen freopen64 fread fread_unlocked fwrite fwrite_unlocked __fread_chk setvbuf setbuf setbuffer
    __fread_unlocked_chk fgets fgets_unlocked __fgets_chk __fgets_unlocked_chk fgetws fgetws_unlocked
    __fgetws_chk __fgetws_unlocked_chk gets memcpy memmove memset bzero __bzero bcopy memccpy strcpy stpcpy strcat strncpy strncat mempcpy __mempcpy
    __memcpy_chk __memmove_chk __mempcpy_chk __memset_chk __strcpy_chk __stpcpy_chk __strcat_chk __strncpy_chk
    __strncat_chk stpncpy __stpncpy __stpncpy_chk wmemcpy wmemmove wmempcpy wmemset wcscpy wcpcpy wcscat
    wcsncpy wcpncpy wcsncat __wmemcpy_chk __wmemmove_chk __wmempcpy_chk __wmemset_chk __wcscpy_chk __wcpcpy_chk
    __wcscat_chk __wcsncpy_chk __wcpncpy_chk __wcsncat_chk swprintf vswprintf __swprintf_chk __vswprintf_chk strftime strftime_l inet_ntop mbstowcs wcstombs
    sscanf vsscanf __isoc99_sscanf __isoc99_vsscanf fscanf vfscanf __isoc99_fscanf __isoc99_vfscanf
    scanf vscanf __isoc99_scanf __isoc99_vscanf __isoc23_sscanf __isoc23_vsscanf __isoc23_fscanf
    __isoc23_vfscanf __isoc23_scanf __isoc23_vscanf swscanf vswscanf fwscanf vfwscanf wscanf vwscanf
    __isoc99_swscanf __isoc99_vswscanf __isoc99_fwscanf __isoc99_vfwscanf __isoc99_wscanf __isoc99_vwscanf
    __isoc23_swscanf __isoc23_vswscanf __isoc23_fwscanf __isoc23_vfwscanf __isoc23_wscanf __isoc23_vwscanf
    realpath __realpath_chk
    strdup __strdup strndup wcsdup iconv getline getdelim __getdelim explicit_bzero __explicit_bzero_chk
    strlen strnlen strchr strchrnul strrchr memchr memrchr memcmp bcmp strcmp strncmp strcasecmp
    strncasecmp strstr memmem strspn strcspn strpbrk wcslen wcscmp wmemcmp rawmemchr strcasestr wcschr wcsrchr
    wmemchr wcsncmp wcsnlen qsort qsort_r getpwnam_r getpwuid_r getgrnam_r getgrgid_r
    gethostname ttyname_r ptsname_r confstr strerror_r __xpg_strerror_r getnameinfo if_indextoname asctime_r
    ctime_r getentropy gethostbyname_r gethostbyname2_r gethostbyaddr_r getservbyname_r getservbyport_r
    getprotobyname_r getprotobynumber_r getgrouplist mbsrtowcs mbsnrtowcs wcsrtombs wcsnrtombs wcrtomb mbrtowc wctomb mbtowc
    strlcpy strlcat __strlcpy_chk __strlcat_chk wcslcpy wcslcat __wcslcpy_chk __wcslcat_chk
    strxfrm strxfrm_l __strxfrm_l wcsxfrm wcsxfrm_l __wcsxfrm_l wcsftime wcsftime_l __wcsftime_l
    getpwent_r getgrent_r fgetpwent_r fgetgrent_r fgetspent_r getspnam_r getspent_r getdomainname
    sprintf vsprintf snprintf vsnprintf __sprintf_chk __vsprintf_chk __snprintf_chk __vsnprintf_chk readdir readdir64 posix_spawn posix_spawnp system popen setlocale newlocale
    select pselect waitpid wait wait3 wait4 waitid accept accept4 getsockname getpeername getsockopt
    connect bind setsockopt epoll_ctl pipe pipe2 socketpair __open_2 __open64_2 __openat_2
    __openat64_2 __xstat __xstat64 __lxstat __lxstat64 __fxstat __fxstat64 __fxstatat __fxstatat64
    __readlink_chk __readlinkat_chk
    opendir fdopendir statvfs statvfs64 inotify_add_watch getcwd getxattr lgetxattr fgetxattr setxattr
    lsetxattr fsetxattr listxattr llistxattr flistxattr removexattr lremovexattr fremovexattr
    readdir_r readdir64_r futimens sendfile sendfile64 copy_file_range splice getgroups setgroups
    initgroups sched_getaffinity sched_setaffinity pthread_getaffinity_np pthread_setaffinity_np
    getrusage times uname sysinfo sched_getparam sched_setparam sched_setscheduler
    sched_rr_get_interval pthread_getname_np pthread_setname_np sigtimedwait sigwaitinfo sigwait
    sigpending signalfd nanosleep clock_nanosleep setitimer getitimer timerfd_settime
    timerfd_gettime timer_settime timer_gettime eventfd_read msgsnd msgrcv msgctl shmctl semop
    semtimedop semctl mq_send mq_timedsend mq_receive mq_timedreceive mq_getattr mq_setattr
";

/// The same program run without the library passes too (so a failure above is the allocator's).
#[test]
fn program_passes_under_glibc() {
    let o = program(bin()).output().expect("spawn program");
    assert_ok(&o);
    assert!(stdout(&o).contains("OK"));
}

#[test]
fn successful_calls_leave_errno_alone() {
    let bin = compile("errno_kept.c", &[]);
    for mode in ["mode=prevent", "mode=detect"] {
        let o = run_preloaded(&bin, &[], &[("NEVERMORE_OPTIONS", mode)]);
        assert_ok(&o);
        assert!(stdout(&o).contains("OK"), "{mode}: {}", stderr(&o));
    }
}
