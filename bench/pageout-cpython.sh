#!/bin/bash
# CPython's regression tests that do the most I/O, under the library while every process of
# the run is paged out every 5 ms (bench/pageout.c -e), as bench/pageout-programs.sh does for
# common programs. Needs root (process_madvise of other processes) and CPython's test package.
# usage: bench/pageout-cpython.sh [LIB.so|none] [MODE] [OUTDIR] [REGRTEST ARGUMENT...]
#        (default: target/release/libnevermore.so, prevent, a new directory in $TMPDIR; "none":
#        the C library's malloc, for comparison; the arguments replace the module list below,
#        e.g. `-F test_weakref` runs that module again and again until it fails);
#        SECONDS_MAX (default 2400) bounds the run; PYTHON (default python3) is the interpreter;
#        prints regrtest's summary; the whole log is OUTDIR/out.log, the library's reports
#        OUTDIR/reports.log.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:-$here/target/release/libnevermore.so}
mode=${2:-prevent}
out=${3:-$(mktemp -d "${TMPDIR:-/tmp}/nevermore-pageout-cpython.XXXXXX")}
case "$lib" in none) lib= ;; /*) ;; *) lib=$PWD/$lib ;; esac
mkdir -p "$out"
cc -O2 -o "$out/pageout" "$here/bench/pageout.c" || exit 1
"$out/pageout" -e NEVERMORE_PAGEOUT_RUN=1 5 > "$out/pageout.log" 2>&1 &
pager=$!
trap 'kill $pager 2>/dev/null' EXIT
mods="test_os test_io test_fileio test_file test_shutil test_subprocess test_select test_selectors
  test_signal test_threading test_tempfile test_glob test_zipfile test_tarfile test_gzip test_bz2
  test_lzma test_zlib test_sqlite3 test_json test_pickle test_mmap test_posix test_pty test_fcntl
  test_logging test_httpservers test_ssl test_hashlib test_csv test_codecs test_locale test__locale
  test_time test_datetime test_re test_unicode test_socketserver test_poll test_epoll
  test_asyncio.test_events test_asyncio.test_streams test_asyncio.test_subprocess
  test_urllib2_localnet test_xml_etree test_dbm test_mailbox test_netrc test_pathlib test_stat"
[ $# -gt 3 ] && mods="${*:4}"
# shellcheck disable=SC2086
env NEVERMORE_PAGEOUT_RUN=1 PYTHONMALLOC=malloc LD_PRELOAD="$lib" \
    NEVERMORE_OPTIONS="mode=$mode:report_path=$out/reports.log" \
    timeout "${SECONDS_MAX:-2400}" "${PYTHON:-python3}" -m test -j2 --timeout 600 $mods > "$out/out.log" 2>&1
echo "exit $?" >> "$out/out.log"
sed -n '/== Tests result/,$p' "$out/out.log"
grep -E "futex facility|Errno 14" "$out/out.log" | sort | uniq -c
