#!/usr/bin/env bash
# The 16-core host's run (16 cores, 128 GiB, no Python or cargo: see "Benchmark hosts" in docs/PERFORMANCE.md): W8's load and ATTRIBUTE over every user at
# several thread counts, then W2 at W2N keys (Abacus's table alone, per-insert timing pass).
# The host has no Python and no cargo, so everything comes prepared in devbench/ (untracked):
#   mkdir -p devbench/lib
#   strip -o devbench/abacus target/release/abacus
#   strip -o devbench/w2 $(cargo bench --no-run -p abacus-table --bench w2 2>&1 | grep -o 'target/[^)]*')
#   rustc --edition 2021 -O -o devbench/w8_gen bench/w8_gen.rs
#   cp /usr/bin/redis-cli devbench/; cp -L $(ldd /usr/bin/redis-cli | awk '/=>/ {print $3}') /lib64/ld-linux-x86-64.so.2 devbench/lib/
# then on the host: USERS=1000000 W2N=500000000 THREADS="16 8 4 2" bash bench/manycore.sh
# (it runs on a smaller machine too, unpinned: USERS=20000 W2N=2000000 THREADS="2 1").
set -u
D=${DEVBENCH:-$(cd "$(dirname "$0")/.." && pwd)/devbench}
O=${OUT:-/tmp/devout}; mkdir -p "$O"
USERS=${USERS:-1000000}
W2N=${W2N:-500000000}
THREADS=${THREADS:-"16 8 4 2 1"}
exec > >(tee "$O/log.txt") 2>&1
pin() { local c=$1; shift; if [ "$(nproc)" -ge 16 ]; then exec taskset -c "$c" "$@"; else exec "$@"; fi; }
cli() { "$D/lib/ld-linux-x86-64.so.2" --library-path "$D/lib" "$D/redis-cli" "$@"; }
echo "host: $(nproc) cpus, $(awk '/MemTotal/ {print $2}' /proc/meminfo) kB; $(date -u)"
grep -m1 'model name' /proc/cpuinfo
t0=$(date +%s.%N)
EV=$("$D/w8_gen" "$USERS" 1 /tmp/w8.resp)
echo "w8_gen: $USERS users, $EV events, $(du -h /tmp/w8.resp | cut -f1), $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
port=7101
for T in $THREADS; do
  rm -rf /tmp/ab; mkdir -p /tmp/ab
  last=$((T - 1))
  pin 0-$last "$D/abacus" serve --port $port --dir /tmp/ab --threads "$T" --appendonly no --save "" > "$O/abacus-$T.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do cli -p $port ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
  a=$(date +%s.%N)
  (pin 8-15 "$D/lib/ld-linux-x86-64.so.2" --library-path "$D/lib" "$D/redis-cli" -p $port --pipe < /tmp/w8.resp > "$O/pipe-$T.log" 2>&1)
  b=$(date +%s.%N)
  mem=$(cli -p $port info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
  echo "threads=$T load $(awk -v a="$a" -v b="$b" -v e="$EV" 'BEGIN{printf "%.1f s, %.0f events/s", b-a, e/(b-a)}'), $(awk -v m="$mem" -v e="$EV" 'BEGIN{printf "%.1f", m/e}') B/entry"
  for r in 1 2 3; do
    a=$(date +%s.%N)
    cli -p $port ATTRIBUTE MATCH 'user:*' CHANNEL source CONVERSION event purchase VALUE amount \
      MODELS first last linear position decay HALFLIFE 7d LOOKBACK 30d > "$O/attr-$T.txt"
    b=$(date +%s.%N)
    scanned=$(awk 'prev=="events" {print; exit} {prev=$0}' "$O/attr-$T.txt")
    echo "threads=$T ATTRIBUTE round $r: $(awk -v a="$a" -v b="$b" -v s="$scanned" 'BEGIN{printf "%.3f s wall, %s events, %.1f M events/s", b-a, s, s/(b-a)/1e6}')"
  done
  kill $pid; wait $pid 2>/dev/null
done
rm -f /tmp/w8.resp
echo "W2: W2_ONLY=abacus W2_N=$W2N W2_BATCHED=0, core 2; $(date -u)"
export W2_ONLY=abacus W2_N=$W2N W2_BATCHED=0; (pin 2 timeout ${W2_TIMEOUT:-420} "$D/w2" --bench)
echo "w2 rc=$?; $(date -u)"
