#!/usr/bin/env bash
# `abacus export` (issue 52): rows per second, file size against the data set's memory, and
# the exporter's peak memory, online (a running server) and offline (`--dir`: the stopped
# server's data directory, snapshot plus log, loaded in the exporter's process).
#
# Data: USERS per-user streams of ENTRIES entries each (3 short fields, like W8's events),
# loaded with XADD through redis-cli --pipe, and a summary of N_GROUPS groups (count, exact
# decimal sum, min, max; bucket none) fed through SUMMARY.INGEST. Then, each timed under
# /usr/bin/time (wall seconds, peak RSS of the exporter):
#   abacus export --streams 'u:*'          (nested: one row per stream)
#   abacus export --streams 'u:*' --flat   (one row per entry)
#   abacus export --summary big            (one row per group)
# first online, then, after a SAVE, 1000 more entries (in the log only) and SHUTDOWN, the same
# three offline (`--dir`; the wall time includes loading the snapshot and replaying the log).
# Reported: entries (or groups) per second, the file's size, the server's used_memory for
# the data, and, when the duckdb Python module is installed, the size of DuckDB's own zstd
# Parquet of the same flat rows (COPY ... TO ... (FORMAT parquet, COMPRESSION zstd)).
#
#   bench/export.sh                          defaults: USERS=100000 ENTRIES=10 N_GROUPS=100000
#   USERS=1000000 N_GROUPS=1000000 bench/export.sh   the issue's size (10M entries, 1M groups)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
USERS=${USERS:-100000}
ENTRIES=${ENTRIES:-10}
N_GROUPS=${N_GROUPS:-100000}
PY=${PYTHON:-$ROOT/.venv-tests/bin/python}
[ -x "$PY" ] || PY=python3

cat > "$BENCH_TMP/rules.toml" <<'EOF'
[feed.sales]
format = "csv"
columns = ["ts", "g", "amount"]
time = { field = "ts", unit = "s" }

[[summary]]
name = "big"
feed = "sales"
dimensions = ["g"]
bucket = "none"
metrics = { n = "count", spend = "sum(amount)", lo = "min(amount)", hi = "max(amount)" }
EOF

APORT=$(free_port)
start_abacus "$APORT" --save "" --summarizer-rules "$BENCH_TMP/rules.toml"
DATA_DIR="$BENCH_TMP/abacus-$APORT"
APID=$(pid_of_port "$APORT")
echo "export: $USERS streams x $ENTRIES entries, $N_GROUPS summary groups; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%Y-%m-%d %H:%M') UTC, $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"

python3 - "$USERS" "$ENTRIES" > "$BENCH_TMP/streams.resp" <<'EOF'
import random, sys
users, entries = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(1)
out = sys.stdout.buffer
channels = [b"ads", b"mail", b"search", b"social", b"direct", b"partner", b"video", b"push"]
def cmd(*a):
    out.write(b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a))
for u in range(users):
    key = b"u:%d" % u
    t = 1_700_000_000_000 + rng.randrange(10**9)
    for i in range(entries):
        t += rng.randrange(1, 10**6)
        ev = b"purchase" if rng.random() < 0.03 else b"click"
        cmd(b"XADD", key, b"%d-0" % t, b"channel", rng.choice(channels), b"event", ev, b"amount", b"%d.%02d" % (rng.randrange(500), rng.randrange(100)))
EOF
redis-cli -p "$APORT" --pipe < "$BENCH_TMP/streams.resp" > /dev/null
python3 - "$N_GROUPS" > "$BENCH_TMP/sales.csv" <<'EOF'
import random, sys
rng = random.Random(2)
for i in range(int(sys.argv[1]) * 3):
    print("%d,g%d,%d.%02d" % (1_700_000_000 + i, i % int(sys.argv[1]), rng.randrange(1000), rng.randrange(100)))
EOF
"$ABACUS_BIN" ingest --quiet --feed sales -p "$APORT" "$BENCH_TMP/sales.csv" > /dev/null
used=$(redis-cli -p "$APORT" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
echo "server used_memory with the data: $((used / 1048576)) MB (RSS $(( $(rss_kb "$APID") / 1024 )) MB)"

run() { # name rows-label rows export-args...
  local name=$1 label=$2 rows=$3; shift 3
  /usr/bin/time -f '%e %M %U %S' -o "$BENCH_TMP/time" "$ABACUS_BIN" export -q --out "$BENCH_TMP/$name.parquet" "$@" 2> /dev/null
  read -r wall peak_kb user sys < "$BENCH_TMP/time"
  local size; size=$(stat -c %s "$BENCH_TMP/$name.parquet")
  # CPU seconds beside the wall time: on a shared machine the wall time includes waiting.
  python3 -c "import sys; r,w,s,p,c=int(sys.argv[1]),float(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4]),float(sys.argv[7])+float(sys.argv[8]); print('%-16s %9d %-8s in %6.2f s (cpu %6.2f s): %9.0f %s/s, file %7.1f MB, exporter peak RSS %6.1f MB' % (sys.argv[5], r, sys.argv[6], w, c, r / max(w, 1e-3), sys.argv[6], s / 1e6, p / 1024))" "$rows" "$wall" "$size" "$peak_kb" "$name" "$label" "$user" "$sys"
}
run nested entries $((USERS * ENTRIES)) -p "$APORT" --streams 'u:*'
run flat entries $((USERS * ENTRIES)) -p "$APORT" --streams 'u:*' --flat
run summary groups "$N_GROUPS" -p "$APORT" --summary big
# Offline: a snapshot of everything, 1000 entries after it (the log), then a clean stop.
redis-cli -p "$APORT" save > /dev/null
for i in $(seq 1000); do echo "XADD u:$((i % USERS)) * channel late event click amount 1.00"; done | redis-cli -p "$APORT" > /dev/null
redis-cli -p "$APORT" shutdown > /dev/null 2>&1 || true
while kill -0 "$APID" 2> /dev/null; do sleep 0.1; done
echo "data directory: $(du -sm "$DATA_DIR" | cut -f1) MB"
OFFLINE_ENTRIES=$((USERS * ENTRIES + 1000))
run offline-nested entries "$OFFLINE_ENTRIES" --dir "$DATA_DIR" --streams 'u:*'
run offline-flat entries "$OFFLINE_ENTRIES" --dir "$DATA_DIR" --streams 'u:*' --flat
run offline-summary groups "$N_GROUPS" --dir "$DATA_DIR" --rules "$BENCH_TMP/rules.toml" --summary big
if "$PY" -c "import duckdb" 2> /dev/null; then
  "$PY" - "$BENCH_TMP" <<'EOF'
import duckdb, os, sys
d = sys.argv[1]
duckdb.sql("copy (select * from '%s/flat.parquet') to '%s/duck.parquet' (format parquet, compression zstd)" % (d, d))
ours, theirs = os.path.getsize(d + "/flat.parquet"), os.path.getsize(d + "/duck.parquet")
print("flat rows: abacus %.1f MB, DuckDB's own zstd export of the same rows %.1f MB (ratio %.2f)" % (ours / 1e6, theirs / 1e6, ours / theirs))
EOF
fi
