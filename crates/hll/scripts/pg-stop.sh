#!/usr/bin/env bash
# Stop and delete a cluster started by pg-start.sh.  Usage: pg-stop.sh DIR
set -euo pipefail
DIR=${1:?usage: pg-stop.sh DIR (as printed by pg-start.sh)}
[ -f "$DIR/data/PG_VERSION" ] || { echo "pg-stop: $DIR is not a pg-start.sh cluster" >&2; exit 1; }
PGBIN=${PGBIN:-/usr/lib/postgresql/$(cat "$DIR/data/PG_VERSION")/bin}
if [ "$(id -u)" = 0 ]; then as_owner() { runuser -u postgres -- "$@"; }; else as_owner() { "$@"; }; fi
as_owner "$PGBIN/pg_ctl" -D "$DIR/data" -m fast -w stop >&2 || true
rm -rf "$DIR"
echo "pg-stop: removed $DIR" >&2
