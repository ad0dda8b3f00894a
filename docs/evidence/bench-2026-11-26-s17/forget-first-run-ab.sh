#!/bin/bash
# The day the first run's pairs expire: a first run at 100k x 10k (matcher_bench_worker, loaded by
# `matcher-bench versus-sql`), then a run 8 days later with 7 days kept, which forgets all 887k pairs.
# usage: forget-first-run-ab.sh ROUNDS BIN_A BIN_B
export DATABASE_URL="host=/work/main/.pgdata/socket port=5432 user=matcher dbname=matcher_bench_worker"
P="psql -X -q -At -h /work/main/.pgdata/socket -U matcher -d matcher_bench_worker"
one() {
  $P -f "$(dirname "$0")/reset.sql"
  "$1" run --now 2026-03-01T03:00:00Z --format json --log-format json >/dev/null 2>&1
  $P -c "VACUUM ANALYZE filter_matches" -c "CHECKPOINT"
  /usr/bin/time -f "%e" -o /tmp/forget-time.txt "$1" run --now 2026-03-09T03:00:00Z --retention-days 7 --format json --log-format json 2>/dev/null > /tmp/forget-out.json
  left=$($P -c "SELECT count(*) FROM filter_matches")
  python3 -c "
import json; d=json.load(open('/tmp/forget-out.json'))
print('$2', 'wall', open('/tmp/forget-time.txt').read().strip(), 'forget', round(d['time']['forget'],3), 'forgotten', d['counts']['matches_forgotten'], 'left', $left)"
}
for r in $(seq 1 $1); do
  if [ $((r % 2)) -eq 1 ]; then one $2 A; one $3 B; else one $3 B; one $2 A; fi
done
