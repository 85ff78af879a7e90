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
. "$(dirname "$0")/physmem.sh"
. "$(dirname "$0")/redis_server.sh"
LIB=$1; RUNS=$2
redis_start "$LIB" stats=1
for i in $(seq "$RUNS"); do
  R=$(redis-benchmark -p $PORT -q -n 300000 -r 100000 -d 256 -P 16 -t set,get,lpush,lpop,hset | tr '\r' '\n' \
      | grep -o "[0-9.]* requests per second" | awk '{s += 1 / $1; n++} END {printf "%.0f", n / s}')
  physmem $P; m=$POOL; pte=$PTE
  echo "round $i: $R req/s, physical $(( PHYS / 1024 )) MiB (pool memfd $((m / 1024)) MiB, page tables $((pte / 1024)) MiB)"
done
redis_stop "degrade|mirrors|pool memory|VMAs"
