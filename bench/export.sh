#!/usr/bin/env bash
# Measures the bulk export (`leadpipe export`, the same paged writer as
# `GET /api/leads/export`) at two sizes, to show its memory does not grow
# with the number of leads: wall time, rows/s and peak RSS (GNU time's
# "Maximum resident set size"), CSV and NDJSON, on SQLite. Leads are seeded
# straight into the table with SQL (the write path is measured elsewhere),
# then checkpointed, so the export does not read a seeding-sized WAL.
#
#   bench/export.sh                  # 100k and 1M leads, release build
#   PROFILE=debug bench/export.sh 20000 200000
#
# Needs: cargo, sqlite3, /usr/bin/time (GNU time).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=("${@:-100000 1000000}")
read -r -a SIZES <<<"${SIZES[*]}"
PROFILE=${PROFILE:-release}
OUT=$(mktemp -d /tmp/leadpipe-export-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

if [[ $PROFILE == release ]]; then
    cargo build --release -q -p leadpipe --bin leadpipe
else
    cargo build -q -p leadpipe --bin leadpipe
fi
BIN=target/$PROFILE/leadpipe

for rows in "${SIZES[@]}"; do
    db="$OUT/export-$rows.db"
    url="sqlite://$db?mode=rwc"
    DATABASE_URL=$url "$BIN" migrate >/dev/null
    sqlite3 "$db" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $rows)
        INSERT INTO lead (source, source_ref, email, phone, name, company, payload, content_hash,
                          status, version, processed_version, created_at, updated_at)
        SELECT 'bench', 'ref-' || i, 'person' || i || '@example.com', '+4930' || i,
               'Person ' || i, 'Company ' || (i % 5000), '{\"form\":\"contact\"}', 'h' || i,
               'new', 1, 1, '2026-11-30T10:00:00+00:00', strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', '-' || i || ' seconds')
        FROM n;
        PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
    for format in csv ndjson; do
        start=$(date +%s.%N)
        DATABASE_URL=$url /usr/bin/time -v "$BIN" export --format "$format" --source bench \
            >"$OUT/out.$format" 2>"$OUT/time.log"
        end=$(date +%s.%N)
        secs=$(echo "$end - $start" | bc -l)
        lines=$(wc -l <"$OUT/out.$format")
        rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$OUT/time.log")
        printf '%9d leads  %-6s %8.1f s %10.0f rows/s  %7.1f MiB out  peak RSS %6.1f MiB  (%d lines)\n' \
            "$rows" "$format" "$secs" "$(echo "$rows / $secs" | bc -l)" \
            "$(echo "$(stat -c %s "$OUT/out.$format") / 1048576" | bc -l)" "$(echo "$rss / 1024" | bc -l)" "$lines"
    done
    rm -f "$db" "$db"-*
done
