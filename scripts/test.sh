#!/usr/bin/env bash
# Runs every Abacus test on a fresh Debian machine: installs what the tests need (Debian
# packages, Python packages), starts a throwaway PostgreSQL with postgresql-hll for the HLL
# differential tests, builds, runs the Rust tests and the end-to-end suite, and cleans up.
#
#   scripts/test.sh            everything
#   SKIP_INSTALL=1 scripts/test.sh   skip apt/pip (when you know they are installed)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

if [ -z "${SKIP_INSTALL:-}" ]; then
  echo "==> Installing Debian packages (redis-server, redis-tools, postgresql-15-hll)"
  $SUDO apt-get update -qq
  # The packages' start-up scripts would launch system services; the tests start their own
  # servers on free ports, so keep the system ones from starting.
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    redis-server redis-tools postgresql-15 postgresql-15-hll python3-venv >/dev/null
  $SUDO rm -f /usr/sbin/policy-rc.d
  echo "==> Installing Python packages"
  python3 -m pip install -q --disable-pip-version-check -r tests/requirements.txt
  echo "==> python-hll in its own virtualenv (it needs numpy < 1.24)"
  python3 -m venv "$ROOT/.venv-python-hll"
  "$ROOT/.venv-python-hll/bin/pip" install -q --disable-pip-version-check -r tests/hll_python/requirements.txt
fi
if [ -x "$ROOT/.venv-python-hll/bin/python" ]; then
  export ABACUS_PYTHON_HLL="$ROOT/.venv-python-hll/bin/python"
fi

PG_DIR=""
cleanup() {
  if [ -n "$PG_DIR" ]; then crates/hll/scripts/pg-stop.sh "$PG_DIR" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

echo "==> Starting a throwaway PostgreSQL with postgresql-hll"
PG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ABACUS_PG_URL=$(crates/hll/scripts/pg-start.sh "$PG_PORT")
PG_DIR="/tmp/abacus-pg.$PG_PORT"
export ABACUS_PG_URL

echo "==> Building"
cargo build --release --locked -p abacus

echo "==> Rust tests"
cargo test --workspace --locked

echo "==> End-to-end tests (real server, redis-py, redis-cli)"
ABACUS_BIN="$ROOT/target/release/abacus" python3 -m pytest tests/e2e -q -p no:cacheprovider
