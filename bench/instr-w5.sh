#!/usr/bin/env bash
# W5 (the summarizer): user-space instructions per event of the Abacus server under
# callgrind, v1 and v2. Events/s on a shared 2-core machine move with its load; this count
# does not (it moves about 3% between runs, as batches split differently between reads), so
# it is the figure to compare builds with. It leaves out the kernel and cache misses.
#
#   bench/instr-w5.sh                          50,000 events of each feed, default config
#   N=20000 bench/instr-w5.sh                  quicker
#   ABACUS_BIN=/path/to/other/abacus bench/instr-w5.sh    compare two builds
#   KEEP=/tmp/w5cg bench/instr-w5.sh           keep each feed's callgrind output there
#                                              (KEEP/v1/cg.out*, KEEP/v2/...) for
#                                              `callgrind_annotate --inclusive=yes`
#
# The count leaves out jemalloc's statistics refresh (`mallctl`: shard 0 samples
# `used_memory_peak` on each tick, 10 a second of wall time): under valgrind the server runs
# about 50x slower while the ticks keep their pace, so that refresh grew with the machine's
# load (up to 1,000 instructions per event on a loaded machine), not with the events.
#
# Each feed: bench/w5gen.py writes 200,000 seeded events (the W5 files) and the rules; the
# first N lines are ingested with `abacus ingest --connections 1` into a server started under
# `valgrind --tool=callgrind` with instrumentation off, switched on only around the ingest.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-50000}
command -v valgrind >/dev/null || { echo "valgrind is required" >&2; exit 1; }
[ -x "$ABACUS_BIN" ] || (cd "$ROOT" && cargo build --release -q -p abacus)
GEN="python3 $ROOT/bench/w5gen.py"
$GEN rules 0 0 > "$BENCH_TMP/rules.toml"

instr() {
  local feed=$1 port dir pid total
  port=$(free_port); dir="$BENCH_TMP/cg-$port"; mkdir -p "$dir"
  $GEN "$feed" 200000 1 > "$dir/$feed.all"
  head -n "$N" "$dir/$feed.all" > "$dir/$feed.in"
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg.out" \
    "$ABACUS_BIN" serve --port "$port" --dir "$dir" --summarizer-rules "$BENCH_TMP/rules.toml" >"$dir/log" 2>&1 &
  pid=$!
  wait_ping "$port"
  callgrind_control -i on "$pid" >/dev/null 2>&1
  "$ABACUS_BIN" ingest --quiet --feed "$feed" -p "$port" --connections 1 "$dir/$feed.in" >/dev/null
  callgrind_control -i off "$pid" >/dev/null 2>&1
  callgrind_control -d "$pid" >/dev/null 2>&1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  total=$(cat "$dir"/cg.out* | awk '/^totals:/ {s += $2} END {print s + 0}')
  ticks=$(for f in "$dir"/cg.out*; do callgrind_annotate --inclusive=yes --threshold=100 "$f" 2>/dev/null | grep -E 'jemalloc\.c:_rjem_mallctl \[' | awk '{gsub(",", "", $1); print $1}'; done | awk '{s += $1} END {print s + 0}')
  total=$((total - ticks))
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP/$feed"; cp "$dir"/cg.out* "$KEEP/$feed/"; fi
  echo $((total / N))
}

printf 'W5 user-space instructions per event (callgrind), %s; N=%s, %s\n' "$(date -u +%F)" "$N" "$ABACUS_BIN"
for feed in v1 v2; do
  printf '%-4s %10s\n' "$feed" "$(instr "$feed")"
done
