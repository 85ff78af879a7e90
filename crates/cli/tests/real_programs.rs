mod common;

// Real, unmodified programs run under `libnevermore.so`. Every test checks the program's
// output, either against values computed independently here or against the same program run
// without the library (or both). A missing program fails the test and names the Debian package
// to install (`.ci/run` installs them all).

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Finds `prog` (an absolute path, or a name looked up in `PATH`); a missing program fails the
/// test with the package that provides it.
fn require(prog: &str, package: &str) -> PathBuf {
    let found = if prog.contains('/') {
        Some(PathBuf::from(prog)).filter(|p| p.is_file())
    } else {
        std::env::var_os("PATH")
            .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(prog)).find(|p| p.is_file()))
    };
    match found {
        Some(p) => p,
        None => panic!(
            "required program `{prog}` not found: install the Debian package `{package}` \
             (apt-get install -y {package}), or run `bash .ci/run`, which installs it"
        ),
    }
}

/// Runs `prog args` without the library (the baseline), with the same extra environment.
fn run_plain(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = program(prog);
    cmd.args(args).env_remove("LD_PRELOAD").env_remove("NEVERMORE_OPTIONS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn program")
}

/// Asserts exit 0 and that the dynamic loader did not refuse the preload (it only warns and
/// runs the program without the library, which would make the test meaningless).
fn assert_ok_preloaded(o: &Output) {
    assert_ok(o);
    let err = stderr(o);
    assert!(
        !err.contains("cannot be preloaded") && !err.contains("ERROR: ld.so"),
        "the dynamic loader did not load the library:\n{err}"
    );
}

/// Asserts that a preloaded run and a plain run printed the same thing.
fn assert_same_output(under: &Output, plain: &Output, what: &str) {
    assert_ok(plain);
    let (a, b) = (stdout(under), stdout(plain));
    if a != b {
        let first = a.lines().zip(b.lines()).position(|(x, y)| x != y);
        panic!(
            "{what}: output under nevermore differs from the plain run \
             ({} vs {} lines, first differing line: {first:?})\n--- under nevermore:\n{}\n--- plain:\n{}",
            a.lines().count(),
            b.lines().count(),
            head(&a, 40),
            head(&b, 40)
        );
    }
}

/// Runs under the library in the given mode (`prevent` is the default, `detect` gives every
/// object its own alias page).
fn run_mode(mode: &str, prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let opt = format!("mode={mode}");
    let mut env = env.to_vec();
    env.push(("NEVERMORE_OPTIONS", opt.as_str()));
    run_preloaded(prog, args, &env)
}

fn head(s: &str, n: usize) -> String {
    s.lines().take(n).collect::<Vec<_>>().join("\n")
}

fn python() -> PathBuf {
    require("/usr/bin/python3", "python3")
}

/// Deterministic xorshift generator for generated inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Asserts that the dynamic loader's `LD_DEBUG=bindings` log (on stderr) shows `binary`'s
/// references to `malloc` and `free` bound to a file whose path ends with `lib`.
fn assert_binds_to_lib(o: &Output, binary: &str, lib: &str) {
    let err = stderr(o);
    for sym in ["malloc", "free"] {
        let bound = err.lines().any(|l| {
            l.contains(&format!("binding file {binary} [0] to "))
                && l.contains(&format!("{lib} [0]: normal symbol `{sym}'"))
        });
        if !bound {
            let ours: Vec<&str> = err.lines().filter(|l| l.contains(&format!("symbol `{sym}'"))).take(20).collect();
            panic!(
                "`{sym}` of {binary} is not bound to {lib} (does the library export it?); \
                 the loader bound it as follows:\n{}",
                ours.join("\n")
            );
        }
    }
}

#[test]
fn preloaded_library_provides_malloc() {
    // Every other test in this file is meaningful only if the programs' malloc is ours.
    let ls = require("/bin/ls", "coreutils");
    let o = run_preloaded(&ls, &["/"], &[("LD_DEBUG", "bindings")]);
    assert_ok_preloaded(&o);
    assert!(stdout(&o).lines().any(|l| l == "usr"), "{}", stdout(&o));
    let lib = lib_path();
    assert_binds_to_lib(&o, "/bin/ls", lib.to_str().unwrap());
}

fn ls_la_root_in(mode: &str) {
    let ls = require("/bin/ls", "coreutils");
    let env = [("LC_ALL", "C")];
    let o = run_mode(mode, &ls, &["-la", "/"], &env);
    assert_ok_preloaded(&o);
    let out = stdout(&o);
    assert!(out.starts_with("total "), "`ls -la /` output should start with `total`:\n{out}");
    for name in ["usr", "etc", ".", ".."] {
        assert!(out.lines().any(|l| l.ends_with(&format!(" {name}"))), "`ls -la /` should list `{name}`:\n{out}");
    }
    let plain = run_plain(&ls, &["-la", "/"], &env);
    assert_ok(&plain);
    assert_eq!(
        out.lines().count(),
        stdout(&plain).lines().count(),
        "line count differs from the plain run:\n{out}\n--- plain:\n{}",
        stdout(&plain)
    );
}

#[test]
fn ls_la_root() {
    ls_la_root_in("prevent");
}

#[test]
fn ls_la_root_detect_mode() {
    ls_la_root_in("detect");
}

fn python_threads_json_sqlite_hashlib_in(mode: &str) {
    let py = python();
    let script = repo_root().join("tests/py/threaded.py");
    let script = script.to_str().unwrap();
    // pymalloc would serve small objects itself and hide the allocator.
    let env = [("PYTHONMALLOC", "malloc"), ("PYTHONHASHSEED", "0")];
    let o = run_mode(mode, &py, &[script], &env);
    assert_ok_preloaded(&o);
    let out = stdout(&o);
    // Known constants (FIPS 180-2 and RFC 1321 test vectors).
    assert!(out.contains("sha256(abc)=ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"), "{out}");
    assert!(out.contains("md5(abc)=900150983cd24fb0d6963f7d28e17f72\n"), "{out}");
    assert!(out.contains("rows=2000 threads=4 rounds=3\n"), "{out}");
    assert!(out.ends_with("done\n"), "{out}");
    // Each thread's SQLite table holds 1..=2000; after deleting the even rows the odd ones remain.
    let rows: u64 = 2000;
    let sqlite_lines: Vec<&str> = out.lines().filter(|l| l.contains(" sqlite ")).collect();
    assert_eq!(sqlite_lines.len(), 4 * 3, "{out}");
    for l in &sqlite_lines {
        let total = rows * (rows + 1) / 2;
        let odd_sum = (rows / 2) * (rows / 2);
        assert!(l.contains(&format!(" count={rows} sum={total} ")), "{l}");
        assert!(l.ends_with(&format!(" odd={}:{odd_sum}", rows / 2)), "{l}");
    }
    assert_eq!(out.lines().filter(|l| l.contains(" json ")).count(), 12, "{out}");
    assert_eq!(out.lines().filter(|l| l.contains(" hash ")).count(), 12, "{out}");
    let plain = run_plain(&py, &[script], &env);
    assert_same_output(&o, &plain, "python3 tests/py/threaded.py");
}

