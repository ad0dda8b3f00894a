#!/bin/bash
# The first run with and without the retention index (a423825, schema at 0011): the index dropped and created
# again between runs, one binary.  usage: idx-ab.sh BIN   (after `matcher-bench versus-sql` loaded
# matcher_bench_worker)
BIN="$1"
P="psql -X -q -At -h /work/main/.pgdata/socket -U matcher -d matcher_bench_worker"
AB="$(cd "$(dirname "$0")" && pwd)/../bench-2026-11-26-s16/ab.sh"
for r in 1 2 3 4; do
 for v in with without; do
  if [ $v = with ]; then $P -c "CREATE INDEX IF NOT EXISTS filter_matches_matched_at_filter ON filter_matches (matched_at, filter_id)"; else $P -c "DROP INDEX IF EXISTS filter_matches_matched_at_filter"; fi
  bash "$AB" 1 "$BIN" "$BIN" 2>&1 | sed "s/^/$v /"
 done
done
$P -c "CREATE INDEX IF NOT EXISTS filter_matches_matched_at_filter ON filter_matches (matched_at, filter_id)"
