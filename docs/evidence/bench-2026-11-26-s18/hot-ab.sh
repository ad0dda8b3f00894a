#!/bin/bash
# usage: hot-ab.sh ROUNDS DAYS -- soaks alternating binA (main) and binB (spread), each followed by the marks' HOT share
export DATABASE_URL="host=/work/main/.pgdata/socket port=5432 user=matcher dbname=matcher"
export MATCHER_SQL_DIR=/work/main/sql
P="psql -X -At -h /work/main/.pgdata/socket -U matcher -d matcher_bench_soak"
one() {
  echo "== $1"
  /tmp/s18/bin$1/matcher-bench soak --profiles 200000 --filters 20000 --days $2 --retention-days 7 --mix ${MIX:-steady} 2>&1 | grep -E "^ +[0-9]+ "
  sleep 2
  echo "marks|hot|hot_share|heap|pkey|table+indexes: $($P -c "select n_tup_upd, n_tup_hot_upd, round(n_tup_hot_upd::numeric/greatest(n_tup_upd,1),3), pg_size_pretty(pg_relation_size('filter_matches')), pg_size_pretty(pg_relation_size('filter_matches_pkey')), pg_size_pretty(pg_total_relation_size('filter_matches')) from pg_stat_user_tables where relname='filter_matches'")"
}
for r in $(seq 1 $1); do
  if [ $((r % 2)) -eq 1 ]; then one B $2; one A $2; else one A $2; one B $2; fi
done