#[test]
fn python_threads_json_sqlite_hashlib() {
    python_threads_json_sqlite_hashlib_in("prevent");
}

#[test]
fn python_threads_json_sqlite_hashlib_detect_mode() {
    python_threads_json_sqlite_hashlib_in("detect");
}

fn sqlite3_shell_on_a_database_file_in(mode: &str) {
    const N: u64 = 20_000;
    let sqlite = require("sqlite3", "sqlite3");
    // A directory per mode: the two modes' tests run side by side, and `scratch` empties it.
    let dir = scratch(&format!("sqlite3-shell-{mode}"));
    let db = dir.join("test.db");
    let db = db.to_str().unwrap();
    // Lookaside off: otherwise SQLite serves small allocations from its own buffers.
    let opts = ["-batch", "-bail", "-lookaside", "0", "0"];
    let create = format!(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, sq INTEGER, s TEXT, grp INTEGER);
         WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {N})
           INSERT INTO t SELECT x, x, x * x, printf('row-%06d', x), x % 7 FROM c;
         CREATE TABLE g (grp INTEGER PRIMARY KEY, label TEXT);
         WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < 6)
           INSERT INTO g SELECT x, 'group-' || x FROM c;
         CREATE INDEX t_s ON t (s);
         CREATE INDEX t_grp ON t (grp, n);"
    );
    let mut args: Vec<&str> = opts.to_vec();
    args.extend([db, create.as_str()]);
    let o = run_mode(mode, &sqlite, &args, &[]);
    assert_ok_preloaded(&o);
    assert_eq!(stdout(&o), "", "creating the database printed something");

    let query = "SELECT count(*), sum(n), sum(sq), min(s), max(s) FROM t;
         SELECT g.label, count(*), sum(t.n) FROM t JOIN g USING (grp) GROUP BY g.label ORDER BY g.label;
         SELECT length(group_concat(s, ',')) FROM t;
         SELECT s FROM t WHERE s >= 'row-012345' ORDER BY s LIMIT 3;
         SELECT count(*) FROM t WHERE s LIKE 'row-01%';
         DELETE FROM t WHERE n % 3 = 0;
         SELECT count(*), sum(n) FROM t;
         PRAGMA integrity_check;";
    let mut args: Vec<&str> = opts.to_vec();
    args.extend([db, query]);
    let o = run_mode(mode, &sqlite, &args, &[]);
    assert_ok_preloaded(&o);

    // The expected output, computed independently.
    let mut want = String::new();
    let sum_sq = N * (N + 1) * (2 * N + 1) / 6;
    want += &format!("{N}|{}|{sum_sq}|row-000001|row-{N:06}\n", N * (N + 1) / 2);
    for grp in 0..7 {
        let members = (1..=N).filter(|x| x % 7 == grp);
        let (count, sum) = members.fold((0u64, 0u64), |(c, s), x| (c + 1, s + x));
        want += &format!("group-{grp}|{count}|{sum}\n");
    }
    want += &format!("{}\n", 10 * N + (N - 1));
    want += "row-012345\nrow-012346\nrow-012347\n";
    want += &format!("{}\n", (1..=N).filter(|x| (10_000..20_000).contains(x)).count());
    let (count, sum) = (1..=N).filter(|x| x % 3 != 0).fold((0u64, 0u64), |(c, s), x| (c + 1, s + x));
    want += &format!("{count}|{sum}\n");
    want += "ok\n";
    assert_eq!(stdout(&o), want, "sqlite3 query output");
}

#[test]
fn sqlite3_shell_on_a_database_file() {
    sqlite3_shell_on_a_database_file_in("prevent");
}

#[test]
fn sqlite3_shell_on_a_database_file_detect_mode() {
    sqlite3_shell_on_a_database_file_in("detect");
}

const GCC_INPUT: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_string(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void) {
    enum { LIMIT = 100000, ITEMS = 1000 };
    char *composite = calloc(LIMIT, 1);
    long count = 0, sum = 0;
    for (long i = 2; i < LIMIT; i++) {
        if (composite[i]) continue;
        count++;
        sum += i;
        for (long j = i * i; j < LIMIT; j += i) composite[j] = 1;
    }
    free(composite);
    printf("primes below %d: %ld, sum %ld\n", LIMIT, count, sum);

    char **items = malloc(ITEMS * sizeof *items);
    size_t total = 0;
    for (int i = 0; i < ITEMS; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "item-%d", (i * 7919) % ITEMS);
        items[i] = strdup(buf);
        total += strlen(buf);
    }
    qsort(items, ITEMS, sizeof *items, by_string);
    printf("sorted: first %s, last %s, total length %zu\n", items[0], items[ITEMS - 1], total);
    for (int i = 0; i < ITEMS; i++) free(items[i]);
    free(items);
    return 0;
}
"#;

fn gcc_compiles_a_program_in(mode: &str) {
    let gcc = require("gcc", "gcc");
    // A directory per mode: the two modes' tests run side by side, and `scratch` empties it.
    let dir = scratch(&format!("gcc-{mode}"));
    let src = dir.join("input.c");
    std::fs::write(&src, GCC_INPUT).unwrap();
    let exe = dir.join("input");
    // The driver runs cc1, as, collect2 and ld as children, which inherit LD_PRELOAD.
    let o = run_mode(
        mode,
        &gcc,
        &["-O2", "-Wall", "-Werror", "-o", exe.to_str().unwrap(), src.to_str().unwrap()],
        &[("LC_ALL", "C")],
    );
    assert_ok_preloaded(&o);
    assert!(exe.is_file(), "gcc under nevermore produced no executable");

    // Expected output, computed here.
    const LIMIT: usize = 100_000;
    let mut composite = vec![false; LIMIT];
    let (mut count, mut sum) = (0u64, 0u64);
    for i in 2..LIMIT {
        if !composite[i] {
            count += 1;
            sum += i as u64;
            (i * i..LIMIT).step_by(i).for_each(|j| composite[j] = true);
        }
    }
    let mut items: Vec<String> = (0..1000).map(|i| format!("item-{}", (i * 7919) % 1000)).collect();
    let total: usize = items.iter().map(|s| s.len()).sum();
    items.sort();
    let want = format!(
        "primes below {LIMIT}: {count}, sum {sum}\nsorted: first {}, last {}, total length {total}\n",
        items[0], items[999]
    );
    assert_eq!(count, 9592, "prime count below 100000");

    let plain = run_plain(&exe, &[], &[]);
    assert_ok(&plain);
    assert_eq!(stdout(&plain), want, "output of the program gcc built under nevermore");
    let under = run_mode(mode, &exe, &[], &[]);
    assert_ok_preloaded(&under);
    assert_eq!(stdout(&under), want, "output of the built program, itself run under nevermore");
}

