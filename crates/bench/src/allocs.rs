//! The allocators to compare: found on this system, given with `--lib`, or built from this
//! workspace (nevermore).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One allocator: how a program is started under it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocator {
    pub name: String,
    /// The library to `LD_PRELOAD` (none for glibc).
    pub preload: Option<PathBuf>,
    /// Extra environment (`MALLOC_CHECK_`, `NEVERMORE_OPTIONS`).
    pub env: Vec<(String, String)>,
}

impl Allocator {
    pub fn glibc() -> Allocator {
        Allocator { name: "glibc".into(), preload: None, env: vec![] }
    }

    /// Sets up `cmd` to run under this allocator, with `preload` in place of the allocator's
    /// library when given (the glibc shim for programs linked against another allocator).
    pub fn apply(&self, cmd: &mut Command, preload: Option<&Path>) {
        for var in ENV_CLEARED {
            cmd.env_remove(var);
        }
        if let Some(p) = preload.or(self.preload.as_deref()) {
            cmd.env("LD_PRELOAD", p);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
    }
}

/// Variables that would change the allocator under test; removed from every child.
pub const ENV_CLEARED: &[&str] =
    &["LD_PRELOAD", "MALLOC_CHECK_", "NEVERMORE_OPTIONS", "MALLOC_CONF", "MIMALLOC_OPTIONS"];

/// The allocators known by name, in table order.
pub const KNOWN: &[&str] =
    &["glibc", "glibc-debug", "jemalloc", "tcmalloc", "mimalloc", "scudo", "nevermore-detect", "nevermore-prevent"];

const LIB_DIRS: &[&str] =
    &["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/lib", "/usr/lib"];

fn find_lib(names: &[&str]) -> Option<PathBuf> {
    LIB_DIRS.iter().flat_map(|d| names.iter().map(move |n| Path::new(d).join(n))).find(|p| p.is_file())
}

/// Debian's clang runtime: `/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-x86_64.so`
/// (the newest), or a plain `libscudo.so`.
fn find_scudo() -> Option<PathBuf> {
    let mut found = vec![];
    for llvm in read_dir_sorted(Path::new("/usr/lib")).into_iter().filter(|p| name_of(p).starts_with("llvm-")) {
        for ver in read_dir_sorted(&llvm.join("lib/clang")) {
            let p = ver.join("lib/linux/libclang_rt.scudo_standalone-x86_64.so");
            if p.is_file() {
                found.push(p);
            }
        }
    }
    found.sort_by_key(|p| version_key(&p.to_string_lossy()));
    found.pop().or_else(|| find_lib(&["libscudo.so", "libscudo-standalone.so"]))
}

fn name_of(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn read_dir_sorted(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    v.sort();
    v
}

/// Orders paths by the numbers in them ("llvm-9" < "llvm-14").
fn version_key(s: &str) -> Vec<u64> {
    s.split(|c: char| !c.is_ascii_digit()).filter(|t| !t.is_empty()).filter_map(|t| t.parse().ok()).collect()
}

/// Runs `/bin/true` under the allocator: `Ok(stderr)` if it loads and exits 0.
fn probe(a: &Allocator) -> Result<String, String> {
    let mut cmd = Command::new("/bin/true");
    a.apply(&mut cmd, None);
    let out = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).output();
    let out = out.map_err(|e| format!("cannot run /bin/true: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if !out.status.success() || err.contains("cannot be preloaded") {
        let first = err.lines().next().unwrap_or("").to_string();
        return Err(format!(
            "/bin/true under it failed ({}){}",
            out.status,
            if first.is_empty() { first } else { format!(": {first}") }
        ));
    }
    Ok(err)
}

/// Where nevermore comes from.
pub enum NevermoreSource {
    /// `--nevermore PATH`.
    Path(PathBuf),
    /// Build it with `cargo build --release -p nevermore` in this workspace.
    Build,
}

/// Builds the library from the workspace this binary was built from, into the target
/// directory that holds this binary, and returns its path.
fn build_nevermore() -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !root.join("crates/nevermore/Cargo.toml").is_file() {
        return Err(format!("workspace not found at {}; pass --nevermore PATH", root.display()));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // <target>/<profile>/nevermore-bench
    let target =
        exe.parent().and_then(Path::parent).map(Path::to_path_buf).ok_or("cannot locate the target directory")?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "--release", "-q", "-p", "nevermore"])
        .current_dir(&root)
        .env("CARGO_TARGET_DIR", &target)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("cargo build --release -p nevermore failed: {}", err.lines().last().unwrap_or("")));
    }
    let lib = target.join("release/libnevermore.so");
    if lib.is_file() {
        Ok(lib)
    } else {
        Err(format!("{} not found after the build", lib.display()))
    }
}

