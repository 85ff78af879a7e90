//! Builds `libnevermore.so` (workspace member `crates/nevermore`) with a nested cargo, so that
//! the command can embed it. Emits `NEVERMORE_LIB_PATH` (the built file) and `NEVERMORE_LIB_HASH`
//! (a hex hash of its bytes, naming the extraction directory).

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir.join("../..").canonicalize().expect("workspace root");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let target_dir = out_dir.join("lib-target");

    for p in ["crates/nevermore", "crates/nevermore/Cargo.toml", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", workspace.join(p).display());
    }

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "-p", "nevermore", "--manifest-path"])
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    // Variables set by the outer cargo for this build script (or for the whole outer build) that
    // would leak into the nested build. CARGO_MAKEFLAGS stays: it shares the jobserver.
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let confusing = ["CARGO_PKG_", "CARGO_CFG_", "CARGO_MANIFEST_", "CARGO_FEATURE_"]
            .iter()
            .any(|prefix| key.starts_with(prefix))
            || matches!(
                key,
                "CARGO_TARGET_DIR"
                    | "CARGO_BUILD_TARGET"
                    | "CARGO_BUILD_TARGET_DIR"
                    | "CARGO_ENCODED_RUSTFLAGS"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_CRATE_NAME"
                    | "RUSTC_WORKSPACE_WRAPPER"
                    | "OUT_DIR"
                    | "TARGET"
                    | "HOST"
                    | "PROFILE"
                    | "OPT_LEVEL"
                    | "DEBUG"
                    | "NUM_JOBS"
            );
        if confusing {
            cmd.env_remove(key);
        }
    }

    let out = cmd.output().expect("spawn the nested cargo");
    if !out.status.success() {
        panic!("building libnevermore.so failed ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    }

    let lib = target_dir.join("release/libnevermore.so");
    let bytes = std::fs::read(&lib).unwrap_or_else(|e| panic!("read {}: {e}", lib.display()));
    println!("cargo:rustc-env=NEVERMORE_LIB_PATH={}", lib.display());
    println!("cargo:rustc-env=NEVERMORE_LIB_HASH={:032x}", fnv1a_128(&bytes));
}

/// FNV-1a, 128-bit: a stable name for these bytes (not a security measure).
fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013b;
    bytes.iter().fold(OFFSET, |h, &b| (h ^ b as u128).wrapping_mul(PRIME))
}