#[test]
fn gcc_compiles_a_program() {
    gcc_compiles_a_program_in("prevent");
}

#[test]
fn gcc_compiles_a_program_detect_mode() {
    gcc_compiles_a_program_in("detect");
}

fn sort_generated_lines_in(mode: &str) {
    const LINES: usize = 300_000;
    let sort = require("sort", "coreutils");
    // A directory per mode: the two modes' tests run side by side, and `scratch` empties it.
    let dir = scratch(&format!("sort-{mode}"));
    let input = dir.join("input.txt");
    let mut rng = Rng(0x2545F4914F6CDD1D);
    let mut lines: Vec<String> = (0..LINES)
        .map(|_| {
            let r = rng.next();
            // Variable-length decimal numbers, with duplicates.
            (r % 10u64.pow(1 + (r >> 60) as u32 % 12)).to_string()
        })
        .collect();
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&input, &text).unwrap();
    let input = input.to_str().unwrap();
    let tmp = dir.to_str().unwrap();
    let env = [("LC_ALL", "C")];

    // In memory, with sort's worker threads.
    let args = ["--parallel=2", "-S", "64M", "-T", tmp, input];
    let o = run_mode(mode, &sort, &args, &env);
    assert_ok_preloaded(&o);
    lines.sort();
    let mut want = lines.join("\n");
    want.push('\n');
    assert!(stdout(&o) == want, "`sort` output is not the input sorted bytewise");
    assert_same_output(&o, &run_plain(&sort, &args, &env), "sort");

    // Numeric, with a 1 MiB buffer: runs spill to temporary files and are merged.
    let args = ["-n", "-S", "1M", "-T", tmp, input];
    let o = run_mode(mode, &sort, &args, &env);
    assert_ok_preloaded(&o);
    lines.sort_by_key(|l| l.parse::<u64>().unwrap());
    let mut want = lines.join("\n");
    want.push('\n');
    assert!(stdout(&o) == want, "`sort -n` output is not the input sorted numerically");
    assert_same_output(&o, &run_plain(&sort, &args, &env), "sort -n");
}

#[test]
fn sort_generated_lines() {
    sort_generated_lines_in("prevent");
}

#[test]
fn sort_generated_lines_detect_mode() {
    sort_generated_lines_in("detect");
}

fn cxx_standard_containers_in(mode: &str) {
    require("c++", "g++");
    let exe = compile("containers.cc", &[]);
    let o = run_mode(mode, &exe, &[], &[]);
    assert_ok_preloaded(&o);
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 4 * 5 + 1, "{out}");
    assert!(out.lines().last().unwrap_or("").starts_with("checksum "), "{out}");
    assert_same_output(&o, &run_plain(&exe, &[], &[]), "tests/c/containers.cc");
}

#[test]
fn cxx_standard_containers() {
    cxx_standard_containers_in("prevent");
}

#[test]
fn cxx_standard_containers_detect_mode() {
    cxx_standard_containers_in("detect");
}

#[test]
fn nevermore_run_python() {
    let py = python();
    let script = "
import json
doc = {'ok': True, 'items': [str(i) * 3 for i in range(1000)]}
back = json.loads(json.dumps(doc))
print('roundtrip', back == doc, len(back['items']), back['items'][999])
with open('/proc/self/maps') as maps:
    print('mapped', any(line.rstrip().endswith('/libnevermore.so') for line in maps))
";
    let o = program(&nevermore_bin())
        .args(["run", "--", py.to_str().unwrap(), "-c", script])
        .env("PYTHONMALLOC", "malloc")
        .env("LD_DEBUG", "bindings")
        .env_remove("LD_PRELOAD")
        .env_remove("NEVERMORE_OPTIONS")
        .output()
        .expect("spawn nevermore");
    assert_ok_preloaded(&o);
    let out = stdout(&o);
    assert_eq!(out, "roundtrip True 1000 999999999\nmapped True\n");
    assert_binds_to_lib(&o, py.to_str().unwrap(), "/libnevermore.so");
}

/// The PostgreSQL server binaries (`/usr/lib/postgresql/<version>/bin`).
fn postgres_bin_dir() -> PathBuf {
    let base = Path::new("/usr/lib/postgresql");
    let dir = std::fs::read_dir(base)
        .ok()
        .and_then(|it| it.filter_map(|e| e.ok()).map(|e| e.path().join("bin")).find(|p| p.join("postgres").is_file()));
    dir.unwrap_or_else(|| {
        panic!(
            "PostgreSQL not found under {}: install the Debian package `postgresql` \
             (apt-get install -y postgresql), or run `bash .ci/run`, which installs it",
            base.display()
        )
    })
}

/// Runs a command as the `postgres` user (PostgreSQL refuses to run as root).
fn as_postgres(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(require("setpriv", "util-linux"));
    cmd.args(["--reuid=postgres", "--regid=postgres", "--init-groups", "--"]).arg(prog).args(args);
    cmd.env_remove("LD_PRELOAD").env_remove("NEVERMORE_OPTIONS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// A PostgreSQL server (the database of the heap-protection paper's evaluation) under the
/// library: it starts, answers queries with the right results and serves a short pgbench run.
/// Its postmaster checks `errno` right after blocking signals around `select()`, which a
/// signal-mask change that touched `errno` broke.
fn postgres_serves_queries_in(mode: &str) {
    let bin = postgres_bin_dir();
    // The server runs as `postgres` in both passes of the CI: an unprivileged user already.
    assert!(is_root(), "this test starts PostgreSQL as the postgres user and needs root");
    let dir = PathBuf::from(format!("/tmp/nevermore-pg-{}-{mode}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libnevermore.so");
    std::fs::copy(lib_path(), &lib).unwrap();
    let chown = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir).status().unwrap();
    assert!(chown.success());
    let data = dir.join("data");
    let o = as_postgres(&bin.join("initdb"), &["-D", data.to_str().unwrap(), "-A", "trust"], &[]).output().unwrap();
    assert!(o.status.success(), "initdb failed: {}", stderr(&o));
    let port = free_port().to_string();
    let sock = dir.to_str().unwrap();
    let opts = format!("mode={mode}");
    let log = std::fs::File::create(dir.join("server.log")).unwrap();
    let mut server = as_postgres(
        &bin.join("postgres"),
        &["-D", data.to_str().unwrap(), "-p", &port, "-k", sock, "-c", "listen_addresses=", "-c", "fsync=off"],
        &[("LD_PRELOAD", lib.to_str().unwrap()), ("NEVERMORE_OPTIONS", &opts)],
    )
    .stdout(log.try_clone().unwrap())
    .stderr(log)
    .spawn()
    .unwrap();
    let ready = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(200));
        as_postgres(&bin.join("pg_isready"), &["-h", sock, "-p", &port], &[]).output().unwrap().status.success()
    });
    let sql = "create table t(a int); insert into t select generate_series(1, 20000); \
               select count(*), sum(a), max(a) from t;";
    let q = ready.then(|| {
        as_postgres(&bin.join("psql"), &["-h", sock, "-p", &port, "-d", "postgres", "-At", "-c", sql], &[])
            .output()
            .unwrap()
    });
    let bench = ready.then(|| {
        let pgbench = bin.join("pgbench");
        let init =
            as_postgres(&pgbench, &["-h", sock, "-p", &port, "-i", "-s", "1", "postgres"], &[]).output().unwrap();
        assert!(init.status.success(), "pgbench -i: {}", stderr(&init));
        as_postgres(&pgbench, &["-h", sock, "-p", &port, "-c", "2", "-T", "2", "postgres"], &[]).output().unwrap()
    });
    let _ = as_postgres(&bin.join("pg_ctl"), &["-D", data.to_str().unwrap(), "stop", "-m", "fast"], &[]).output();
    let _ = server.wait();
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ready, "{mode}: the server did not become ready:\n{log}");
    let q = q.unwrap();
    assert!(q.status.success(), "{mode}: psql failed: {}\n{log}", stderr(&q));
    assert_eq!(stdout(&q).lines().last(), Some("20000|200010000|20000"), "{mode}: {}", stdout(&q));
    let bench = bench.unwrap();
    assert!(bench.status.success(), "{mode}: pgbench failed: {}\n{log}", stderr(&bench));
    let done = stdout(&bench)
        .lines()
        .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
        .and_then(|v| v.split('/').next())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(done > 0, "{mode}: pgbench processed no transaction:\n{}", stdout(&bench));
    assert!(!log.contains("nevermore:") && !log.contains("select() failed"), "{mode}: server log:\n{log}");
}

