#!/usr/bin/env bash
# W5 summarizer: events/s end to end, Abacus against the same summaries in Redis.
#
# bench/w5gen.py writes N seeded events as v1 CSV and v2 JSON lines and the rules file
# (6 summaries on v1, each event fanning out to 2-6 of them; 2 on v2, SKUs fanning out).
# Abacus: `abacus ingest --feed v1|v2 --connections C FILE` into a server started with those
# rules, timed from start until the last batch is acknowledged (the client's own figure).
# Redis: the equivalent HINCRBY/HINCRBYFLOAT/PFADD/SADD commands, prepared as RESP before
# timing (Redis is not charged for parsing), fed by `redis-cli --pipe`. Both servers run
# without persistence. DuckDB's time to compute the same aggregates from the file is printed
# as a reference when the duckdb Python module is installed. With the 2 cores shared by
# client and server, the CPU each spends per event matters as much as events/s: the line
# after each feed gives the server's (/proc/PID/stat utime+stime around the ingest) and the
# client's (`abacus ingest` under /usr/bin/time) CPU microseconds per event, and the load
# average.
#
# The server's threads' scheduler statistics (/proc/PID/task/*/schedstat) give, besides the
# CPU it got, the time its threads were runnable but waiting for a core: their sum over the
# wall time is how many cores the server could have used ("demand"). On a machine shared
# with other work events/s fall with its load, while the demand says whether the server
# itself keeps both cores busy (it did not: 1.5 cores, before batches were parsed in slices
# that yield to the shard jobs of the same thread).
#
#   bench/w5.sh                 defaults: N=500000 SEED=1 C=2
#   N=100000 bench/w5.sh        quicker
#   BINS="/tmp/old/abacus target/release/abacus" ROUNDS=2 N=1000000 bench/w5.sh
#                               builds side by side: each round runs every binary in turn
#                               (a fresh server each) on the same files, then Redis
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-500000}
SEED=${SEED:-1}
C=${C:-2}
GEN="python3 $ROOT/bench/w5gen.py"

$GEN rules 0 0 > "$BENCH_TMP/rules.toml"
for f in v1 v2 redis-v1 redis-v2; do $GEN "$f" "$N" "$SEED" > "$BENCH_TMP/$f.in"; done
BINS=${BINS:-$ABACUS_BIN}
ROUNDS=${ROUNDS:-1}
RPORT=$(free_port); start_redis "$RPORT"
echo "W5: N=$N events per feed, seed $SEED, abacus ingest --connections $C; redis $(redis-server --version | awk '{print $3}') on $RPORT"
echo "$(nproc) cores, $(date -u +%Y-%m-%d)"

# CPU seconds (user+system) a process has used so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
# Nanoseconds a process's threads ran and waited runnable for a core, so far.
sched_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{r += $1; w += $2} END {printf "%.0f %.0f\n", r, w}'; }

rate() { python3 -c "import sys; print('%.0f' % (int(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2"; }

for round in $(seq 1 "$ROUNDS"); do
for feed in v1 v2; do
  rates=()
  for bin in $BINS; do
    APORT=$(free_port)
    ABACUS_BIN=$bin start_abacus "$APORT" --appendonly no --save "" --summarizer-rules "$BENCH_TMP/rules.toml"
    APID=$(pid_of_port "$APORT")
    s0=$(cpu_s "$APID"); read -r r0 w0 < <(sched_ns "$APID"); t0=$(date +%s.%N)
    line=$(/usr/bin/time -f '%U %S' -o "$BENCH_TMP/client-cpu" "$bin" ingest --quiet --feed "$feed" -p "$APORT" --connections "$C" "$BENCH_TMP/$feed.in")
    t1=$(date +%s.%N); s1=$(cpu_s "$APID"); read -r r1 w1 < <(sched_ns "$APID")
    a_rate=$(echo "$line" | sed -E 's/.* ([0-9]+) events\/s$/\1/')
    rates+=("$a_rate")
    a_keys=$(redis-cli -p "$APORT" dbsize)
    redis-cli -p "$APORT" shutdown nosave >/dev/null 2>&1 || true
    while kill -0 "$APID" 2>/dev/null; do sleep 0.05; done
    echo "$feed round $round: abacus $a_rate events/s ($a_keys keys), $bin"
    echo "  abacus: $line"
    read -r cu cs < "$BENCH_TMP/client-cpu"
    python3 -c "import sys; n=int(sys.argv[1]); w=float(sys.argv[7])-float(sys.argv[6]); print('  abacus CPU per event: server %.2f us, client (abacus ingest) %.2f us; server cores: ran %.2f, runnable %.2f (demand); load average %s' % ((float(sys.argv[3]) - float(sys.argv[2])) * 1e6 / n, (float(sys.argv[4]) + float(sys.argv[5])) * 1e6 / n, (int(sys.argv[9]) - int(sys.argv[8])) / 1e9 / w, (int(sys.argv[9]) - int(sys.argv[8]) + int(sys.argv[11]) - int(sys.argv[10])) / 1e9 / w, sys.argv[12]))" "$N" "$s0" "$s1" "$cu" "$cs" "$t0" "$t1" "$r0" "$r1" "$w0" "$w1" "$(cut -d' ' -f1-3 /proc/loadavg)"
  done
  redis-cli -p "$RPORT" flushall >/dev/null
  t0=$(date +%s.%N)
  redis-cli -p "$RPORT" --pipe < "$BENCH_TMP/redis-$feed.in" >/dev/null
  t1=$(date +%s.%N)
  r_secs=$(python3 -c "print($t1 - $t0)")
  r_rate=$(rate "$N" "$r_secs")
  r_keys=$(redis-cli -p "$RPORT" dbsize)
  echo "$feed round $round: redis --pipe $r_rate events/s ($r_keys keys) | abacus/redis $(for a in "${rates[@]}"; do python3 -c "print('%.2fx' % ($a / $r_rate), end=' ')"; done)(in BINS order)"
done
done

# DuckDB from the tests' virtual environment (scripts/test.sh installs it there), else the
# system python; DUCKDB_PYTHON=/path/to/python picks another.
DUCKDB_PYTHON=${DUCKDB_PYTHON:-$ROOT/.venv-tests/bin/python}
[ -x "$DUCKDB_PYTHON" ] || DUCKDB_PYTHON=python3
if "$DUCKDB_PYTHON" -c "import duckdb" 2>/dev/null; then
  "$DUCKDB_PYTHON" - "$BENCH_TMP/v1.in" <<'PY'
import sys, time, duckdb
t = time.time()
con = duckdb.connect()
con.execute("create table e as select * from read_csv(?, header=false, columns={'ts':'BIGINT','campaign':'VARCHAR','u':'BIGINT','state':'VARCHAR','event':'VARCHAR','cost':'DOUBLE'})", [sys.argv[1]])
con.execute("select campaign, ts // 86400, count(*), sum(cost), approx_count_distinct(u) from e group by all").fetchall()
con.execute("select state, ts // 3600, count(*) from e group by all").fetchall()
con.execute("select campaign, state, ts // 86400, count(*), count(distinct u) from e where event = 'click' group by all").fetchall()
print("duckdb reference (v1, 3 of the GROUP BYs, from the file): %.2f s" % (time.time() - t))
PY
else
  echo "duckdb reference: the duckdb Python module is not installed (pip install duckdb, or DUCKDB_PYTHON=...)"
fi
