#!/usr/bin/env bash
# W8 (issue 23): event streams and attribution, Debian's Redis and Abacus side by side.
#
# 1. Load: USERS users (default 1,000,000) with 20 events each on average (impressions,
#    clicks and visits from 8 channels, 3% of the users converting), generated once by
#    bench/w8_gen.py and sent with `redis-cli --pipe` (pipelined XADDs) to each server:
#    memory per entry (INFO used_memory delta / events; target at most 0.5x Redis) and the
#    load's rate.
# 2. XADD throughput: redis-benchmark `XADD user:__rand_int__ * ...` -c 50 -P 16 (target at
#    least 1.5x Redis), ROUNDS rounds alternating servers, median.
# 3. ATTRIBUTE MATCH user:* with all five models over every user on Abacus: wall time and
#    events scanned per second; next to it, DuckDB computing the linear model from a CSV
#    export of the same events (if `import duckdb` works in $DUCKDB_PYTHON, default python3;
#    `pip install duckdb` in a virtual environment), with the largest difference between
#    the two linear results.
#
#   bench/w8.sh                                  USERS=1000000 ROUNDS=3
#   USERS=100000 ROUNDS=1 bench/w8.sh            quicker
#   USERS=10000000 bench/w8.sh                   the bigger machine's run (about 200M events:
#                                                ~45 GB for Redis, 4 GB of generated files)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
USERS=${USERS:-1000000}
ROUNDS=${ROUNDS:-3}
N=${N:-1000000}
DUCKDB_PYTHON=${DUCKDB_PYTHON:-python3}

start_pair
echo "redis $(redis-server --version | awk '{print $3}') on $RPORT, abacus on $APORT; USERS=$USERS rounds=$ROUNDS"
echo "generating the events..."
EVENTS=$(python3 "$ROOT/bench/w8_gen.py" "$USERS" 8 "$BENCH_TMP/events.resp" "$BENCH_TMP/events.csv")
echo "$EVENTS events, $(du -h "$BENCH_TMP/events.resp" | cut -f1) of XADDs"