#[test]
fn postgres_serves_queries() {
    postgres_serves_queries_in("prevent");
}

#[test]
fn postgres_serves_queries_detect_mode() {
    postgres_serves_queries_in("detect");
}

/// A new, empty directory for one server test (`what`, `mode`) under /tmp.
fn fresh_dir(what: &str, mode: &str) -> PathBuf {
    let dir = PathBuf::from(format!("/tmp/nevermore-{what}-{}-{mode}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A TCP port of the loopback address for a server under test: one nothing listened on a
/// moment ago (the kernel's choice for a socket bound to port 0), never given to another test
/// of this run. Fixed ports per test collided: two tests running side by side could be given
/// the same one, and one would talk to the other's server.
fn free_port() -> u32 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let socket = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = socket.local_addr().unwrap().port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port.into();
        }
    }
}

/// Whether something accepts connections on `port` of the loopback address within 10 s.
fn listening(port: u32) -> bool {
    (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::net::TcpStream::connect(("127.0.0.1", port as u16)).is_ok()
    })
}

/// Starts a server under the library with `options`, its standard error piped (see `stop`).
fn start_server(cmd: &mut Command, options: &str) -> std::process::Child {
    cmd.env("LD_PRELOAD", lib_path())
        .env("NEVERMORE_OPTIONS", options)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Stops a server started by `start_server`; returns what it wrote on standard error.
fn stop(server: std::process::Child) -> String {
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    stderr(&server.wait_with_output().unwrap())
}

/// OpenSSH's server under the library: three logins with a public key run commands and move
/// 2 MB through the connection. Each connection's pre-authentication child confines itself
/// with a seccomp filter that kills the process for any call it does not list (`ioctl`,
/// `fallocate`, `process_madvise` among them) and then keeps allocating; the library lets its
/// own calls through that filter (`seccomp_exempt`, the library's `seccomp` module). Before, the
/// child was killed by SIGSYS at its first install and every login failed.
fn sshd_serves_logins_in(mode: &str) {
    let sshd = require("/usr/sbin/sshd", "openssh-server");
    let ssh = require("ssh", "openssh-client");
    let keygen = require("ssh-keygen", "openssh-client");
    // Privilege separation needs root; the child that confines itself runs as `sshd` (an
    // unprivileged user already) in both passes of the CI.
    assert!(is_root(), "this test starts sshd, whose privilege separation needs root");
    std::fs::create_dir_all("/run/sshd").unwrap();
    let dir = fresh_dir("sshd", mode);
    let key = |name: &str| {
        let path = dir.join(name);
        let o = Command::new(&keygen)
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "nevermore-test", "-f"])
            .arg(&path)
            .env_remove("LD_PRELOAD")
            .output()
            .unwrap();
        assert!(o.status.success(), "ssh-keygen: {}", stderr(&o));
        path
    };
    let (host, client) = (key("host"), key("client"));
    std::fs::copy(client.with_extension("pub"), dir.join("authorized_keys")).unwrap();
    let port = free_port();
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\nStrictModes no\n\
         PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
         UsePAM no\nPidFile {}\n",
        host.display(),
        dir.join("authorized_keys").display(),
        dir.join("sshd.pid").display()
    );
    std::fs::write(dir.join("sshd_config"), config).unwrap();
    let opts = format!("mode={mode},verbose=1");
    // Standard error to a pipe: the child limits the size of files it writes to 0.
    let server = start_server(Command::new(&sshd).args(["-D", "-e", "-f"]).arg(dir.join("sshd_config")), &opts);
    let listening = listening(port);
    let login = |command: &str, input: Option<usize>| {
        let mut c = Command::new(&ssh);
        c.args(["-p", &port.to_string(), "-i"])
            .arg(&client)
            .args(["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes"])
            .args(["-o", "LogLevel=ERROR", "-o", "ConnectTimeout=20", "root@127.0.0.1", command])
            .env_remove("LD_PRELOAD")
            .env_remove("NEVERMORE_OPTIONS")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            if let Some(n) = input {
                let _ = stdin.write_all(&vec![b'x'; n]);
            }
        });
        let o = child.wait_with_output().unwrap();
        writer.join().unwrap();
        o
    };
    let runs: Vec<(Output, &str)> = if listening {
        vec![
            (login("echo $((6 * 7)) $USER", None), "42 root"),
            (login("wc -c", Some(2_000_000)), "2000000"),
            (login("seq 1 100000 | sort -n | tail -1", None), "100000"),
        ]
    } else {
        Vec::new()
    };
    let log = stop(server);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(listening, "{mode}: sshd did not listen:\n{log}");
    for (o, want) in &runs {
        assert!(o.status.success(), "{mode}: ssh failed ({:?}): {}\nserver:\n{log}", o.status, stderr(o));
        assert_eq!(stdout(o).trim(), *want, "{mode}: server:\n{log}");
    }
    // The pre-authentication children ran under the library and confined themselves.
    assert_eq!(log.matches("the program installs a seccomp filter").count(), 3, "{mode}: server log:\n{log}");
    assert!(
        !log.contains("nevermore: ERROR") && !log.contains("preauth child terminated"),
        "{mode}: server log:\n{log}"
    );
}

