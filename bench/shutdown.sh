#!/usr/bin/env bash
# How long Abacus and Redis take to exit after SHUTDOWN or SIGTERM, side by side: from the
# moment the request is sent to the moment the process is gone (polled every 2 ms), the
# median of ROUNDS tries per case. Cases: an empty server; KEYS keys with the log on (the
# final fsync); KEYS keys with the log off and a save schedule (the final snapshot, as
# Redis's SHUTDOWN saves its RDB); and 50 idle clients connected.
#
#   bench/shutdown.sh               defaults: ROUNDS=5, KEYS=1000000
#   ROUNDS=3 KEYS=200000 bench/shutdown.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROUNDS=${ROUNDS:-5}
KEYS=${KEYS:-1000000}

now_ms() { date +%s%3N; }

# exit_ms PID: waits (bounded, 120 s) for PID to be gone; prints the ms since $T0.
exit_ms() {
  local pid=$1
  for _ in $(seq 1 60000); do
    kill -0 "$pid" 2>/dev/null || { echo $(( $(now_ms) - T0 )); return; }
    sleep 0.002
  done
  echo "timeout"
}

# one TARGET HOW CASE: starts a server, prepares CASE, stops it with HOW, prints ms.
one() {
  local target=$1 how=$2 case=$3 port dir pid
  port=$(free_port)
  dir=$(mktemp -d "$BENCH_TMP/run.XXXXXX")
  local persist=(--appendonly yes --save "")
  [ "$case" = final-snapshot ] && persist=(--appendonly no --save "3600 1")
  if [ "$target" = redis ]; then
    "$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --dir "$dir" --enable-debug-command local \
      "${persist[@]}" >"$dir/log" 2>&1 &
  else
    "$ABACUS_BIN" serve --port "$port" --dir "$dir" "${persist[@]}" >"$dir/log" 2>&1 &
  fi
  pid=$!
  wait_ping "$port"
  case $case in
    empty) ;;
    log|final-snapshot) redis-cli -p "$port" debug populate "$KEYS" key 16 >/dev/null ;;
    idle-clients)
      for _ in $(seq 1 50); do (sleep 30 | redis-cli -p "$port" >/dev/null 2>&1 &) ; done
      sleep 0.5 ;;
  esac
  T0=$(now_ms)
  if [ "$how" = SHUTDOWN ]; then
    redis-cli -p "$port" shutdown >/dev/null 2>&1 || true
  else
    kill -TERM "$pid"
  fi
  exit_ms "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "shutdown latency, ms (median of $ROUNDS; $KEYS keys where populated), $(nproc) cores, $(date -u +%F)"
printf '%-16s %-9s %10s %10s\n' case how abacus redis
for case in empty log final-snapshot idle-clients; do
  for how in SHUTDOWN SIGTERM; do
    a=""; r=""
    for _ in $(seq 1 "$ROUNDS"); do
      a+="$(one abacus $how $case) "
      r+="$(one redis $how $case) "
    done
    printf '%-16s %-9s %10s %10s\n' "$case" "$how" "$(echo "$a" | median)" "$(echo "$r" | median)"
  done
done
