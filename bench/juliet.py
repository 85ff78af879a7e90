#!/usr/bin/env python3
"""Runs the memory-safety test cases of the Juliet Test Suite for C/C++ (NIST SARD, v1.3) under
several allocators and prints how many of the flawed ("bad") cases each one stops, and how many
correct ("good") cases it wrongly stops.

Juliet is not part of this repository. Build it outside, for example from the copy with a
per-test build system at github.com/arichardson/juliet-test-suite-c:

    git clone https://github.com/arichardson/juliet-test-suite-c /tmp/juliet
    cd /tmp/juliet && python3 juliet.py -g -m -k 415 416 761 590 122

which leaves one executable per test case in bin/CWE<N>/bad and bin/CWE<N>/good. Then

    bench/juliet.py /tmp/juliet/bin [--lib NAME=PATH]... [--only glibc,nevermore-detect,...]
        [--cwe 415,416] [--match REGEX] [--jobs 2] [--timeout 10] [--csv FILE]

Every executable runs in a fresh temporary directory, under each allocator in turn. The flaws of
many cases run only on input, so Juliet's input sources get one: standard input, the
environment variable ADD and the file /tmp/file.txt (created for the run when it does not exist,
and removed after) hold the number 64, which is also an out-of-range index or size for the
cases that read one. Cases of the listen_socket variants are skipped: they wait for a TCP
connection and would only run into the time limit; connect_socket cases find no server and run
without input. So are the cases of flow variant 12, which run the flaw or not at random
(`globalReturnsTrueOrFalse`). A bad case counts as *stopped* when the process ends by a signal or
with a non-zero status; a case that runs past the time limit (test cases that wait for network
input) is left out of both counts. A good case that does not exit 0 is a *false positive*.
--match keeps the executables whose names match a regular expression (for example
'__(malloc|new)_' for the heap cases of CWE 126).

Where nevermore ended a bad case with a report, the call named in it ("memcpy of 0x...",
"free of 0x...") is counted too, and a second table shows, for each nevermore configuration,
which calls stopped the cases: an overflow stopped by `memcpy` was stopped before it was
made, one stopped by `free` after it (by the canary), one with no report by something else
(the program's own crash, as under glibc, or the C library's checks).

The built-in allocators are glibc, glibc-debug (libc_malloc_debug.so.0 with MALLOC_CHECK_=3),
Scudo (when libclang-rt is installed), and nevermore in detect mode, detect mode with
guard_all=1, and prevent mode (the library of this workspace, target/release/libnevermore.so,
built with `cargo build --release -p nevermore`); --lib adds more.
"""

import argparse
import concurrent.futures
import csv
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def builtin_allocators():
    """(name, environment additions) of the allocators found on this machine."""
    out = [("glibc", {})]
    debug = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"
    if os.path.isfile(debug):
        out.append(("glibc-debug", {"LD_PRELOAD": debug, "MALLOC_CHECK_": "3"}))
    scudo = sorted(glob.glob("/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.scudo_standalone-x86_64.so"))
    if scudo:
        out.append(("scudo", {"LD_PRELOAD": scudo[-1]}))
    lib = os.path.join(ROOT, "target/release/libnevermore.so")
    if os.path.isfile(lib):
        for name, opts in [
            ("nevermore-detect", "mode=detect"),
            ("nevermore-guard_all", "mode=detect:guard_all=1"),
            ("nevermore-prevent", "mode=prevent"),
        ]:
            out.append((name, {"LD_PRELOAD": lib, "NEVERMORE_OPTIONS": opts}))
    else:
        print(f"notice: {lib} not found (cargo build --release -p nevermore): nevermore skipped", file=sys.stderr)
    return out


INPUT = "64\n"
# Flow variant 12 takes the flawed or the correct branch at random.
RANDOM_FLOW = re.compile(r"_12-(bad|good)$")
INPUT_FILE = "/tmp/file.txt"


# The line of a nevermore report that names the call it stopped ("==PID==   memcpy of 0x...",
# "==PID==   operator delete[] of 0x...").
REPORT_CALL = re.compile(rb"^==\d+==   (.+?) of 0x", re.M)


