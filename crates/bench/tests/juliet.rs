//! `bench/juliet.py` on a small tree laid out like a Juliet build (`CWE<N>/bad`, `CWE<N>/good`),
//! under glibc only (needs `cc` and `python3`): what counts as stopped, as a false positive and
//! as a timeout, the inputs the cases get, and the cases that are skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `src` into `dir/name`.
fn program(dir: &Path, name: &str, src: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let o = Command::new("cc").arg("-o").arg(dir.join(name)).arg(&c).output().expect("run cc");
    assert!(o.status.success(), "cc {name}: {}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_file(&c).unwrap();
}

const DOUBLE_FREE: &str =
    "#include <stdlib.h>\nint main(void) { char *volatile p = malloc(24); free(p); free(p); return 0; }\n";
const CLEAN: &str = "#include <stdlib.h>\nint main(void) { free(malloc(24)); return 0; }\n";
/// Fails (as a detected flaw would) only when standard input, ADD and /tmp/file.txt all hold 64.
const NEEDS_INPUT: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
    char a[16] = "", b[16] = "";
    FILE *f = fopen("/tmp/file.txt", "r");
    int ok = fgets(a, sizeof a, stdin) && atoi(a) == 64 && getenv("ADD") && atoi(getenv("ADD")) == 64
        && f && fgets(b, sizeof b, f) && atoi(b) == 64;
    return ok ? 1 : 0;
}
"#;
const SLOW: &str = "#include <unistd.h>\nint main(void) { sleep(30); return 1; }\n";

#[test]
fn juliet_runner_counts_stopped_cases_and_false_positives() {
    assert!(
        !Path::new("/tmp/file.txt").exists(),
        "/tmp/file.txt exists: the runner leaves an existing file alone, so this test cannot tell what the cases read; remove it"
    );
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("juliet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let bad = root.join("CWE415/bad");
    let good = root.join("CWE415/good");
    program(&bad, "CWE415_Double_Free__malloc_free_char_01-bad", DOUBLE_FREE);
    program(&good, "CWE415_Double_Free__malloc_free_char_01-good", CLEAN);
    program(&bad, "CWE415_Double_Free__input_01-bad", NEEDS_INPUT);
    program(&good, "CWE415_Double_Free__input_01-good", CLEAN);
    program(&bad, "CWE415_Double_Free__slow_01-bad", SLOW);
    // Skipped: random flow variant and listen_socket (they would be counted stopped otherwise).
    program(&bad, "CWE415_Double_Free__malloc_free_char_12-bad", DOUBLE_FREE);
    program(&bad, "CWE415_Double_Free__char_listen_socket_01-bad", DOUBLE_FREE);
    // A good case that fails: a false positive.
    program(&root.join("CWE416/good"), "CWE416_Use_After_Free__x_01-good", DOUBLE_FREE);

    let csv = root.join("out.csv");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/juliet.py");
    let o = Command::new("python3")
        .arg(&script)
        .arg(&root)
        .args(["--only", "glibc", "--timeout", "2", "--jobs", "2", "--csv"])
        .arg(&csv)
        .output()
        .expect("run python3 bench/juliet.py");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", o.status);

    assert!(
        stdout.contains("6 executables, 2 s limit; 2 executables of listen_socket and flow variant 12 skipped"),
        "{stdout}"
    );
    // Of the three bad CWE 415 cases, the slow one times out and is not counted; the double free
    // (glibc aborts) and the case that got its inputs are stopped.
    assert!(stdout.contains("| CWE415 stopped (bad) | 2 | 2/2 |"), "{stdout}");
    assert!(stdout.contains("| CWE415 false positives (good) | 2 | 0/2 |"), "{stdout}");
    assert!(stdout.contains("| CWE416 false positives (good) | 1 | 1/1 |"), "{stdout}");
    assert!(stdout.contains("| all stopped (bad) | 2 | 2/2 |"), "{stdout}");

    let rows = std::fs::read_to_string(&csv).expect("the CSV");
    assert!(rows.contains("CWE415,bad,CWE415_Double_Free__slow_01-bad,glibc,timeout"), "{rows}");
    assert!(rows.contains("CWE415,bad,CWE415_Double_Free__input_01-bad,glibc,stopped"), "{rows}");
    assert!(!rows.contains("_12-bad") && !rows.contains("listen_socket"), "{rows}");
    assert!(!Path::new("/tmp/file.txt").exists(), "the runner removes the input file it made");
    let _ = std::fs::remove_dir_all(&root);
}