/// The selected allocators that exist here, glibc first. Everything skipped is said in
/// `notices`, one line each.
pub fn resolve(
    selection: Option<&[String]>,
    libs: &[(String, PathBuf)],
    nevermore: NevermoreSource,
    notices: &mut Vec<String>,
) -> Vec<Allocator> {
    let mut wanted: Vec<String> = match selection {
        Some(s) => s.iter().map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect(),
        None => KNOWN.iter().map(|s| s.to_string()).collect(),
    };
    // "nevermore" selects both modes.
    if let Some(i) = wanted.iter().position(|w| w == "nevermore") {
        wanted.splice(i..=i, ["nevermore-detect".to_string(), "nevermore-prevent".to_string()]);
    }
    if !wanted.iter().any(|w| w == "glibc") {
        notices.push("glibc is the baseline of every ratio: running it too".into());
        wanted.insert(0, "glibc".into());
    }
    let mut out: Vec<Allocator> = vec![];
    let mut nevermore_lib: Option<Result<(PathBuf, bool), String>> = None;
    let mut seen = std::collections::HashSet::new();
    for w in wanted {
        if !seen.insert(w.clone()) {
            continue;
        }
        let found = |names: &[&str]| find_lib(names).ok_or_else(|| format!("{} not found", names.join(" or ")));
        let a: Result<Allocator, String> = match w.as_str() {
            "glibc" => Ok(Allocator::glibc()),
            "glibc-debug" => found(&["libc_malloc_debug.so.0"]).map(|p| Allocator {
                name: w.clone(),
                preload: Some(p),
                env: vec![("MALLOC_CHECK_".into(), "3".into())],
            }),
            "jemalloc" => found(&["libjemalloc.so.2", "libjemalloc.so"]).map(|p| Allocator {
                name: w.clone(),
                preload: Some(p),
                env: vec![],
            }),
            "tcmalloc" => found(&["libtcmalloc_minimal.so.4", "libtcmalloc.so.4"]).map(|p| Allocator {
                name: w.clone(),
                preload: Some(p),
                env: vec![],
            }),
            "mimalloc" => found(&["libmimalloc.so.2", "libmimalloc.so"]).map(|p| Allocator {
                name: w.clone(),
                preload: Some(p),
                env: vec![],
            }),
            "scudo" => find_scudo()
                .ok_or_else(|| {
                    "libclang_rt.scudo_standalone-x86_64.so not found (apt-get install libclang-rt-14-dev)".into()
                })
                .map(|p| Allocator { name: w.clone(), preload: Some(p), env: vec![] }),
            "nevermore-detect" | "nevermore-prevent" => {
                let lib = nevermore_lib
                    .get_or_insert_with(|| {
                        let path = match &nevermore {
                            NevermoreSource::Path(p) if p.is_file() => Ok(p.clone()),
                            NevermoreSource::Path(p) => Err(format!("{} not found", p.display())),
                            NevermoreSource::Build => build_nevermore(),
                        }?;
                        let plain = Allocator { name: "nevermore".into(), preload: Some(path.clone()), env: vec![] };
                        probe(&plain)?;
                        let mut detect = plain.clone();
                        detect.env.push(("NEVERMORE_OPTIONS".into(), "mode=detect".into()));
                        let has_modes = match probe(&detect) {
                            Ok(_) => true,
                            Err(e) if e.contains("unknown option 'mode'") => false,
                            Err(e) => return Err(e),
                        };
                        Ok((path, has_modes))
                    })
                    .clone();
                match lib {
                    Ok((path, true)) => Ok(Allocator {
                        name: w.clone(),
                        preload: Some(path),
                        env: vec![("NEVERMORE_OPTIONS".into(), format!("mode={}", &w["nevermore-".len()..]))],
                    }),
                    Ok((path, false)) => {
                        if out.iter().any(|a| a.name == "nevermore") {
                            continue;
                        }
                        notices.push(format!(
                            "{} does not accept NEVERMORE_OPTIONS=mode= yet: benchmarking one `nevermore` allocator without a mode",
                            path.display()
                        ));
                        Ok(Allocator { name: "nevermore".into(), preload: Some(path), env: vec![] })
                    }
                    Err(e) => Err(e),
                }
            }
            _ => Err(format!("unknown allocator (known: {}; add others with --lib NAME=PATH.so)", KNOWN.join(", "))),
        };
        let a = a.and_then(|a| if a.preload.is_some() { probe(&a).map(|_| a) } else { Ok(a) });
        match a {
            Ok(a) => out.push(a),
            Err(e) => notices.push(format!("skipping allocator {w}: {e}")),
        }
    }
    for (name, path) in libs {
        if out.iter().any(|a| &a.name == name) {
            notices.push(format!("skipping --lib {name}: an allocator of that name is already selected"));
            continue;
        }
        let a = Allocator { name: name.clone(), preload: Some(path.clone()), env: vec![] };
        let r = if path.is_file() { probe(&a) } else { Err(format!("{} not found", path.display())) };
        match r {
            Ok(_) => out.push(a),
            Err(e) => notices.push(format!("skipping allocator {name}: {e}")),
        }
    }
    out
}