def run_one(exe, env_add, timeout):
    """('ok' (exit 0), 'stopped' (signal or non-zero exit) or 'timeout', the call named by a
    nevermore report or None)."""
    env = dict(os.environ)
    env["ADD"] = INPUT.strip()
    env.update(env_add)
    with tempfile.TemporaryDirectory(prefix="juliet-") as cwd:
        try:
            p = subprocess.run(
                [exe],
                input=INPUT.encode(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                timeout=timeout,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            return "timeout", None
    m = REPORT_CALL.search(p.stderr)
    return ("ok" if p.returncode == 0 else "stopped"), (m.group(1).decode() if m else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin", help="Juliet's output directory (holding CWE<N>/bad and CWE<N>/good)")
    ap.add_argument("--lib", action="append", default=[], metavar="NAME=PATH", help="another allocator to preload")
    ap.add_argument("--only", help="comma-separated allocator names to run")
    ap.add_argument("--cwe", help="comma-separated CWE numbers (default: every one built)")
    ap.add_argument("--match", help="only executables whose names match this regular expression")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per run (default 10)")
    ap.add_argument("--csv", help="also write one row per executable and allocator to this file")
    args = ap.parse_args()

    allocators = builtin_allocators()
    for spec in args.lib:
        name, sep, path = spec.partition("=")
        if not sep or not os.path.isfile(path):
            sys.exit(f"--lib {spec}: expected NAME=PATH of an existing file")
        allocators.append((name, {"LD_PRELOAD": os.path.abspath(path)}))
    if args.only:
        wanted = args.only.split(",")
        unknown = [w for w in wanted if w not in [a for a, _ in allocators]]
        if unknown:
            sys.exit(f"--only: unknown allocator(s) {', '.join(unknown)}")
        allocators = [a for a in allocators if a[0] in wanted]

    cwes = sorted(d for d in os.listdir(args.bin) if d.startswith("CWE") and os.path.isdir(os.path.join(args.bin, d)))
    if args.cwe:
        cwes = [c for c in cwes if c[3:] in args.cwe.split(",")]
    if not cwes:
        sys.exit(f"no CWE<N> directories in {args.bin}")

    jobs = []
    skipped = 0
    for cwe in cwes:
        for kind in ("bad", "good"):
            d = os.path.join(args.bin, cwe, kind)
            if not os.path.isdir(d):
                continue
            for exe in sorted(os.listdir(d)):
                path = os.path.join(d, exe)
                if args.match and not re.search(args.match, exe):
                    continue
                if "listen_socket" in exe or RANDOM_FLOW.search(exe):
                    skipped += 1
                elif os.access(path, os.X_OK):
                    jobs.append((cwe, kind, path))

    made_input = not os.path.exists(INPUT_FILE)
    if made_input:
        with open(INPUT_FILE, "w") as f:
            f.write(INPUT)
    try:
        results = run_all(jobs, allocators, args)
    finally:
        if made_input:
            os.remove(INPUT_FILE)
    report(jobs, allocators, cwes, skipped, results, args)
    return 0


def run_all(jobs, allocators, args):
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            pool.submit(run_one, path, env, args.timeout): (cwe, kind, path, name)
            for cwe, kind, path in jobs
            for name, env in allocators
        }
        for n, f in enumerate(concurrent.futures.as_completed(futures), 1):
            results[futures[f]] = f.result()
            if n % 500 == 0:
                print(f"... {n} of {len(futures)} runs", file=sys.stderr)
    return results


def report(jobs, allocators, cwes, skipped, results, args):
    names = [a for a, _ in allocators]
    print(
        f"Juliet memory-safety cases under each allocator ({len(jobs)} executables, {args.timeout:g} s limit; "
        f"{skipped} executables of listen_socket and flow variant 12 skipped)"
    )
    print()
    print("| CWE | cases | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for cwe in cwes + ["all"]:
        for kind in ("bad", "good"):
            sel = [(c, k, p) for c, k, p in jobs if (cwe == "all" or c == cwe) and k == kind]
            if not sel:
                continue
            cells = []
            counted = None
            for name in names:
                outcomes = [results[(c, k, p, name)][0] for c, k, p in sel]
                ran = [o for o in outcomes if o != "timeout"]
                stopped = sum(o == "stopped" for o in ran)
                cells.append(f"{stopped}/{len(ran)}")
                counted = len(ran) if counted is None else max(counted, len(ran))
            label = "stopped (bad)" if kind == "bad" else "false positives (good)"
            print(f"| {cwe} {label} | {counted} | " + " | ".join(cells) + " |")
    stopping_calls(jobs, names, cwes, results)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["cwe", "kind", "executable", "allocator", "outcome", "report_call"])
            for (cwe, kind, path, name), (outcome, call) in sorted(results.items()):
                w.writerow([cwe, kind, os.path.basename(path), name, outcome, call or ""])


def stopping_calls(jobs, names, cwes, results):
    """For each nevermore configuration, the calls named by the reports that stopped the bad
    cases of each CWE ("no report": stopped otherwise)."""
    rows = []
    for cwe in cwes:
        sel = [(c, k, p) for c, k, p in jobs if c == cwe and k == "bad"]
        for name in names:
            if not name.startswith("nevermore"):
                continue
            counts = {}
            for c, k, p in sel:
                outcome, call = results[(c, k, p, name)]
                if outcome == "stopped":
                    counts[call or "no report"] = counts.get(call or "no report", 0) + 1
            if counts:
                cells = ", ".join(f"{call} {n}" for call, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])))
                rows.append(f"| {cwe} | {name} | {cells} |")
    if rows:
        print()
        print("Bad cases stopped by nevermore, by the call its report named")
        print()
        print("| CWE | configuration | calls |")
        print("|---|---|---|")
        print("\n".join(rows))


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(main())
