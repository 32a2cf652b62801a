#!/usr/bin/env bash
# User-space instructions per command of the Abacus server under callgrind, for the
# bench/hll.sh workloads (PFADD and HLL.ADD; one key, one key x10 elements, 10k keys). Like
# bench/instr.sh, the count does not depend on what else runs on the machine. It leaves out
# the kernel, cache misses and the cost of atomic instructions, and it subtracts jemalloc's
# statistics refresh, a timer-driven cost that callgrind's slowdown would inflate.
#
#   bench/instr-hll.sh                                  default config
#   ABACUS_BIN=/path/to/other/abacus bench/instr-hll.sh   compare two builds
#
# Each cell: start Abacus under `valgrind --tool=callgrind` with instrumentation off, warm
# the key(s) up with W commands (so one-key sketches are dense), switch instrumentation on
# for N commands of `redis-benchmark -c 50 -P 100`, and divide the instructions by N.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-50000}
W=${W:-20000}
ABACUS_ARGS=${ABACUS_ARGS:-}
command -v valgrind >/dev/null || { echo "valgrind is required" >&2; exit 1; }
[ -x "$ABACUS_BIN" ] || (cd "$ROOT" && cargo build --release -q -p abacus)
R10='__rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__'

# instr R COMMAND...: prints instructions per command.
instr() {
  local r=$1 port dir pid total ctl
  shift
  port=$(free_port); dir="$BENCH_TMP/cg-$port"; mkdir -p "$dir"
  # shellcheck disable=SC2086
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg.out" \
    "$ABACUS_BIN" serve --port "$port" --dir "$dir" --appendonly no --save "" $ABACUS_ARGS \
    >"$dir/log" 2>&1 &
  pid=$!
  wait_ping "$port"
  redis-benchmark -p "$port" -n "$W" -c 50 -P 100 -r "$r" -q "$@" >/dev/null 2>&1
  callgrind_control -i on "$pid" >/dev/null 2>&1
  redis-benchmark -p "$port" -n "$N" -c 50 -P 100 -r "$r" -q "$@" >/dev/null 2>&1
  callgrind_control -i off "$pid" >/dev/null 2>&1
  callgrind_control -d "$pid" >/dev/null 2>&1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  total=$(cat "$dir"/cg.out* | awk '/^totals:/ {s += $2} END {print s + 0}')
  ctl=0
  for f in "$dir"/cg.out.*; do
    ctl=$((ctl + $(callgrind_annotate --inclusive=yes "$f" 2>/dev/null |
      awk '/_rjem_mallctl \[/ {gsub(/,/, "", $1); s += $1} END {print s + 0}')))
  done
  echo $(((total - ctl) / N))
}

printf '\nUser-space instructions per command (callgrind), %s; N=%s, abacus args: %s\n' \
  "$(date -u +%F)" "$N" "${ABACUS_ARGS:-default}"
printf '%-12s %10s %10s\n' workload PFADD HLL.ADD
for w in one-key one-key-x10 10k-keys; do
  row=()
  for cmd in pfadd hll.add; do
    case $w in
      one-key) row+=("$(instr 100000000 "$cmd" hll __rand_int__)") ;;
      # shellcheck disable=SC2086
      one-key-x10) row+=("$(instr 100000000 "$cmd" hll $R10)") ;;
      10k-keys) row+=("$(instr 10000 "$cmd" hll:__rand_int__ __rand_int__)") ;;
    esac
  done
  printf '%-12s %10s %10s\n' "$w" "${row[0]}" "${row[1]}"
done