/// Parses `NAME=PATH` of `--lib`.
pub fn parse_lib(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((n, p)) if !n.trim().is_empty() && !p.trim().is_empty() => {
            Ok((n.trim().to_string(), PathBuf::from(p.trim())))
        }
        _ => Err(format!("expected NAME=PATH.so, got {s:?}")),
    }
}

/// The absolute path of a library to preload. Programs run in their own directories, where a
/// relative `LD_PRELOAD` finds nothing: the loader says so on their stderr and they run on
/// glibc, which would then be measured under the library's name.
pub fn absolute_lib(p: &Path) -> Result<PathBuf, String> {
    std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_are_preloaded_by_absolute_path() {
        let got = absolute_lib(Path::new("target/release/libx.so")).unwrap();
        assert_eq!(got, std::env::current_dir().unwrap().join("target/release/libx.so"));
        assert_eq!(absolute_lib(Path::new("/x/liby.so")), Ok(PathBuf::from("/x/liby.so")));
    }

    #[test]
    fn lib_argument() {
        assert_eq!(parse_lib("ff=/x/libff.so"), Ok(("ff".to_string(), PathBuf::from("/x/libff.so"))));
        assert!(parse_lib("nopath").is_err());
        assert!(parse_lib("=x").is_err());
    }

    #[test]
    fn versions_order_numerically() {
        assert!(version_key("/usr/lib/llvm-9/x") < version_key("/usr/lib/llvm-14/x"));
    }

    #[test]
    fn unknown_and_missing_are_noticed() {
        let mut notices = vec![];
        let sel = vec!["nonexistent".to_string()];
        let libs = vec![("fake".to_string(), PathBuf::from("/nonexistent.so"))];
        let got = resolve(Some(&sel), &libs, NevermoreSource::Build, &mut notices);
        assert_eq!(got, vec![Allocator::glibc()]);
        assert!(notices.iter().any(|n| n.contains("skipping allocator nonexistent: unknown allocator")), "{notices:?}");
        assert!(
            notices.iter().any(|n| n.contains("skipping allocator fake: /nonexistent.so not found")),
            "{notices:?}"
        );
    }
}
