#!/usr/bin/env bash
# Runs every Abacus test on a fresh Debian 12 machine: installs what the tests need (Debian
# packages through apt-get, Python packages into virtual environments under the project),
# starts a throwaway PostgreSQL with postgresql-hll for the HLL differential tests, builds,
# runs the Rust tests and the end-to-end suite, and cleans up.
#
#   scripts/test.sh                   everything
#   SKIP_INSTALL=1 scripts/test.sh    skip apt-get and pip (when you know they are installed)
#
# Needs: root or sudo (for apt-get), and a Rust toolchain (1.89 or newer: https://rustup.rs),
# which this script cannot install for you. Everything else it installs. Python packages go
# into `.venv-tests/` (and `.venv-python-hll/`), never into the system Python, which
# Debian's own python3 refuses (PEP 668, "externally-managed-environment").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
RUST_MIN=1.89

SUDO=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "scripts/test.sh: needs root or sudo to install Debian packages (or SKIP_INSTALL=1 if they are installed)" >&2
    exit 1
  fi
  SUDO="sudo"
fi

# The one prerequisite this script does not install: check it first, before minutes of apt.
if ! command -v cargo >/dev/null; then
  echo "scripts/test.sh: no Rust toolchain found (cargo is not on PATH)." >&2
  echo "  Install Rust $RUST_MIN or newer, for example: curl https://sh.rustup.rs -sSf | sh" >&2
  exit 1
fi
rustc_version=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n%s\n' "$RUST_MIN" "$rustc_version" | sort -V | head -1)" != "$RUST_MIN" ]; then
  echo "scripts/test.sh: Rust $rustc_version is too old; Abacus needs $RUST_MIN or newer (rustup update)" >&2
  exit 1
fi

PG_DIR=""
POLICY_RC_D=""
cleanup() {
  if [ -n "$POLICY_RC_D" ]; then $SUDO rm -f /usr/sbin/policy-rc.d || true; fi
  if [ -n "$PG_DIR" ]; then crates/hll/scripts/pg-stop.sh "$PG_DIR" >/dev/null 2>&1 || true; fi
}
# Whatever happens (a failed install, a failed test, Ctrl-C), nothing is left behind.
trap cleanup EXIT

VENV="$ROOT/.venv-tests"
# Debian's own Python when there is one (what a bare Debian machine runs), else the first on PATH.
PYTHON=python3
if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; fi
if [ -z "${SKIP_INSTALL:-}" ]; then
  echo "==> Installing Debian packages (redis-server, redis-sentinel, redis-tools, postgresql-15-hll, python3-venv, openssl, build tools)"
  $SUDO apt-get update -qq
  # The packages' start-up scripts would launch system services; the tests start their own
  # servers on free ports, so keep the system ones from starting. Removed by the trap.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    POLICY_RC_D=1
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    redis-server redis-sentinel redis-tools postgresql-15 postgresql-15-hll \
    python3 python3-venv python3-pip build-essential openssl \
    prometheus prometheus-redis-exporter >/dev/null
  if [ -n "$POLICY_RC_D" ]; then $SUDO rm -f /usr/sbin/policy-rc.d; POLICY_RC_D=""; fi
  echo "==> Python test packages into $VENV"
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r tests/requirements.txt
  echo "==> python-hll in its own virtualenv (it needs numpy < 1.24)"
  [ -x "$ROOT/.venv-python-hll/bin/python" ] || "$PYTHON" -m venv "$ROOT/.venv-python-hll"
  "$ROOT/.venv-python-hll/bin/pip" install -q --disable-pip-version-check -r tests/hll_python/requirements.txt
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "scripts/test.sh: $VENV is missing: run once without SKIP_INSTALL" >&2
  exit 1
fi
if [ -x "$ROOT/.venv-python-hll/bin/python" ]; then
  export ABACUS_PYTHON_HLL="$ROOT/.venv-python-hll/bin/python"
fi

echo "==> Starting a throwaway PostgreSQL with postgresql-hll"
PG_PORT=$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ABACUS_PG_URL=$(crates/hll/scripts/pg-start.sh "$PG_PORT")
PG_DIR="/tmp/abacus-pg.$PG_PORT"
export ABACUS_PG_URL

echo "==> Building"
cargo build --release --locked -p abacus

echo "==> Rust tests"
cargo test --workspace --locked

echo "==> End-to-end tests (real server, redis-py, redis-cli)"
ABACUS_BIN="$ROOT/target/release/abacus" "$VENV/bin/python" -m pytest tests/e2e -q -p no:cacheprovider