#[test]
fn sshd_serves_logins() {
    sshd_serves_logins_in("prevent");
}

#[test]
fn sshd_serves_logins_detect_mode() {
    sshd_serves_logins_in("detect");
}

/// vsftpd under the library: three anonymous sessions list the directory and download a
/// 300 KB file (checked byte for byte). Each connection's process is made with
/// `syscall(SYS_clone)` (no fork handler of the C library runs) and lowers its address-space
/// limit to a few hundred MiB; before, the two processes shared the heap's pages and every
/// mapping after the limit failed ("500 OOPS: mmap", then a crash of the listener). vsftpd's
/// own seccomp sandbox is off: it refuses calls of this C library (`newfstatat`) under glibc
/// alone as well.
fn vsftpd_serves_files_in(mode: &str) {
    let vsftpd = require("/usr/sbin/vsftpd", "vsftpd");
    assert!(is_root(), "this test starts vsftpd, which needs root for its sessions' chroot");
    std::fs::create_dir_all("/var/run/vsftpd/empty").unwrap();
    let dir = fresh_dir("ftp", mode);
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let mut rng = Rng(0x5eed_f7f0);
    let data: Vec<u8> = (0..300_000).map(|_| rng.next() as u8).collect();
    std::fs::write(root.join("data.bin"), &data).unwrap();
    let port = free_port();
    let config = format!(
        "listen=YES\nlisten_address=127.0.0.1\nlisten_port={port}\nbackground=NO\nanonymous_enable=YES\n\
         anon_root={}\nlocal_enable=NO\nwrite_enable=NO\nseccomp_sandbox=NO\n\
         secure_chroot_dir=/var/run/vsftpd/empty\npasv_enable=YES\nxferlog_enable=NO\n",
        root.display()
    );
    std::fs::write(dir.join("vsftpd.conf"), config).unwrap();
    let server = start_server(Command::new(&vsftpd).arg(dir.join("vsftpd.conf")), &format!("mode={mode}"));
    let listening = listening(port);
    let client = format!(
        "import ftplib, io\n\
         want = open('{}', 'rb').read()\n\
         for _ in range(3):\n\
         \x20   f = ftplib.FTP(); f.connect('127.0.0.1', {port}, timeout=20); f.login()\n\
         \x20   names = f.nlst(); b = io.BytesIO(); f.retrbinary('RETR data.bin', b.write); f.quit()\n\
         \x20   print(names, len(b.getvalue()), 'same' if b.getvalue() == want else 'different')\n",
        root.join("data.bin").display()
    );
    let runs =
        listening.then(|| Command::new(python()).args(["-c", &client]).env_remove("LD_PRELOAD").output().unwrap());
    let log = stop(server);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(listening, "{mode}: vsftpd did not listen:\n{log}");
    let runs = runs.unwrap();
    assert!(runs.status.success(), "{mode}: the client failed: {}\nserver:\n{log}", stderr(&runs));
    let out = stdout(&runs);
    assert_eq!(out.lines().collect::<Vec<_>>(), vec!["['data.bin'] 300000 same"; 3], "{mode}: server:\n{log}");
    assert!(!log.contains("nevermore:"), "{mode}: server:\n{log}");
}

#[test]
fn vsftpd_serves_files() {
    vsftpd_serves_files_in("prevent");
}

#[test]
fn vsftpd_serves_files_detect_mode() {
    vsftpd_serves_files_in("detect");
}

