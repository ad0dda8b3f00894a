#!/bin/bash
# Runs against the private PostgreSQL of scripts/pg after `matcher-bench versus-sql --skip-peer` has loaded matcher_bench_worker.
# usage: [RESET_SQL=file] ab.sh ROUNDS BIN_A BIN_B  -- alternating first runs on matcher_bench_worker
export DATABASE_URL="host=/work/main/.pgdata/socket port=5432 user=matcher dbname=matcher_bench_worker"
P="psql -X -q -At -h /work/main/.pgdata/socket -U matcher -d matcher_bench_worker"
one() {
  $P -f "${RESET_SQL:-$(dirname "$0")/reset.sql}"
  /usr/bin/time -f "%e %U %S %M" -o /tmp/ab-time.txt "$1" run --now 2026-03-01T03:00:00Z --format json --log-format json 2>/dev/null > /tmp/ab-out.json
  sum=$($P -c "SELECT count(*), left(md5(string_agg(filter_id||':'||profile_id||':'||(notification_id IS NOT NULL)||':'||mutual, ',' ORDER BY filter_id, profile_id)),12) FROM filter_matches")
  nsum=$($P -c "SELECT count(*), left(md5(string_agg(filter_id||':'||match_count||':'||profile_ids::text||':'||mutual_count, ',' ORDER BY filter_id)),12) FROM notifications")
  read e u s m < /tmp/ab-time.txt
  w=$(python3 -c 'import json; d=json.load(open("/tmp/ab-out.json")); print(d["time"]["write"])')
  echo "$2 wall $e cpu $(python3 -c "print(round($u+$s,2))") rss_kb $m write $w rows $sum notes $nsum"
}
for r in $(seq 1 $1); do
  if [ $((r % 2)) -eq 1 ]; then one $2 A; one $3 B; else one $3 B; one $2 A; fi
done
