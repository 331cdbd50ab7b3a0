#!/usr/bin/env bash
# Measures reconcile throughput (records/s) with `leadpipe demo`: a fake lead
# source on loopback holds RECORDS records, every webhook is "dropped"
# (--drop-share 1.0), so one reconcile run creates them all through the
# write path (pages of 1,000, one transaction each); then a second run reads
# them all again from the start, every record `unchanged` (--reconcile-again:
# the cost of a reconcile when the webhooks worked). On SQLite (a fresh
# file) and on a throwaway PostgreSQL with its default durability
# (scripts/pg-test-cluster start --durable). Release build.
#
#   bench/reconcile.sh [RECORDS]            # default 100000
#   BACKENDS=sqlite bench/reconcile.sh      # only SQLite
set -euo pipefail
cd "$(dirname "$0")/.."

RECORDS=${1:-100000}
BACKENDS=${BACKENDS:-"sqlite postgres"}
trap '[[ $BACKENDS == *postgres* ]] && scripts/pg-test-cluster stop >/dev/null 2>&1 || true' EXIT

cargo build --release -q -p leadpipe
BIN=target/release/leadpipe
ARGS=(demo --records "$RECORDS" --drop-share 1.0 --redeliver-share 0 --page-size 1000
      --reconcile-again --no-progress)

for backend in $BACKENDS; do
    echo "== $backend: $RECORDS records"
    case $backend in
        sqlite) "$BIN" "${ARGS[@]}" ;;
        postgres)
            url=$(scripts/pg-test-cluster start --durable)
            db="${url%/*}/reconcile_bench"
            psql=${PG_BINDIR:-/usr/lib/postgresql/15/bin}/psql
            [[ -x $psql ]] || psql=psql
            "$psql" "$url" -q -c 'CREATE DATABASE reconcile_bench'
            "$BIN" "${ARGS[@]}" --db "$db"
            ;;
    esac
done