/// chronyd, the NTP daemon, with its seccomp filter (`-F 1`, loaded through libseccomp, which
/// kills the process for any call not on its list) under the library: it keeps running, and
/// allocating, after the filter is in force. Before, it was killed by SIGSYS at the library's
/// next `fallocate`, right after "Loaded seccomp filter".
fn chronyd_runs_under_its_seccomp_filter_in(mode: &str) {
    let chronyd = require("/usr/sbin/chronyd", "chrony");
    assert!(is_root(), "this test starts chronyd, which drops root to its own user");
    let dir = fresh_dir("chrony", mode);
    let conf = dir.join("chrony.conf");
    std::fs::write(&conf, format!("server 127.0.0.1 iburst\ncmdport 0\npidfile {}\n", dir.join("pid").display()))
        .unwrap();
    let mut server = start_server(
        Command::new(&chronyd).args(["-d", "-x", "-F", "1", "-f"]).arg(&conf),
        &format!("mode={mode},verbose=1"),
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    let alive = server.try_wait().unwrap().is_none();
    let log = stop(server);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(alive, "{mode}: chronyd ended:\n{log}");
    let filter = log.find("installs a seccomp filter");
    let loaded = log.find("Loaded seccomp filter");
    assert!(filter.is_some() && loaded.is_some(), "{mode}: the filter was not loaded under the library:\n{log}");
    assert!(!log.contains("nevermore: ERROR"), "{mode}:\n{log}");
}

#[test]
fn chronyd_runs_under_its_seccomp_filter() {
    chronyd_runs_under_its_seccomp_filter_in("prevent");
}

#[test]
fn chronyd_runs_under_its_seccomp_filter_detect_mode() {
    chronyd_runs_under_its_seccomp_filter_in("detect");
}

/// redis under the library (Debian's, built with jemalloc: the library's `malloc` family
/// replaces jemalloc's): a client writes, overwrites and deletes 20 000 values of 1 byte to
/// 300 KB on 5 000 keys, fills and empties a queue, fills a list and a hash, and reads every
/// one back; then redis forks a child that saves the database (`BGSAVE`), and a second server
/// started from that file holds the same data. The first server printed its statistics at
/// exit (it ran under the library) and nothing else of the library's.
fn redis_serves_and_saves_in(mode: &str) {
    let redis = require("/usr/bin/redis-server", "redis-server");
    let dir = fresh_dir("redis", mode);
    let port = free_port();
    let serve = |opts: &str| {
        start_server(
            Command::new(&redis)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--logfile", "", "--dir"])
                .arg(&dir),
            opts,
        )
    };
    let client = |what: &str| {
        Command::new(python())
            .arg(repo_root().join("tests/py/redis_client.py"))
            .args([&port.to_string(), what])
            .env_remove("LD_PRELOAD")
            .output()
            .unwrap()
    };
    let server = serve(&format!("mode={mode},stats=1"));
    let fill = listening(port).then(|| client("fill"));
    let log = stop(server);
    let check = fill.as_ref().map(|_| {
        let server = serve(&format!("mode={mode}"));
        let o = listening(port).then(|| client("check"));
        (o, stop(server))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let fill = fill.unwrap_or_else(|| panic!("{mode}: redis did not listen:\n{log}"));
    assert!(fill.status.success(), "{mode}: the client failed: {}\nserver:\n{log}", stderr(&fill));
    assert_eq!(
        stdout(&fill).lines().collect::<Vec<_>>(),
        ["ok 3399 strings, 20000 list items, 5000 fields", "ok saved"],
        "{mode}: server:\n{log}"
    );
    let (check, log2) = check.unwrap();
    let check = check.unwrap_or_else(|| panic!("{mode}: the second redis did not listen:\n{log2}"));
    assert!(check.status.success(), "{mode}: the check failed: {}\nserver:\n{log2}", stderr(&check));
    assert_eq!(stdout(&check).trim(), "ok 3399 strings, 20000 list items, 5000 fields", "{mode}");
    assert_eq!(log.matches("nevermore stats").count(), 1, "{mode}: server:\n{log}");
    for l in [&log, &log2] {
        assert!(!l.contains("nevermore: ERROR") && !l.contains("nevermore: warning"), "{mode}: server:\n{l}");
    }
}

#[test]
fn redis_serves_and_saves() {
    redis_serves_and_saves_in("prevent");
}

#[test]
fn redis_serves_and_saves_detect_mode() {
    redis_serves_and_saves_in("detect");
}

/// The files the web server tests serve, in `dir`/www (made readable by all): 50 of 10 B to
/// 300 KB, and a text that compresses well.
fn web_files(dir: &Path) -> PathBuf {
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let mut rng = Rng(0x5eed_0819);
    for i in 0..50 {
        let size = [10, 1000, 50_000, 300_000][(rng.next() % 4) as usize];
        let data: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
        std::fs::write(www.join(format!("f{i}.bin")), data).unwrap();
    }
    let text: String = (0..20_000).map(|i| format!("line {i} of a text that compresses well\n")).collect();
    std::fs::write(www.join("text.txt"), text).unwrap();
    // The workers run as `nobody`: the files, and the directories for bodies and locks, must
    // be theirs to read and write.
    let chmod = Command::new("chmod").args(["-R", "a+rwX"]).arg(dir).status().unwrap();
    assert!(chmod.success());
    www
}

/// The web server tests' client (`tests/py/http_client.py`) on `port`, comparing what it
/// receives with the files of `www`; posting bodies to `/echo` unless `posts` is false.
fn http_client(port: u32, www: &Path, posts: bool) -> Output {
    let mut c = Command::new(python());
    c.arg(repo_root().join("tests/py/http_client.py")).arg(port.to_string()).arg(www);
    if !posts {
        c.arg("noposts");
    }
    c.env_remove("LD_PRELOAD").output().unwrap()
}

/// nginx under the library: a master and two worker processes (forked after start-up) serve
/// 50 files of 10 B to 300 KB and a text, some compressed on the way (zlib in the workers),
/// and take posted bodies of up to 200 KB, which they buffer to disk, to four clients on
/// kept-alive connections; every body received is checked against its file. Master and
/// workers printed their statistics at exit (they ran under the library) and nothing else of
/// the library's, and nginx's error log has no alert.
fn nginx_serves_files_in(mode: &str) {
    let nginx = require("/usr/sbin/nginx", "nginx");
    assert!(is_root(), "this test starts nginx, whose master changes its workers' user");
    let dir = fresh_dir("nginx", mode);
    let port = free_port();
    let d = dir.display();
    let config = format!(
        "daemon off;\nmaster_process on;\nworker_processes 2;\nerror_log {d}/error.log info;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         \x20 fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         \x20 gzip on;\n  gzip_types text/plain;\n  gzip_min_length 100;\n\
         \x20 server {{\n    listen 127.0.0.1:{port};\n    root {d}/www;\n    location / {{ }}\n\
         \x20   location /echo {{ return 200 \"$request_method $uri $args\\n\"; }}\n  }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), config).unwrap();
    let www = web_files(&dir);
    let server = start_server(
        Command::new(&nginx).args(["-p"]).arg(&dir).arg("-c").arg(dir.join("nginx.conf")),
        &format!("mode={mode},stats=1"),
    );
    let runs = listening(port).then(|| http_client(port, &www, true));
    let log = stop(server);
    let errors = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let runs = runs.unwrap_or_else(|| panic!("{mode}: nginx did not listen:\n{log}\n{errors}"));
    assert!(runs.status.success(), "{mode}: the client failed: {}\nserver:\n{log}\n{errors}", stderr(&runs));
    assert_eq!(stdout(&runs).trim(), "ok 600 requests, 221 compressed", "{mode}");
    assert_eq!(log.matches("nevermore stats").count(), 3, "{mode}: server:\n{log}");
    assert!(!log.contains("nevermore: ERROR") && !log.contains("nevermore: warning"), "{mode}: server:\n{log}");
    for bad in ["nevermore:", "[alert]", "[emerg]", "[crit]", "exited on signal"] {
        assert!(!errors.contains(bad), "{mode}: nginx's error log:\n{errors}");
    }
}

#[test]
fn nginx_serves_files() {
    nginx_serves_files_in("prevent");
}

#[test]
fn nginx_serves_files_detect_mode() {
    nginx_serves_files_in("detect");
}

/// Apache's httpd under the library, with the event MPM: a parent and two children (forked
/// after start-up), each with eight worker threads and a listener thread, serve the files of
/// the nginx test, compressed on the way by mod_deflate where asked, to four clients on
/// kept-alive connections; every body is checked against its file. Parent and children
/// printed their statistics at exit and nothing else of the library's, and the error log
/// holds no error.
fn apache_serves_files_in(mode: &str) {
    let httpd = require("/usr/sbin/apache2", "apache2");
    assert!(is_root(), "this test starts Apache, whose parent changes its children's user");
    let dir = fresh_dir("apache", mode);
    let port = free_port();
    let (d, m) = (dir.display(), "/usr/lib/apache2/modules");
    let modules: String = [("mpm_event", "mpm_event"), ("authz_core", "authz_core"), ("mime", "mime")]
        .iter()
        .chain(&[("filter", "filter"), ("deflate", "deflate")])
        .map(|(name, file)| format!("LoadModule {name}_module {m}/mod_{file}.so\n"))
        .collect();
    let config = format!(
        "ServerName localhost\nListen 127.0.0.1:{port}\nPidFile {d}/httpd.pid\nErrorLog {d}/error.log\n\
         LogLevel warn\nMutex file:{d} default\nDefaultRuntimeDir {d}\n{modules}\
         TypesConfig /etc/mime.types\nUser nobody\nGroup nogroup\nStartServers 2\nServerLimit 2\n\
         ThreadsPerChild 8\nMaxRequestWorkers 16\nMinSpareThreads 4\nMaxSpareThreads 16\n\
         DocumentRoot {d}/www\n<Directory {d}/www>\n  Require all granted\n</Directory>\n\
         AddOutputFilterByType DEFLATE text/plain application/octet-stream\n"
    );
    std::fs::write(dir.join("httpd.conf"), config).unwrap();
    let www = web_files(&dir);
    let server = start_server(
        Command::new(&httpd).arg("-f").arg(dir.join("httpd.conf")).arg("-DFOREGROUND"),
        &format!("mode={mode},stats=1"),
    );
    let runs = listening(port).then(|| http_client(port, &www, false));
    let log = stop(server);
    let errors = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let runs = runs.unwrap_or_else(|| panic!("{mode}: Apache did not listen:\n{log}\n{errors}"));
    assert!(runs.status.success(), "{mode}: the client failed: {}\nserver:\n{log}\n{errors}", stderr(&runs));
    assert_eq!(stdout(&runs).trim(), "ok 600 requests, 243 compressed", "{mode}");
    assert_eq!(log.matches("nevermore stats").count(), 3, "{mode}: server:\n{log}");
    assert!(!log.contains("nevermore: ERROR") && !log.contains("nevermore: warning"), "{mode}: server:\n{log}");
    for bad in ["nevermore:", ":error]", ":crit]", ":alert]", ":emerg]", "exit signal"] {
        assert!(!errors.contains(bad), "{mode}: Apache's error log:\n{errors}");
    }
}

#[test]
fn apache_serves_files() {
    apache_serves_files_in("prevent");
}

#[test]
fn apache_serves_files_detect_mode() {
    apache_serves_files_in("detect");
}

/// Modules of CPython's own regression tests that lean hardest on malloc or on what the
/// allocator does behind the program's back (signals, fork, mappings, threads).
const CPYTHON_TESTS: &[&str] = &[
    "test_json",
    "test_re",
    "test_dict",
    "test_set",
    "test_collections",
    "test_struct",
    "test_gc",
    "test_weakref",
    "test_zlib",
    "test_mmap",
    "test_ctypes",
    "test_fork1",
    "test_signal",
    "test_faulthandler",
    "test_threading",
    "test_os",
];

/// CPython's regression tests (Debian's `libpython3.11-testsuite`) pass with every object of
/// the interpreter and of its test workers allocated by the library (`PYTHONMALLOC=malloc`).
fn cpython_regression_tests_in(mode: &str) {
    let py = python();
    let probe = run_plain(&py, &["-c", "import test.libregrtest, test.test_json"], &[]);
    assert!(
        probe.status.success(),
        "CPython's test package is missing: install the Debian package `libpython3.11-testsuite` \
         (apt-get install -y libpython3.11-testsuite), or run `bash .ci/run`, which installs it\n{}",
        stderr(&probe)
    );
    let mut args = vec!["-m", "test", "-j2"];
    args.extend_from_slice(CPYTHON_TESTS);
    // `stats=1`, into a file (tests compare their subprocesses' stderr with what they expect):
    // each process's report at exit shows that the library served it.
    let dir = scratch(&format!("cpython-tests-{mode}"));
    let log = dir.join("reports.log");
    let opt = format!("mode={mode}:stats=1:report_path={}", log.display());
    let o = run_preloaded_timeout(&py, &args, &[("PYTHONMALLOC", "malloc"), ("NEVERMORE_OPTIONS", &opt)], 900);
    let (out, err) = (stdout(&o), stderr(&o));
    let reports = std::fs::read_to_string(&log).unwrap_or_default();
    let last: Vec<&str> = out.lines().rev().take(60).collect();
    assert!(
        o.status.success() && out.contains("Tests result: SUCCESS"),
        "{mode}: {:?}\n{}\n{err}",
        o.status,
        last.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    assert!(out.contains(&format!("All {} tests OK.", CPYTHON_TESTS.len())), "{mode}: {out}");
    assert!(!reports.contains("nevermore: ERROR"), "{mode}: {reports}");
    // The main process and every worker (one per module) were served by the library.
    let served = reports.lines().filter(|l| l.ends_with("== nevermore stats")).count();
    assert!(served > CPYTHON_TESTS.len(), "{mode}: {served} processes reported statistics:\n{reports}");
}

#[test]
fn cpython_regression_tests() {
    cpython_regression_tests_in("prevent");
}

#[test]
fn cpython_regression_tests_detect_mode() {
    cpython_regression_tests_in("detect");
}

/// The Rust toolchain's own compiler (not rustup's proxy), which takes its standard library,
/// unwinding included, from shared libraries, and the directory of the target's libraries
/// (the shared standard library among them).
fn real_rustc() -> (PathBuf, PathBuf) {
    let rustc = require("rustc", "rustc");
    let print = |what: &str| {
        let o = Command::new(&rustc).args(["--print", what]).env_remove("LD_PRELOAD").output().expect("run rustc");
        assert_ok(&o);
        PathBuf::from(stdout(&o).trim())
    };
    let real = print("sysroot").join("bin/rustc");
    assert!(real.is_file(), "no {}", real.display());
    (real, print("target-libdir"))
}

const RUST_TYPE_ERROR: &str = "fn main() {\n    let x: u32 = \"text\";\n    println!(\"{x}\");\n}\n";

/// A Rust program linked to the shared standard library (`-C prefer-dynamic`): its panics
/// unwind through the personality routine of `libstd-*.so`.
const RUST_UNWINDS: &str = r#"
fn main() {
    let caught = std::panic::catch_unwind(|| {
        let v: Vec<u64> = (0..10).collect();
        v[std::env::args().count() + 20]
    });
    let joined = std::thread::spawn(|| -> u64 { panic!("in a thread") }).join();
    let sum: u64 = (0..100_000u64).map(|i| i * i % 7).sum();
    println!("caught {} joined {} sum {sum}", caught.is_err(), joined.is_err());
}
"#;

/// Panics that unwind work under the library: rustc, which reports a compile error by
/// unwinding to its driver (`librustc_driver.so` holds its unwinding's personality routine),
/// exits with status 1 and the error, as without the library; and a program built against the
/// shared standard library catches a panic and joins a panicked thread. (The library once
/// exported a personality routine of its own, which took the place of theirs: both aborted
/// with "failed to initiate panic".)
fn rust_panics_unwind_in(mode: &str) {
    let (rustc, libdir) = real_rustc();
    let dir = scratch(&format!("rustc-{mode}"));
    let bad = dir.join("bad.rs");
    std::fs::write(&bad, RUST_TYPE_ERROR).unwrap();
    let out = dir.join("bad");
    let args = ["--edition", "2021", "-o", out.to_str().unwrap(), bad.to_str().unwrap()];
    // rustc runs as the tests' own user, not through `program`: a toolchain installed by
    // rustup lives in a home directory that `nobody` cannot enter.
    let rustc_under = |args: &[&str]| {
        Command::new(&rustc)
            .args(args)
            .env("LD_PRELOAD", lib_path())
            .env("NEVERMORE_OPTIONS", format!("mode={mode}"))
            .output()
            .expect("run rustc")
    };
    let plain = Command::new(&rustc).args(args).env_remove("LD_PRELOAD").output().expect("run rustc");
    assert_eq!(plain.status.code(), Some(1), "rustc without the library: {}", stderr(&plain));
    let o = rustc_under(&args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{mode}: rustc on a type error: {:?}\n{err}", o.status);
    assert!(err.contains("error[E0308]: mismatched types"), "{mode}: {err}");
    assert!(!err.contains("panic") && !err.contains("nevermore:"), "{mode}: {err}");

    let good = dir.join("unwinds.rs");
    std::fs::write(&good, RUST_UNWINDS).unwrap();
    let exe = dir.join("unwinds");
    let o = rustc_under(&[
        "--edition",
        "2021",
        "-C",
        "prefer-dynamic",
        "-o",
        exe.to_str().unwrap(),
        good.to_str().unwrap(),
    ]);
    assert_ok_preloaded(&o);
    // The shared standard library, next to the program (where `nobody` can read it too).
    for e in std::fs::read_dir(&libdir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if name.starts_with("libstd-") && name.ends_with(".so") {
            std::fs::copy(&p, dir.join(&name)).unwrap();
        }
    }
    let env = [("LD_LIBRARY_PATH", dir.to_str().unwrap())];
    let plain = run_plain(&exe, &[], &env);
    let under = run_mode(mode, &exe, &[], &env);
    assert_ok_preloaded(&under);
    assert_same_output(&under, &plain, "a program on the shared standard library");
    assert!(stdout(&under).starts_with("caught true joined true sum "), "{mode}: {}", stdout(&under));
}

#[test]
fn rust_panics_unwind() {
    rust_panics_unwind_in("prevent");
}

#[test]
fn rust_panics_unwind_detect_mode() {
    rust_panics_unwind_in("detect");
}

/// A Java program: null pointers caught as exceptions (the JVM's implicit null checks are
/// SIGSEGV handlers, which the library must chain to), a stack overflow caught (guard pages,
/// SIGSEGV on the thread's stack), and a pool of 8 threads filling and clearing hash maps.
const JAVA_PROGRAM: &str = r#"
import java.util.*;
import java.util.concurrent.*;
public class Churn {
    static int touch(Object o) { return o.hashCode(); }
    static int deep(int n) { return deep(n + 1) + 1; }
    public static void main(String[] a) throws Exception {
        int caught = 0;
        for (int i = 0; i < 100000; i++) {
            try { touch(i % 2 == 0 ? null : "x"); } catch (NullPointerException e) { caught++; }
        }
        int overflowed = 0;
        try { deep(0); } catch (StackOverflowError e) { overflowed = 1; }
        ExecutorService pool = Executors.newFixedThreadPool(8);
        List<Future<Long>> parts = new ArrayList<>();
        for (int t = 0; t < 16; t++) {
            final int k = t;
            parts.add(pool.submit(() -> {
                Map<Integer, String> m = new HashMap<>();
                long s = 0;
                for (int i = 0; i < 200000; i++) {
                    m.put(i, "v" + i);
                    if (m.size() > 1000) m.clear();
                    s += i ^ k;
                }
                return s;
            }));
        }
        long total = 0;
        for (Future<Long> f : parts) total += f.get();
        pool.shutdown();
        System.out.println("npe " + caught + " overflow " + overflowed + " total " + total);
    }
}
"#;

/// The JVM under the library (its own heap is not malloc's, but its threads, JIT compilers
/// and class loading are): the program's output matches the plain run and the values
/// computed here, in both modes.
fn java_in(mode: &str) {
    let javac = require("javac", "openjdk-17-jdk-headless");
    let java = require("java", "openjdk-17-jdk-headless");
    let dir = scratch(&format!("java-{mode}"));
    let src = dir.join("Churn.java");
    std::fs::write(&src, JAVA_PROGRAM).unwrap();
    let o = run_plain(&javac, &["-d", dir.to_str().unwrap(), src.to_str().unwrap()], &[]);
    assert_ok(&o);
    let args = ["-XX:-UsePerfData", "-cp", dir.to_str().unwrap(), "Churn"];
    let total: u64 = (0..16u64).map(|k| (0..200_000u64).map(|i| i ^ k).sum::<u64>()).sum();
    let want = format!("npe 50000 overflow 1 total {total}\n");
    let plain = run_plain(&java, &args, &[]);
    assert_eq!(stdout(&plain), want, "java without the library: {}", stderr(&plain));
    same_output_under_the_library(&java, &args, mode, &want);
}

/// `prog args` under the library in `mode`: exits 0, prints `want`, reports nothing, and the
/// library served the process (over 1000 allocations in its statistics).
fn same_output_under_the_library(prog: &Path, args: &[&str], mode: &str, want: &str) {
    let opts = format!("mode={mode}:stats=1");
    let under = run_preloaded(prog, args, &[("NEVERMORE_OPTIONS", opts.as_str())]);
    assert_ok_preloaded(&under);
    assert_eq!(stdout(&under), want, "{mode}: {}", stderr(&under));
    let err = stderr(&under);
    assert!(!err.contains("nevermore: ERROR"), "{mode}: {err}");
    assert!(counter(&err, "allocations") > 1000, "{mode}: the library served few allocations:\n{err}");
}

#[test]
fn java_exceptions_threads_and_jit() {
    java_in("prevent");
}

#[test]
fn java_exceptions_threads_and_jit_detect_mode() {
    java_in("detect");
}

/// A PHP script that goes through the extensions PHP opens with `RTLD_DEEPBIND` (tokenizer,
/// phar, PDO) and through PHP's own allocator.
const PHP_PROGRAM: &str = r#"
$tokens = token_get_all('<?php $a = [1, 2, 3]; echo array_sum($a) * 7; ?>');
$names = [];
foreach ($tokens as $t) { if (is_array($t)) { $names[] = token_name($t[0]); } }
echo count($tokens), " ", implode(",", array_unique($names)), "\n";
echo class_exists('Phar') ? "phar " : "no-phar ", count(PDO::getAvailableDrivers()) >= 0 ? "pdo\n" : "\n";
$m = [];
for ($i = 0; $i < 200000; $i++) { $m["k$i"] = str_repeat(chr(65 + $i % 26), $i % 50); }
$sum = 0;
foreach ($m as $k => $v) { $sum += strlen($v); }
echo $sum, "\n";
"#;

/// PHP opens its extensions with `RTLD_DEEPBIND`, which made them free the library's objects
/// with the C library's `free` (`php` aborted at start-up with `free(): invalid pointer`):
/// the output matches the plain run's, in both modes, and the library served the process.
fn php_in(mode: &str) {
    let php = require("php", "php-cli");
    let args = ["-r", PHP_PROGRAM];
    let plain = run_plain(&php, &args, &[]);
    assert_ok(&plain);
    let sum: u64 = (0..200_000u64).map(|i| i % 50).sum();
    assert!(stdout(&plain).ends_with(&format!("phar pdo\n{sum}\n")), "php without the library: {}", stdout(&plain));
    same_output_under_the_library(&php, &args, mode, &stdout(&plain));
}

#[test]
fn php_with_extensions_opened_deepbind() {
    php_in("prevent");
}

#[test]
fn php_with_extensions_opened_deepbind_detect_mode() {
    php_in("detect");
}
