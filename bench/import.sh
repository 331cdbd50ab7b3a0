#!/usr/bin/env bash
# Measures `leadpipe import` on a generated 100k-row CSV: throughput (rows/s)
# and peak RSS (GNU time's "Maximum resident set size"), on SQLite and on a
# throwaway PostgreSQL (scripts/pg-test-cluster start --durable, i.e. with
# PostgreSQL's default fsync settings). Three runs per backend: the first
# import (all created), the same file again (all unchanged), and a dry run of
# a corrected file (5% of rows changed).
#
#   bench/import.sh [ROWS]          # default 100000
#   BACKENDS=sqlite bench/import.sh # only SQLite
#
# Needs: cargo (builds target/release/leadpipe), /usr/bin/time (GNU time).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${1:-100000}
BACKENDS=${BACKENDS:-"sqlite postgres"}
OUT=$(mktemp -d /tmp/leadpipe-bench.XXXXXX)
trap 'rm -rf "$OUT"; [[ $BACKENDS == *postgres* ]] && scripts/pg-test-cluster stop >/dev/null 2>&1 || true' EXIT

cargo build --release -q -p leadpipe
BIN=target/release/leadpipe

# A trade-show export: an id column that is not called source_ref, a few
# fields, and two columns that end up in the payload.
gen() {
    local changed_every=$1
    awk -v rows="$ROWS" -v every="$changed_every" 'BEGIN {
        print "Badge ID,E-mail,Full name,Company,Phone,Booth,Interest"
        for (i = 1; i <= rows; i++) {
            mail = "visitor" i "@company" (i % 5000) ".example"
            if (every > 0 && i % every == 0) mail = "changed" i "@company" (i % 5000) ".example"
            printf "badge-%07d,%s,Visitor %d,Company %d,+49 30 %07d,H%d-%d,\"cloud, data\"\n", i, mail, i, i % 5000, i, i % 12, i % 300
        }
    }'
}
gen 0 > "$OUT/leads.csv"
gen 20 > "$OUT/corrected.csv"
echo "generated $ROWS rows: $(du -h "$OUT/leads.csv" | cut -f1)"

measure() { # label url args...
    local label=$1 url=$2; shift 2
    local log="$OUT/time.log"
    local start end
    start=$(date +%s.%N)
    DATABASE_URL=$url /usr/bin/time -v "$BIN" import --no-progress --source tradeshow \
        --map 'source_ref=Badge ID,email=E-mail,name=Full name' "$@" >"$OUT/stdout" 2>"$log"
    end=$(date +%s.%N)
    local rss secs
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
    secs=$(echo "$end - $start" | bc -l)
    printf '%-10s %-28s %8.1f s %10.0f rows/s   peak RSS %6.1f MiB   %s\n' \
        "$backend" "$label" "$secs" "$(echo "$ROWS / $secs" | bc -l)" "$(echo "$rss / 1024" | bc -l)" \
        "$(grep -o '[0-9]* created.*' "$OUT/stdout")"
}

for backend in $BACKENDS; do
    case $backend in
        sqlite) url="sqlite://$OUT/bench.db?mode=rwc" ;;
        postgres)
            admin=$(scripts/pg-test-cluster start --durable)
            psql=${PG_BINDIR:-/usr/lib/postgresql/15/bin}/psql
            [[ -x $psql ]] || psql=psql
            "$psql" "$admin" -q -c 'CREATE DATABASE leadpipe_bench'
            url="${admin%/*}/leadpipe_bench"
            ;;
    esac
    DATABASE_URL=$url "$BIN" migrate >/dev/null
    measure "first import" "$url" "$OUT/leads.csv"
    measure "same file again" "$url" "$OUT/leads.csv"
    measure "corrected, dry run" "$url" --dry-run "$OUT/corrected.csv"
    measure "corrected" "$url" "$OUT/corrected.csv"
done
