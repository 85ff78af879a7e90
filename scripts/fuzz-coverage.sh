#!/usr/bin/env bash
# Coverage-guided fuzzing of the allocator API with libFuzzer (docs/robustness.md). Usage:
#   scripts/fuzz-coverage.sh MODE SECONDS [libFuzzer arguments...]
#   scripts/fuzz-coverage.sh --build-only
# MODE is prevent or detect. Builds fuzz/ (the target alloc_api, nevermore linked in statically)
# on stable Rust with the instrumentation flags cargo-fuzz uses for `--sanitizer none`, then
# fuzzes for SECONDS with the corpus in fuzz/corpus/alloc_api-MODE and crash artifacts in
# fuzz/artifacts/alloc_api/. Exit status 0 when libFuzzer finished without finding anything.
# The binary goes to $FUZZ_TARGET_DIR (default target/fuzz)/<host triple>/release/alloc_api;
# --build-only prints its path.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$ROOT/target/fuzz}
# The flags of `cargo fuzz build -s none` (inline 8-bit counters, PC table, comparison tracing),
# plus -rdynamic: nevermore's malloc/free/... must be in the dynamic symbol table so that
# libc's and libstdc++'s own calls reach it too (the harness checks this at start-up).
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks \
-Cforce-frame-pointers=yes -Clink-arg=-rdynamic"
unset CARGO_ENCODED_RUSTFLAGS
# An explicit --target keeps RUSTFLAGS away from build scripts (they are not linked with libFuzzer).
TARGET=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release --manifest-path fuzz/Cargo.toml --target "$TARGET" --bin alloc_api >&2
BIN=$CARGO_TARGET_DIR/$TARGET/release/alloc_api
[ "${1:-}" = --build-only ] && { echo "$BIN"; exit 0; }

MODE=${1:?usage: $0 prevent|detect SECONDS [libFuzzer args]}
SECS=${2:?usage: $0 prevent|detect SECONDS [libFuzzer args]}
shift 2
case $MODE in prevent | detect) ;; *) echo "mode must be prevent or detect" >&2; exit 64 ;; esac
CORPUS=fuzz/corpus/alloc_api-$MODE
ARTIFACTS=fuzz/artifacts/alloc_api
mkdir -p "$CORPUS" "$ARTIFACTS"
# A report of the allocator in the fuzzing process kills it with SIGABRT, past libFuzzer's
# crash handler: the harness keeps the input being run here, and it is saved below.
LAST=$ARTIFACTS/last-input-$MODE
set +e
NEVERMORE_OPTIONS=mode=$MODE ALLOC_API_SAVE_INPUT=$LAST "$BIN" "$CORPUS" fuzz/seeds/alloc_api \
    -max_total_time="$SECS" -rss_limit_mb=0 -malloc_limit_mb=0 -print_final_stats=1 \
    -artifact_prefix="$ARTIFACTS/" "$@"
rc=$?
set -e
if [ $rc -ne 0 ] && [ -s "$LAST" ]; then
    keep=$ARTIFACTS/died-$MODE-$(sha1sum "$LAST" | cut -c1-16)
    cp "$LAST" "$keep"
    echo "fuzzing ended with status $rc; the input being run is in $keep" >&2
    echo "reproduce: NEVERMORE_OPTIONS=mode=$MODE $BIN $keep" >&2
fi
rm -f "$LAST"
exit $rc
