#!/bin/bash
# Digest days under each layout: an 8-day growing soak by each binary keeping days 4 and 8 (3-day and weekly digest
# days), then those days replayed by the binary that laid them out, alternating. usage: digest-ab.sh ROUNDS
export DATABASE_URL="host=/work/main/.pgdata/socket port=5432 user=matcher dbname=matcher"
export MATCHER_SQL_DIR=/work/main/sql
P="psql -X -q -At -h /work/main/.pgdata/socket -U matcher -d postgres"
for b in A B; do
  for d in 4 8; do $P -c "DROP DATABASE IF EXISTS ${b,,}_soak_day_$d"; done
  /tmp/s18/bin$b/matcher-bench soak --profiles 200000 --filters 20000 --days 8 --retention-days 7 --keep-day 4 --keep-day 8 2>&1 | grep -E "^ +[0-9]+ " | sed "s/^/soak $b /"
  for d in 4 8; do $P -c "ALTER DATABASE matcher_bench_soak_day_$d RENAME TO ${b,,}_soak_day_$d"; done
done
one() {
  for d in 4 8; do $P -c "ALTER DATABASE ${1,,}_soak_day_$d RENAME TO matcher_bench_soak_day_$d"; done
  /tmp/s18/bin$1/matcher-bench replay --day 4 --day 8 --rounds 1 2>&1 | grep -E "^ +1 " | sed "s/^/replay $1 /"
  for d in 4 8; do $P -c "ALTER DATABASE matcher_bench_soak_day_$d RENAME TO ${1,,}_soak_day_$d"; done
}
for r in $(seq 1 $1); do
  if [ $((r % 2)) -eq 1 ]; then one A; one B; else one B; one A; fi
done
