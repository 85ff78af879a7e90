#!/bin/bash
# How fast redis under nevermore uses the one-time address space (docs/usage.md, "Degrade
# mode"): starts redis-server with LIB preloaded and stats=1, runs RUNS rounds of
# redis-benchmark, stops the server and prints the elapsed time of the rounds and the
# allocator's mirrors / degrade mode / VMAs / pool memory lines. The rate once the heap has
# stopped growing is the difference between a run of 8 rounds and one of 4.
# usage: bench/redis_arena.sh LIB.so RUNS
LIB=$1; RUNS=$2; PORT=$((20000 + RANDOM % 10000))
D=$(mktemp -d)
NEVERMORE_OPTIONS=stats=1 LD_PRELOAD=$LIB redis-server --port $PORT --save "" --appendonly no --dir "$D" > "$D/out" 2> "$D/err" &
P=$!
sleep 1
S=$(date +%s.%N)
for _ in $(seq "$RUNS"); do
  redis-benchmark -p $PORT -q -n 300000 -r 100000 -d 256 -P 16 -t set,get,lpush,lpop,hset > /dev/null
done
E=$(date +%s.%N)
redis-cli -p $PORT shutdown nosave > /dev/null 2>&1
wait $P
echo "elapsed $(echo "$E - $S" | bc) s"
grep -hE "degrade|mirrors|pool memory|VMAs" "$D/out" "$D/err"
rm -rf "$D"