used() { redis-cli -p "$1" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r'; }

printf '\n%-8s %14s %14s %12s\n' server bytes/entry load_events/s seconds
declare -A per
for target in redis abacus; do
  port=$RPORT; [ "$target" = abacus ] && port=$APORT
  redis-cli -p "$port" flushall >/dev/null
  before=$(used "$port")
  start=$(date +%s.%N)
  redis-cli -p "$port" --pipe < "$BENCH_TMP/events.resp" > "$BENCH_TMP/pipe-$target.log"
  end=$(date +%s.%N)
  after=$(used "$port")
  per[$target]=$(echo "($after - $before) / $EVENTS" | bc -l)
  printf '%-8s %14.1f %14.0f %12.1f\n' "$target" "${per[$target]}" "$(echo "$EVENTS / ($end - $start)" | bc -l)" "$(echo "$end - $start" | bc -l)"
done
printf 'memory ratio abacus/redis: %.2f (target <= 0.5)\n' "$(echo "${per[abacus]} / ${per[redis]}" | bc -l)"
# Redis's copy is no longer needed: free its memory before the rest.
redis-cli -p "$RPORT" flushall >/dev/null

echo
echo "ATTRIBUTE MATCH user:* ... MODELS first last linear position decay HALFLIFE 7d LOOKBACK 30d"
start=$(date +%s.%N)
redis-cli -p "$APORT" ATTRIBUTE MATCH 'user:*' CHANNEL source CONVERSION event purchase VALUE amount \
  MODELS first last linear position decay HALFLIFE 7d LOOKBACK 30d > "$BENCH_TMP/attribute.txt"
end=$(date +%s.%N)
secs=$(echo "$end - $start" | bc -l)
scanned=$(awk 'prev=="events" {print; exit} {prev=$0}' "$BENCH_TMP/attribute.txt")
printf 'wall %.2f s, %s events scanned, %.1f million events/s\n' "$secs" "$scanned" "$(echo "$scanned / $secs / 1000000" | bc -l)"
head -12 "$BENCH_TMP/attribute.txt" | paste -sd' ' | cut -c1-200

if "$DUCKDB_PYTHON" -c 'import duckdb' 2>/dev/null; then
  redis-cli -p "$APORT" ATTRIBUTE MATCH 'user:*' CHANNEL source CONVERSION event purchase VALUE amount \
    MODELS linear LOOKBACK 30d > "$BENCH_TMP/linear.txt"
  "$DUCKDB_PYTHON" - "$BENCH_TMP/events.csv" "$BENCH_TMP/linear.txt" <<'PY'
import sys, time
import duckdb

csv, linear = sys.argv[1], sys.argv[2]
lines = open(linear).read().split("\n")
# redis-cli prints the RESP2 map flat: ... models, linear, then channel, conversions, value.
i = lines.index("linear")
ours = {}
for j in range(i + 1, len(lines) - 2, 3):
    if not lines[j]:
        break
    ours[lines[j]] = (float(lines[j + 1]), float(lines[j + 2]))
con = duckdb.connect()
t0 = time.time()
con.execute(f"CREATE TABLE events AS SELECT * FROM read_csv('{csv}', header=true, columns={{'user':'BIGINT','ms':'BIGINT','seq':'BIGINT','channel':'VARCHAR','event':'VARCHAR','amount':'DOUBLE'}})")
t1 = time.time()
rows = con.execute("""
WITH ordered AS (
  SELECT *, SUM(CASE WHEN event = 'purchase' THEN 1 ELSE 0 END)
              OVER (PARTITION BY "user" ORDER BY ms, seq ROWS UNBOUNDED PRECEDING) AS upto
  FROM events),
conv AS (SELECT "user", ms AS cms, upto AS k, COALESCE(amount, 0) AS value FROM ordered WHERE event = 'purchase'),
touch AS (SELECT "user", ms, channel, upto + 1 AS k FROM ordered
          WHERE event IS NOT NULL AND event <> 'purchase' AND channel IS NOT NULL),
path AS (SELECT t.channel, c."user", c.k, c.value FROM conv c JOIN touch t
           ON t."user" = c."user" AND t.k = c.k AND t.ms >= c.cms - CAST(2592000000 AS BIGINT)),
sized AS (SELECT *, COUNT(*) OVER (PARTITION BY "user", k) AS n FROM path)
SELECT channel, SUM(1.0 / n), SUM(value / n) FROM sized GROUP BY channel ORDER BY channel
""").fetchall()
t2 = time.time()
diff = max(abs(ours.get(ch, (0, 0))[0] - c) + abs(ours.get(ch, (0, 0))[1] - v) / max(1.0, abs(v)) for ch, c, v in rows)
print("DuckDB %s, linear model: load %.2f s, query %.2f s; largest difference from ATTRIBUTE's linear: %.2e"
      % (duckdb.__version__, t1 - t0, t2 - t1, diff))
PY
else
  echo "DuckDB reference skipped: no 'import duckdb' in $DUCKDB_PYTHON (pip install duckdb in a venv, set DUCKDB_PYTHON)"
fi

echo
printf 'XADD user:__rand_int__ * (2 fields) over 100,000 keys, -c 50 -P 16, n=%s\n' "$N"
declare -A xr
for round in $(seq 1 "$ROUNDS"); do
  for target in redis abacus; do
    port=$RPORT; [ "$target" = abacus ] && port=$APORT
    redis-cli -p "$port" flushall >/dev/null
    rps=$(redis-benchmark -p "$port" -r 100000 -n "$N" -c 50 -P 16 -q --csv \
      XADD user:__rand_int__ '*' source google event click | awk -F, 'NR==2 {gsub(/"/,"",$2); print $2}')
    xr[$target]+="$rps "
  done
done
r=$(median ${xr[redis]}); a=$(median ${xr[abacus]})
printf '%14s %14s %8s\n' redis_ops/s abacus_ops/s ratio
printf '%14.0f %14.0f %8.2f (target >= 1.5)\n' "$r" "$a" "$(echo "$a / $r" | bc -l)"
