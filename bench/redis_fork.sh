#!/bin/bash
# What fork costs redis with a big heap: starts redis-server with LIB preloaded ("" for redis's
# own allocator, jemalloc in Debian's build), fills it with DEBUG POPULATE (KEYS keys of 500
# bytes), then runs BGSAVE three times and prints after each redis's latest_fork_usec (the time
# fork took in the server), the server's VmRSS and redis's used_memory.
# usage: bench/redis_fork.sh LIB.so|"" [KEYS]
LIB=$1; KEYS=${2:-1000000}; PORT=$((20000 + RANDOM % 10000))
D=$(mktemp -d)
LD_PRELOAD=$LIB redis-server --port $PORT --save "" --appendonly no --dir "$D" --enable-debug-command yes \
    > "$D/out" 2>&1 &
P=$!
for _ in $(seq 100); do redis-cli -p $PORT ping > /dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p $PORT debug populate "$KEYS" key 500 > /dev/null
field() { redis-cli -p $PORT info "$1" | tr -d '\r' | grep "^$2:" | cut -d: -f2; }
for _ in 1 2 3; do
    redis-cli -p $PORT bgsave > /dev/null
    sleep 0.2
    while [ "$(field persistence rdb_bgsave_in_progress)" != 0 ]; do sleep 0.2; done
    echo "fork_usec $(field stats latest_fork_usec) vmrss_kib $(awk '/^VmRSS:/{print $2}' /proc/$P/status)" \
        "used_memory $(field memory used_memory)"
done
redis-cli -p $PORT shutdown nosave > /dev/null 2>&1
wait $P
rm -rf "$D"
