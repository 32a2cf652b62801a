#!/usr/bin/env bash
# W1 Zipfian (issue 27): KEYS keys (all created first with 16 B each), then 16-byte APPENDs
# at a fixed RATE for MINUTES, open loop, each write's key drawn with Zipfian popularity
# (exponent 0.99), so values grow anywhere from 16 B to 16 KB; a key that reaches 16 KB is
# reset by a SET of 16 B and grows again. The load generator is `abacus bench w1z`
# (crates/abacus/src/w1z/, where the workload is described in full). Redis runs first, then
# Abacus, one after the other (both would not fit in memory together at full size), each
# fresh and without persistence, with the same seed, so they get the same writes.
#
# Per minute (REPORT_SECS) and server: RSS, used_memory, payload (key + value bytes, exact),
# RSS/payload, RSS against the target 1.15 x payload + 16 B per key, writes/s achieved, the
# generator's own lag behind its schedule (behind, ms), p99.9 and max latency of the writes
# (from their due times) and of a PING sent every ms on its own connection, and CPU % of
# server and generator. Targets (issue 27): RSS <= 1.15 x payload + 16 B/key, no minute with a
# max latency over 10 ms, the write rate held for the whole run.
#
#   bench/w1z.sh                                         the full run: KEYS=50000000
#                                                        RATE=200000 MINUTES=30 (~20 GiB free)
#   KEYS=5000000 RATE=100000 MINUTES=3 bench/w1z.sh      quick check (a few minutes a server)
#   SERVERS=abacus MINUTES=10 bench/w1z.sh               Abacus alone
#   ABACUS_ARGS="--threads 1" bench/w1z.sh
#   SERVER_CPUS=0 GEN_CPUS=1 ABACUS_ARGS="--threads 1" bench/w1z.sh
#                                                        server and generator on cores of their own
#                                                        (taskset lists; unset: the kernel places them)
#   TRACE_OVER_MS=8 bench/w1z.sh                         also print each stall over 8 ms, with its
#                                                        CLOCK_MONOTONIC time (for perf sched -k mono)
#
# The generator runs at real-time priority when allowed (GEN_RT=0 disables), so that on a
# busy machine its own descheduling does not pass for server stalls; `behind` still shows it.
# No assertion: on a shared 2-core machine latency maxima are noisy; read them side by side.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
KEYS=${KEYS:-50000000}
RATE=${RATE:-200000}
MINUTES=${MINUTES:-30}
SEED=${SEED:-1}
CONNS=${CONNS:-2}
REPORT_SECS=${REPORT_SECS:-60}
SERVERS=${SERVERS:-redis abacus}
[ -x "$ABACUS_BIN" ] || (cd "$ROOT" && cargo build --release -q -p abacus)

RT=""
if [ "${GEN_RT:-1}" = 1 ] && chrt -f 10 true 2>/dev/null; then RT="chrt -f 10"; fi

printf 'W1 Zipfian on %s cores, %s GiB, %s, load average %s: KEYS=%s RATE=%s MINUTES=%s SEED=%s CONNS=%s; abacus args: %s; generator: %s; cores: server %s, generator %s\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u '+%F %H:%M UTC')" "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "$KEYS" "$RATE" "$MINUTES" "$SEED" "$CONNS" "${ABACUS_ARGS:-default}" "${RT:-normal priority}" "${SERVER_CPUS:-any}" "${GEN_CPUS:-any}"

declare -A sum
for target in $SERVERS; do
  port=$(free_port)
  if [ "$target" = redis ]; then
    start_redis "$port"
  else
    # shellcheck disable=SC2086
    start_abacus "$port" --appendonly no --save "" ${ABACUS_ARGS:-}
  fi
  if [ -n "${SERVER_CPUS:-}" ]; then taskset -a -p -c "$SERVER_CPUS" "${BENCH_PIDS[-1]}" >/dev/null; fi
  out="$BENCH_TMP/$target.out"
  echo
  # A run that fails (the server fell too far behind, a wrong reply) is reported and the
  # next server still runs.
  $RT ${GEN_CPUS:+taskset -c "$GEN_CPUS"} "$ABACUS_BIN" bench w1z -p "$port" --label "$target" --keys "$KEYS" --rate "$RATE" --minutes "$MINUTES" \
    --seed "$SEED" --connections "$CONNS" --report-secs "$REPORT_SECS" ${TRACE_OVER_MS:+--trace-over-ms "$TRACE_OVER_MS"} | tee "$out" ||
    echo "# $target: the generator stopped with an error (above)"
  sum[$target]=$(grep '^summary ' "$out" || true)
  # Stop this server before the next one starts: their memory is not to add up.
  pid=${BENCH_PIDS[-1]}
  kill "$pid"; wait "$pid" 2>/dev/null || true
  BENCH_PIDS=("${BENCH_PIDS[@]:0:${#BENCH_PIDS[@]}-1}")
done

field() { # field TARGET NAME: NAME's value in TARGET's summary line
  tr ' ' '\n' <<<"${sum[$1]}" | awk -F= -v k="$2" '$1 == k {print $2}'
}
if [ -n "${sum[redis]:-}" ] && [ -n "${sum[abacus]:-}" ]; then
  echo
  printf '%-26s %14s %14s %8s\n' 'at the end' redis abacus ratio
  for f in writes writes_unsent rss_bytes used_memory payload_bytes rss_target_max writes_p999_us writes_max_us ping_p999_us ping_max_us rows_over_10ms rate_min srv_cpu_pct gen_cpu_pct preload_s; do
    r=$(field redis "$f"); a=$(field abacus "$f")
    printf '%-26s %14s %14s %8s\n' "$f" "$r" "$a" "$(awk -v a="$a" -v r="$r" 'BEGIN {if (r > 0) printf "%.2f", a / r; else print "-"}')"
  done
  echo "(ratio = Abacus / Redis; payload_bytes must be equal: same seed, same writes)"
fi
