#!/usr/bin/env bash
# Crash soak: many more SIGKILL rounds than the test command runs (20).
#   ROUNDS=500 SEED=3 scripts/crash-soak.sh
# Each round writes under load with appendfsync always, kills the server at a random moment,
# restarts it on the same data directory and checks that every acknowledged write is there
# (tests/e2e/test_persistence.py::test_sigkill_under_load_loses_no_acknowledged_write).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q
ABACUS_CRASH_ROUNDS="${ROUNDS:-200}" ABACUS_CRASH_SEED="${SEED:-$RANDOM}" \
    python3 -m pytest -q -p no:cacheprovider \
    "tests/e2e/test_persistence.py::test_sigkill_under_load_loses_no_acknowledged_write" "$@"
