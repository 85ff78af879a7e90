#!/bin/bash
# redis under a malloc library, served the same benchmark over and over: starts redis-server
# with LIB preloaded (nevermore with stats=1), runs RUNS rounds of redis-benchmark and prints
# after each round its throughput (harmonic mean of the five tests) and the server's physical
# memory as in BENCHMARKS.md "Method" (Pss - Pss_Shmem + max(Pss_Shmem, pool memfd) + VmPTE);
# then stops the server and prints the elapsed time of the rounds and nevermore's mirrors /
# degrade mode / VMAs / pool memory lines. How fast the one-time address space goes once the
# heap has stopped growing: the difference between a run of 8 rounds and one of 4.
# For glibc, LIB is the bench's glibc_shim.so (Debian's redis links jemalloc).
# usage: bench/redis_arena.sh LIB.so RUNS
LIB=$1; RUNS=$2; PORT=$((20000 + RANDOM % 10000))
D=$(mktemp -d)
NEVERMORE_OPTIONS=stats=1 LD_PRELOAD=$LIB redis-server --port $PORT --save "" --appendonly no --dir "$D" > "$D/out" 2> "$D/err" &
P=$!
sleep 1
S=$(date +%s.%N)
for i in $(seq "$RUNS"); do
  R=$(redis-benchmark -p $PORT -q -n 300000 -r 100000 -d 256 -P 16 -t set,get,lpush,lpop,hset | tr '\r' '\n' \
      | grep -o "[0-9.]* requests per second" | awk '{s += 1 / $1; n++} END {printf "%.0f", n / s}')
  m=0
  for fd in /proc/$P/fd/*; do
    case "$(readlink "$fd")" in *nevermore-pool*) m=$(( $(stat -L -c %b "$fd") / 2 ));; esac
  done
  r=$(cat /proc/$P/smaps_rollup)
  pss=$(echo "$r" | awk '/^Pss:/{print $2}'); sh=$(echo "$r" | awk '/^Pss_Shmem:/{print $2}')
  pte=$(awk '/^VmPTE:/{print $2}' /proc/$P/status)
  echo "round $i: $R req/s, physical $(( (pss - sh + (m > sh ? m : sh) + pte) / 1024 )) MiB (pool memfd $((m / 1024)) MiB, page tables $((pte / 1024)) MiB)"
done
E=$(date +%s.%N)
redis-cli -p $PORT shutdown nosave > /dev/null 2>&1
wait $P
echo "elapsed $(echo "$E - $S" | bc) s"
grep -hE "degrade|mirrors|pool memory|VMAs" "$D/out" "$D/err"
rm -rf "$D"
