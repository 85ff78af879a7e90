#!/bin/bash
# Common programs under a steady pageout: each case runs once without the library, then under
# it in prevent and detect mode while `pageout -e NEVERMORE_PAGEOUT_RUN=1 5` pages out every
# writable mapping of it and its children every 5 ms; the output and exit status must be the
# same as without the library. Needs root (process_madvise of other processes).
# usage: bench/pageout-programs.sh [LIB.so] [CASE...]   (default: target/release/libnevermore.so,
#        every case); prints "<case> <mode>: ok" or what differed; work files in $TMPDIR.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:-$here/target/release/libnevermore.so}
shift || true
case "$lib" in /*) ;; *) lib=$PWD/$lib ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/nevermore-pageout-programs.XXXXXX")
cc -O2 -o "$work/pageout" "$here/bench/pageout.c" || exit 1

declare -A cases=(
  [git]='git init -q r && cd r && for i in $(seq 300); do echo "line $i" > f$i.txt; done && git add . &&
         git -c user.name=a -c user.email=a@b commit -qm one && sed -i s/line/LINE/ f1*.txt &&
         git diff --stat | tail -1 && git -c user.name=a -c user.email=a@b commit -qam two &&
         git gc -q && git clone -q . ../c2 && cd ../c2 && git log --format=%s && git fsck 2>&1 | wc -l'
  [perl]='perl -e '"'"'my %h; $h{"k$_"} = [$_, "v" x ($_ % 50)] for 1..300000; my $s = 0;
         for (keys %h) { $s += $h{$_}[0] if /7/ } delete $h{"k$_"} for 1..150000;
         print length(join(",", sort { $a <=> $b } map { $_->[0] } values %h)), " $s\n"'"'"
  [ruby]='ruby -e '"'"'h = {}; 200000.times { |i| h["k#{i}"] = [i, "v" * (i % 50)] }; s = 0;
         h.each { |k, v| s += v[0] if k.include?("7") }; puts h.values.map(&:first).sort.size, s;
         require "json"; puts JSON.generate(h.first(1000)).size'"'"
  [python]='python3 -c '"'"'import multiprocessing as mp, hashlib, concurrent.futures as cf, os
f = lambda i: hashlib.sha256(bytes(i % 256) * (i % 5000)).hexdigest()[:8]
p = mp.Pool(2); r = p.map(len, [b"x" * i for i in range(3000)]); p.close(); p.join()
r2 = list(cf.ThreadPoolExecutor(8).map(f, range(3000)))
print(sum(r), r2[:3], sum(len(fs) for _, _, fs in os.walk("/usr/share/doc")))'"'"
  [node]='node -e '"'"'let m = new Map(); for (let i = 0; i < 300000; i++) m.set("k" + i, {a: i, b: "x".repeat(i % 100)});
         let s = 0; for (const [k, v] of m) if (k.includes("7")) s += v.a;
         console.log(s, require("zlib").gzipSync(JSON.stringify([...m.values()].slice(0, 20000))).length)'"'"
  [compress]='mkdir d && for i in $(seq 200); do head -c 20000 /usr/bin/perl | base64 > d/f$i; done &&
         tar cJf a.tar.xz d && tar cf - d | zstd -q -19 -o a.tar.zst && tar cjf a.tar.bz2 d && rm -rf d &&
         tar xJf a.tar.xz && zstd -dcq a.tar.zst | tar tf - | wc -l && cat d/* | sha256sum && bzip2 -t a.tar.bz2'
  [vim]='for i in $(seq 2000); do echo "word$i foo bar"; done > t.txt &&
         vim -es -N -u NONE -c "%s/foo/baz/g" -c sort -c "g/word1/d" -c wq t.txt && md5sum < t.txt'
  [cmake]='mkdir src && printf "cmake_minimum_required(VERSION 3.10)\nproject(x C)\nadd_executable(x main.c)\n" > src/CMakeLists.txt &&
         echo "int main(void) { return 0; }" > src/main.c && cmake -S src -B b -G Ninja > /dev/null &&
         ninja -C b > /dev/null && ./b/x && echo built'
  [jq]='python3 -c "import json; print(json.dumps([{\"id\": i, \"t\": [i, 2 * i]} for i in range(100000)]))" > big.json &&
         jq -c "[.[] | select(.id % 7 == 0) | (.t | add)] | add" big.json'
  [openssl]='head -c 5000000 /dev/zero | openssl enc -aes-256-cbc -pbkdf2 -k pw -S 0011223344556677 | sha256sum'
  [find]='find /usr/share -xdev -type f -printf "%s %p\n" 2>/dev/null | sort -n | tail -3'
  [sqlite]='sqlite3 db "create table t(a, b); with recursive c(x) as (select 1 union all select x + 1 from c where x < 200000)
         insert into t select x, hex(randomblob(20)) from c; create index i on t(b); select count(*), sum(a) from t;"'
)
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(git perl ruby python node compress vim cmake jq openssl find sqlite)

"$work/pageout" -e NEVERMORE_PAGEOUT_RUN=1 5 &
pager=$!
trap 'kill $pager 2>/dev/null; rm -rf "$work"' EXIT
status=0
for name in "${names[@]}"; do
  cmd=${cases[$name]:-}
  [ -z "$cmd" ] && { echo "unknown case $name"; status=1; continue; }
  for mode in plain prevent detect; do
    d=$work/$name.$mode; mkdir -p "$d"
    if [ $mode = plain ]; then
      (cd "$d" && timeout 600 bash -c "$cmd" > out 2> err; echo $? > rc)
    else
      (cd "$d" && NEVERMORE_PAGEOUT_RUN=1 NEVERMORE_OPTIONS=mode=$mode LD_PRELOAD=$lib \
        timeout 600 bash -c "$cmd" > out 2> err; echo $? > rc)
    fi
  done
  for mode in prevent detect; do
    p=$work/$name; r=ok
    cmp -s "$p.plain/out" "$p.$mode/out" || r="output differs"
    [ "$(cat "$p.plain/rc")" = "$(cat "$p.$mode/rc")" ] || r="$r; exit status $(cat "$p.plain/rc") -> $(cat "$p.$mode/rc")"
    [ "$r" = ok ] || { status=1; r="$r: $(head -c 300 "$p.$mode/err" | tr '\n' ' ')"; }
    echo "$name $mode: $r"
  done
done
exit $status
