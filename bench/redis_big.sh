#!/bin/bash
# redis with a heap bigger than sweep_max_live, whose values die at random: starts
# redis-server with LIB preloaded (NEVERMORE_OPTIONS from NVO, default stats=1), loads it with
# KEYS SETs of 300-byte values on random keys (-r KEYS: about 63 % of them distinct, so a third
# of the values are overwritten, i.e. freed, at random), then runs ROUNDS rounds of KEYS/2 SETs
# on random keys with another value size each round (VARY=0: 300 bytes again); prints after the load and each round the
# throughput, the server's physical memory as in BENCHMARKS.md "Method" (Pss - Pss_Shmem +
# max(Pss_Shmem, pool memfd) + VmPTE) and redis's own used_memory; then stops the server and
# prints the elapsed time and the lines of nevermore's statistics that match STATGREP
# (default: sweeps, pool memory, slab pages).
# For glibc, LIB is the bench's glibc_shim.so (Debian's redis links jemalloc).
# usage: bench/redis_big.sh LIB.so ROUNDS [KEYS]
. "$(dirname "$0")/physmem.sh"
. "$(dirname "$0")/redis_server.sh"
LIB=$1; RUNS=$2; KEYS=${3:-1000000}
redis_start "$LIB" "${NVO:-stats=1}"
phys() {
  physmem $P; m=$POOL; pte=$PTE
  used=$(redis-cli -p $PORT info memory | tr -d '\r' | awk -F: '/^used_memory:/{print int($2/1048576)}')
  echo "physical $(( PHYS / 1024 )) MiB (pool $((m / 1024)), PTE $((pte / 1024)), redis used_memory $used MiB)"
}
redis-benchmark -p $PORT -q -n $KEYS -r $KEYS -d 300 -P 32 -t set > /dev/null 2>&1
echo "loaded: $(phys)"
for i in $(seq "$RUNS"); do
  sz=$(( ${VARY:-1} ? 100 + (i * 137) % 500 : 300 ))
  R=$(redis-benchmark -p $PORT -q -n $((KEYS/2)) -r $KEYS -d $sz -P 32 -t set | tr '\r' '\n' | grep -o "[0-9.]* requests per second" | tail -1)
  echo "round $i (d=$sz): $R, $(phys)"
done
redis_stop "${STATGREP:-sweeps|pool memory|slab pages}"
