#!/usr/bin/env bash
# Runs Miri (the Rust interpreter that detects undefined behaviour) over every crate's unsafe
# code: the hash table's segment storage and keys (abacus-table), the string and packed values
# (abacus-keyspace: strbuf.rs, packed.rs), and the zero-copy argument lists (abacus-protocol:
# args.rs, through its unit tests; the parser's proptests take hours under Miri). The tests
# run with Miri-sized cases (the heavy behaviour tests are `cfg_attr(miri, ignore)`).
#
# Not part of scripts/test.sh: on a 2-core machine it takes about 40 minutes (table ~17,
# keyspace ~19, protocol a few), more than the test command's budget. Run it after changing
# any of those files, and note the result in the change.
#
#   scripts/miri.sh              all three crates
#   scripts/miri.sh table        one of: table, keyspace, protocol
#
# Needs rustup (it installs the nightly toolchain and its miri component if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v rustup >/dev/null; then
  echo "scripts/miri.sh: needs rustup (Miri ships as a nightly component)" >&2
  exit 1
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  echo "==> Installing the nightly toolchain with miri"
  rustup toolchain install nightly --profile minimal --component miri,rust-src
  cargo +nightly miri setup
fi
# Isolation off: proptest reads its regression files.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}"

run() {
  echo "==> Miri: $*"
  local t0=$SECONDS
  cargo +nightly miri test "$@"
  echo "    ($(( SECONDS - t0 )) s)"
}

what=${1:-all}
case $what in
  table|all) run -p abacus-table ;;&
  keyspace|all) run -p abacus-keyspace --lib -- packed strbuf ;;&
  protocol|all) run -p abacus-protocol --lib -- args ;;&
  table|keyspace|protocol|all) ;;
  *) echo "scripts/miri.sh: unknown crate '$what' (table, keyspace, protocol)" >&2; exit 1 ;;
esac
echo "==> Miri: no undefined behaviour found"
