#!/usr/bin/env bash
# Long run of the differential fuzzer (docs/robustness.md). Usage:
#   scripts/fuzz-long.sh [SEEDS] [OPS]      (defaults: 200 seeds of 50000 operations)
# Builds the library and tests/c/fuzz.c, then for each seed and both modes: runs the sequence
# under nevermore and under glibc and compares the outcome digests; then injects each misuse at
# a seed-dependent operation in a fresh process and checks the report kind. Stops at the first
# failure, printing the command that reproduces it.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${1:-200}
OPS=${2:-50000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --release -p nevermore >/dev/null
LIB=$PWD/$CARGO_TARGET_DIR/release/libnevermore.so
[ -f "$LIB" ] || LIB=$CARGO_TARGET_DIR/release/libnevermore.so
BIN=$(mktemp -d)/fuzz
cc -O1 -g -o "$BIN" tests/c/fuzz.c
fail() { echo "FAILED: $*"; exit 1; }
for ((s = 1; s <= SEEDS; s++)); do
    want=$("$BIN" "$s" "$OPS" | grep DIGEST) || fail "$BIN $s $OPS (glibc)"
    for mode in prevent detect; do
        got=$(NEVERMORE_OPTIONS=mode=$mode LD_PRELOAD=$LIB timeout 600 "$BIN" "$s" "$OPS" 2>&1) ||
            fail "NEVERMORE_OPTIONS=mode=$mode LD_PRELOAD=$LIB $BIN $s $OPS: $got"
        grep -q nevermore: <<<"$got" && fail "unexpected report: mode=$mode seed $s: $got"
        [ "$(grep DIGEST <<<"$got")" = "$want" ] || fail "digest differs from glibc: mode=$mode seed $s"
        kinds="double-free:double-free interior-free:invalid-free overflow:heap-buffer-overflow"
        [ $mode = detect ] && kinds="$kinds uaf:heap-use-after-free"
        for kv in $kinds; do
            k=${kv%%:*} expect=${kv#*:} at=$(( (s * 7919) % 3000 + 10 ))
            out=$(NEVERMORE_OPTIONS=mode=$mode LD_PRELOAD=$LIB timeout 600 "$BIN" "$s" 4000 "$k" "$at" 2>&1 || true)
            [ "$(grep -c 'nevermore: ERROR:' <<<"$out")" = 1 ] && grep -q "nevermore: ERROR: $expect " <<<"$out" ||
                fail "NEVERMORE_OPTIONS=mode=$mode LD_PRELOAD=$LIB $BIN $s 4000 $k $at: $out"
        done
    done
    echo "seed $s ok"
done
echo "all $SEEDS seeds ok"
