P="psql -X -q -At -h /work/main/.pgdata/socket -U matcher -d matcher_bench_worker"
AB=/work/main/docs/evidence/bench-2026-11-26-s16/ab.sh
for r in 1 2 3 4; do
 for v in with without; do
  if [ $v = with ]; then $P -c "CREATE INDEX IF NOT EXISTS filter_matches_matched_at_filter ON filter_matches (matched_at, filter_id)"; else $P -c "DROP INDEX IF EXISTS filter_matches_matched_at_filter"; fi
  # ab.sh with 1 round runs A then B; use same binary, tag by v
  bash $AB 1 /tmp/s17/matcher-base /tmp/s17/matcher-base 2>&1 | sed "s/^/$v /"
 done
done
$P -c "CREATE INDEX IF NOT EXISTS filter_matches_matched_at_filter ON filter_matches (matched_at, filter_id)"
