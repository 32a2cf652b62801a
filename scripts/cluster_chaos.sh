#!/usr/bin/env bash
# Soak/chaos run on a local six-node Abacus cluster (three primaries, one replica each, made
# with `redis-cli --cluster create --cluster-replicas 1`). Not part of the test command.
# Each of ROUNDS rounds runs a writer (scripts/cluster_chaos.py: SET of counters, each
# followed by WAIT 1) while the script either kill -9's a random primary, waits for its
# replica to take over and restarts it (it rejoins as a replica), or SIGSTOPs a random node
# for longer than the node timeout and then SIGCONTs it. After each round: the cluster must
# settle with `redis-cli --cluster check` OK, and every acknowledged write must read back
# with its value (or a later one sent). Exits non-zero on any loss or a cluster that does not
# settle.
#
#   scripts/cluster_chaos.sh
#   ROUNDS=3 NODE_TIMEOUT=2000 scripts/cluster_chaos.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-20}
NODE_TIMEOUT=${NODE_TIMEOUT:-2000}
ABACUS_BIN=${ABACUS_BIN:-$ROOT/target/release/abacus}
PY=${PY:-}
if [ -z "$PY" ] && [ -x "$ROOT/.venv-tests/bin/python" ]; then PY=$ROOT/.venv-tests/bin/python; fi
[ -n "$PY" ] || { echo "no python with redis-py (.venv-tests)" >&2; exit 2; }
[ -x "$ABACUS_BIN" ] || (cd "$ROOT" && cargo build --release -q -p abacus)

TMP=$(mktemp -d /tmp/abacus-chaos.XXXXXX)
declare -A PID
WRITER=
cleanup() {
  local p
  [ -n "$WRITER" ] && kill "$WRITER" 2>/dev/null || true
  for p in "${PID[@]:-}"; do
    [ -n "$p" ] || continue
    kill -CONT "$p" 2>/dev/null || true
    kill "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Six client ports whose bus ports (+10000) are free too.
PORTS=()
while [ ${#PORTS[@]} -lt 6 ]; do
  p=$((20000 + RANDOM % 10000))
  case " ${PORTS[*]:-} " in *" $p "*) continue ;; esac
  if python3 -c "import socket; [socket.socket().bind(('127.0.0.1', q)) for q in ($p, $p + 10000)]" 2>/dev/null; then
    PORTS+=("$p")
  fi
done

start_node() {
  local p=$1
  mkdir -p "$TMP/$p"
  "$ABACUS_BIN" serve --port "$p" --dir "$TMP/$p" --save '' --appendonly no \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout "$NODE_TIMEOUT" \
    >>"$TMP/$p.log" 2>&1 &
  PID[$p]=$!
  for _ in $(seq 1 200); do
    [ "$(rcli -p "$p" ping 2>/dev/null)" = PONG ] && return 0
    sleep 0.05
  done
  echo "node $p did not start" >&2; exit 1
}

# redis-cli that gives up after 2 s (a SIGSTOPped node never answers).
rcli() { timeout 2 redis-cli "$@"; }

log() { printf '%s %s\n' "$(date -u +%T)" "$*"; }

# A live node to ask.
live() {
  local p
  for p in "${PORTS[@]}"; do
    [ "$(rcli -p "$p" ping 2>/dev/null)" = PONG ] && { echo "$p"; return; }
  done
}

# settled: all six nodes up and agreeing, every slot served, three primaries with one
# replica each, `redis-cli --cluster check` OK. Waits up to 60 s.
settle() {
  local deadline=$((SECONDS + 60)) p ok out
  while [ $SECONDS -lt $deadline ]; do
    ok=1
    for p in "${PORTS[@]}"; do
      out=$(rcli -p "$p" cluster info 2>/dev/null || true)
      case "$out" in *cluster_state:ok*) ;; *) ok=0; break ;; esac
      # No node flagged as failing or in handshake in anyone's view.
      out=$(rcli -p "$p" cluster nodes 2>/dev/null || echo fail)
      case "$out" in *fail*|*handshake*|*noaddr*) ok=0; break ;; esac
    done
    if [ $ok = 1 ]; then
      p=$(live)
      out=$(timeout 10 redis-cli --cluster check "127.0.0.1:$p" 2>&1 || true)
      if grep -q '\[OK\] All 16384 slots covered' <<<"$out" && ! grep -q '\[ERR\]\|\[WARNING\]' <<<"$out" &&
        [ "$(grep -c '| 1 slaves\.' <<<"$out")" = 3 ]; then
        return 0
      fi
    fi
    sleep 0.5
  done
  echo "cluster did not settle in 60 s; last check:" >&2
  timeout 10 redis-cli --cluster check "127.0.0.1:$(live)" >&2 || true
  return 1
}

primary_ports() {
  rcli -p "$(live)" cluster nodes | tr -d '\r' |
    awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != "" {split($2, a, "[:@]"); print a[2]}'
}

for p in "${PORTS[@]}"; do start_node "$p"; done
addrs=(); for p in "${PORTS[@]}"; do addrs+=("127.0.0.1:$p"); done
redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$TMP/create.log"
settle
log "cluster up on ports ${PORTS[*]}, node timeout $NODE_TIMEOUT ms, $ROUNDS rounds"

STATE=$TMP/state.json
for r in $(seq 1 "$ROUNDS"); do
  rm -f "$TMP/stop"
  "$PY" "$ROOT/scripts/cluster_chaos.py" write "$(live)" "$STATE" "$TMP/stop" >"$TMP/writer.log" 2>&1 &
  WRITER=$!
  sleep 1
  if [ $((RANDOM % 2)) = 0 ]; then
    mapfile -t prim < <(primary_ports)
    v=${prim[RANDOM % ${#prim[@]}]}
    log "round $r: kill -9 primary $v"
    kill -9 "${PID[$v]}"; wait "${PID[$v]}" 2>/dev/null || true
    # Wait until another node holds its slots (its replica was promoted).
    deadline=$((SECONDS + 60))
    until rcli -p "$(live)" cluster nodes | tr -d '\r' | grep -v ":$v@" | awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != ""' | [ "$(wc -l)" = 3 ]; do
      [ $SECONDS -lt $deadline ] || { echo "no failover for $v in 60 s" >&2; exit 1; }
      sleep 0.1
    done
    log "round $r: failover done, restarting $v"
    start_node "$v"
  else
    # A primary half the time (its replica takes over), else any node.
    if [ $((RANDOM % 2)) = 0 ]; then
      mapfile -t prim < <(primary_ports)
      v=${prim[RANDOM % ${#prim[@]}]}
    else
      v=${PORTS[RANDOM % 6]}
    fi
    pause=$(printf %.1f "$(echo "$NODE_TIMEOUT * 2 / 1000" | bc -l)")
    role=$(rcli -p "$v" role 2>/dev/null | head -1 || true)
    log "round $r: SIGSTOP node $v ($role) for ${pause} s"
    kill -STOP "${PID[$v]}"
    sleep "$pause"
    kill -CONT "${PID[$v]}"
  fi
  settle || { kill "$WRITER" 2>/dev/null; exit 1; }
  sleep 1
  touch "$TMP/stop"
  wait "$WRITER" || { echo "writer failed:" >&2; cat "$TMP/writer.log" >&2; exit 1; }
  WRITER=
  log "round $r: $(cat "$TMP/writer.log")"
  if ! out=$("$PY" "$ROOT/scripts/cluster_chaos.py" check "$(live)" "$STATE"); then
    echo "$out"; log "round $r: LOSS"; exit 1
  fi
  log "round $r: cluster check OK; $out"
done
log "all $ROUNDS rounds passed"
