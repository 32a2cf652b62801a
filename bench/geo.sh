#!/usr/bin/env bash
# GEOSEARCH BYRADIUS over a 10-million-member GEO set: Debian's Redis and Abacus side by side
# (issue 31's target: Abacus at least 1.5x Redis's ops/s).
#
# Set-up, on each server: N members (default 10,000,000) added with pipelined GEOADD by
# redis-benchmark (-P 1000), at random positions in the 1 x 1 degree square [0, 1) x [0, 1)
# (`0.__rand_int__e3` with -r 10^9: a uniform fraction with 9 digits; redis-benchmark's
# random number is at most 2^31, so a region away from 0 cannot be drawn this way), member
# names `m` + a random 12-digit number (so about 0.5% of the adds update an earlier member).
# Both servers get the same distribution, not the same points. Then
#   GEOSEARCH geo FROMLONLAT <random> <random> BYRADIUS $RADIUS m
# with random centres in the square, by redis-benchmark (-c $CLIENTS -P $PIPELINE), ROUNDS
# rounds alternating servers; prints each round's ops/s, the medians and the ratio. With the
# default 120 m radius a search returns ~35 members (fewer near the square's edges); the
# script prints the average of 200 searches on each server, and checks that both servers
# answer the same fixed search with sets of similar size.
#
#   bench/geo.sh                                   defaults: N=10000000 Q=200000 ROUNDS=3
#   N=1000000 Q=50000 bench/geo.sh                 quicker
#   ABACUS_ARGS="--threads 4" bench/geo.sh         Abacus's worker threads (default: its own)
#   EXTRA="WITHDIST ASC" bench/geo.sh              options appended to every search
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-10000000}
Q=${Q:-200000}
ROUNDS=${ROUNDS:-3}
RADIUS=${RADIUS:-120}
CLIENTS=${CLIENTS:-50}
PIPELINE=${PIPELINE:-4}
EXTRA=${EXTRA:-}

start_pair
echo "redis $(redis-server --version | awk '{print $3}') on $RPORT, abacus on $APORT ${ABACUS_ARGS:-};" \
  "N=$N members, Q=$Q searches x $ROUNDS rounds, radius ${RADIUS} m${EXTRA:+ $EXTRA}, -c $CLIENTS -P $PIPELINE; $(nproc) CPUs"

coord='0.__rand_int__e3'
load() {
  redis-benchmark -p "$1" -n "$N" -c 20 -P 1000 -r 1000000000 -q \
    geoadd geo "$coord" "$coord" m__rand_int__ >/dev/null
}
t0=$(date +%s.%N); load "$RPORT"; t1=$(date +%s.%N); load "$APORT"; t2=$(date +%s.%N)
rc=$(redis-cli -p "$RPORT" zcard geo); ac=$(redis-cli -p "$APORT" zcard geo)
printf 'load: redis %.1f s (%s members), abacus %.1f s (%s members)\n' \
  "$(echo "$t1 - $t0" | bc)" "$rc" "$(echo "$t2 - $t1" | bc)" "$ac"

BENCH_DIR="$ROOT/bench" python3 - "$RPORT" "$APORT" "$RADIUS" <<'PY'
import os, random, sys
sys.path.insert(0, os.environ["BENCH_DIR"])
from resp import Conn  # bench/resp.py
rport, aport, radius = sys.argv[1:]
rnd = random.Random(31)
centres = [(rnd.random(), rnd.random()) for _ in range(200)]
for name, port in (("redis", rport), ("abacus", aport)):
    c = Conn(int(port))
    sizes = [len(c.call(("GEOSEARCH", "geo", "FROMLONLAT", x, y, "BYRADIUS", radius, "m"))[0])
             for x, y in centres]
    print("%s: %.1f members per search on average (min %d, max %d)"
          % (name, sum(sizes) / len(sizes), min(sizes), max(sizes)))
PY

search() {
  redis-benchmark -p "$1" -n "$Q" -c "$CLIENTS" -P "$PIPELINE" -r 1000000000 -q --csv \
    geosearch geo FROMLONLAT "$coord" "$coord" BYRADIUS "$RADIUS" m $EXTRA |
    awk -F, 'NR == 2 || /GEOSEARCH|geosearch/ {gsub(/"/, "", $2); print $2; exit}'
}
rs=(); as=()
for i in $(seq 1 "$ROUNDS"); do
  r=$(search "$RPORT"); a=$(search "$APORT")
  echo "round $i: redis $r ops/s, abacus $a ops/s"
  rs+=("$r"); as+=("$a")
done
rm_=$(median "${rs[@]}"); am=$(median "${as[@]}")
printf "GEOSEARCH BYRADIUS %s m${EXTRA:+ $EXTRA} over %s members: redis %.0f ops/s, abacus %.0f ops/s, abacus/redis %.2fx\n" \
  "$RADIUS" "$N" "$rm_" "$am" "$(echo "$am / $rm_" | bc -l)"
