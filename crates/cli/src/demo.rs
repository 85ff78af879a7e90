//! `nevermore demo`: compiles a small use-after-free exploit (a function pointer hijacked
//! through a dangling pointer) and runs it under glibc, where it wins, and under nevermore's
//! detect and prevent modes, where it is stopped; prints the symbolized reports and a table.

use std::ffi::OsString;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::symbolize::Symbolizer;
use crate::DETECTED_STATUS;

const SOURCE: &str = include_str!("demo_uaf.c");

struct Row {
    name: &'static str,
    outcome: String,
}

pub fn run(lib: &Path) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("nevermore-demo-{}", std::process::id()));
    fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let result = demo(lib, &dir);
    let _ = fs::remove_dir_all(&dir);
    result
}

fn demo(lib: &Path, dir: &Path) -> Result<()> {
    let src = dir.join("uaf_fnptr_demo.c");
    let exe = dir.join("uaf_fnptr_demo");
    fs::write(&src, SOURCE)?;
    let cc = std::env::var_os("CC").unwrap_or_else(|| OsString::from("cc"));
    let out = match Command::new(&cc).args(["-g", "-O0", "-fno-omit-frame-pointer", "-o"]).arg(&exe).arg(&src).output()
    {
        Ok(o) => o,
        Err(e) => bail!(
            "nevermore demo needs a C compiler: running {} failed ({e}); install one (e.g. apt-get install gcc) or set CC",
            cc.to_string_lossy()
        ),
    };
    if !out.status.success() {
        bail!("compiling the demo failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    println!("nevermore demo: a use-after-free that hijacks a function pointer");
    println!("(source: {} lines of C, compiled with {})\n", SOURCE.lines().count(), cc.to_string_lossy());

    let mut rows = Vec::new();
    let mut sym = Symbolizer::new();
    for (name, mode) in
        [("glibc malloc", None), ("nevermore detect", Some("detect")), ("nevermore prevent", Some("prevent"))]
    {
        println!("== {name} ==");
        let raw = dir.join(format!("report-{}.raw", mode.unwrap_or("glibc")));
        let mut cmd = Command::new(&exe);
        cmd.env_remove("NEVERMORE_OPTIONS").env_remove("LD_PRELOAD");
        if let Some(m) = mode {
            cmd.env("LD_PRELOAD", lib)
                .env("NEVERMORE_OPTIONS", format!("mode={m}:exitcode={DETECTED_STATUS}:report_path={}", raw.display()));
        }
        let o = cmd.output().context("run the demo program")?;
        let stdout = String::from_utf8_lossy(&o.stdout);
        for l in stdout.lines() {
            println!("  program: {l}");
        }
        let report = fs::read_to_string(&raw).unwrap_or_default();
        for l in report.lines() {
            println!("{}", sym.line(l));
        }
        let won = stdout.contains("WIN:");
        let outcome = if won {
            "EXPLOITED: the hijacked pointer was called".to_string()
        } else if let Some(kind) = report.lines().find_map(|l| l.split("nevermore: ERROR: ").nth(1)) {
            let kind = kind.split(' ').next().unwrap_or("error");
            format!("stopped: {kind} reported (exit {})", status_text(&o.status))
        } else if stdout.contains("no hijack") {
            format!("stopped: the dangling write never reached the new object (exit {})", status_text(&o.status))
        } else {
            format!("stopped (exit {})", status_text(&o.status))
        };
        println!("  => {outcome}\n");
        rows.push(Row { name, outcome });
    }
    let w = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    println!("{:w$}  outcome", "allocator");
    println!("{:-<w$}  {:-<60}", "", "");
    for r in &rows {
        println!("{:w$}  {}", r.name, r.outcome);
    }
    Ok(())
}

fn status_text(s: &std::process::ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => c.to_string(),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "?".into(),
    }
}
