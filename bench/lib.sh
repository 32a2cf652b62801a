# Shared helpers for the bench/ scripts: free ports, starting Redis and Abacus side by side,
# and cleaning them up on exit. Source it; do not run it.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ABACUS_BIN=${ABACUS_BIN:-$ROOT/target/release/abacus}
REDIS_SERVER=${REDIS_SERVER:-redis-server}
BENCH_TMP=$(mktemp -d /tmp/abacus-bench.XXXXXX)
BENCH_PIDS=()

bench_cleanup() {
  for p in "${BENCH_PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$BENCH_TMP"
}
trap bench_cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_ping() {
  local port=$1
  for _ in $(seq 1 200); do
    if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then return 0; fi
    sleep 0.05
  done
  echo "server on port $port did not answer PING" >&2
  return 1
}

# start_redis PORT [extra args...]
start_redis() {
  local port=$1; shift
  mkdir -p "$BENCH_TMP/redis-$port"
  "$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$BENCH_TMP/redis-$port" "$@" >"$BENCH_TMP/redis-$port.log" 2>&1 &
  BENCH_PIDS+=($!)
  wait_ping "$port"
}

# start_abacus PORT [extra args...]
start_abacus() {
  local port=$1; shift
  [ -x "$ABACUS_BIN" ] || (cd "$ROOT" && cargo build --release -q -p abacus)
  "$ABACUS_BIN" serve --port "$port" --dir "$BENCH_TMP/abacus-$port" "$@" \
    >"$BENCH_TMP/abacus-$port.log" 2>&1 &
  BENCH_PIDS+=($!)
  wait_ping "$port"
}

# start_pair: Redis and Abacus (with $ABACUS_ARGS) on free ports; sets RPORT and APORT.
# Both run without persistence, as start_redis does for Redis (bench/persist.sh compares
# them with the log on).
start_pair() {
  RPORT=$(free_port); start_redis "$RPORT"
  APORT=$(free_port); start_abacus "$APORT" --appendonly no --save "" ${ABACUS_ARGS:-}
}

# pid_of_port PORT: the process id a server on PORT reports in INFO.
pid_of_port() { redis-cli -p "$1" info server | awk -F: '/^process_id/ {print $2}' | tr -d '\r'; }

# rss_kb PID
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

# median of the numbers given as arguments
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {printf "%.6f\n", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
