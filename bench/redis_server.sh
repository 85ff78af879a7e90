# Sourced by the redis benchmark scripts (with physmem.sh). `redis_start LIB OPTIONS` starts
# redis-server on a random port with LIB preloaded and NEVERMORE_OPTIONS=OPTIONS, no
# persistence, in a directory of its own (sets PORT, P, D) and records the start time;
# `redis_stop PATTERN` records the end time, stops the server, prints the elapsed time and the
# lines of its output that match PATTERN (nevermore's statistics), and removes the directory.
redis_start() {
  PORT=$((20000 + RANDOM % 10000))
  D=$(mktemp -d)
  NEVERMORE_OPTIONS=$2 LD_PRELOAD=$1 redis-server --port $PORT --save "" --appendonly no --dir "$D" > "$D/out" 2> "$D/err" &
  P=$!
  sleep 1
  S=$(date +%s.%N)
}
redis_stop() {
  local e
  e=$(date +%s.%N)
  redis-cli -p $PORT shutdown nosave > /dev/null 2>&1
  wait $P
  echo "elapsed $(echo "$e - $S" | bc) s"
  cat "$D/out" "$D/err" | grep "==" | cut -c1-400 | grep -E "$1"
  rm -rf "$D"
}
