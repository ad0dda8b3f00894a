#!/bin/bash
# The first run's pairs loaded with psql alone into an empty copy of filter_matches, with and without a second
# index. After a first run on matcher_bench_worker, the pairs were written out with
#   \copy (select * from filter_matches where filter_id <= 5000 order by 1,2) to '/tmp/s17/fm1.bin' with (format binary)
#   \copy (select * from filter_matches where filter_id > 5000 order by 1,2) to '/tmp/s17/fm2.bin' with (format binary)
P="psql -X -q -At -h /work/main/.pgdata/socket -U matcher -d matcher_bench_worker"
setup() {
$P <<SQL 2>/dev/null
DROP TABLE IF EXISTS fm_floor;
CREATE TABLE fm_floor (LIKE filter_matches INCLUDING DEFAULTS) WITH (fillfactor=90);
$1
CHECKPOINT;
SQL
}
run() {
  s=$(date +%s.%N); c0=$(awk '/^cpu /{print $2+$3+$4}' /proc/stat)
  w0=$($P -c "select pg_current_wal_lsn()")
  $P -c "\copy fm_floor from '/tmp/s17/fm1.bin' with (format binary)" -c "\copy fm_floor from '/tmp/s17/fm2.bin' with (format binary)"
  e=$(date +%s.%N); c1=$(awk '/^cpu /{print $2+$3+$4}' /proc/stat)
  echo "$1 wall $(echo "$e - $s" | bc | cut -c1-5) cpu_s $(echo "($c1 - $c0)/100" | bc -l | cut -c1-5) wal_mb $($P -c "select (pg_current_wal_lsn()-'$w0')/1e6")"
}
for i in 1 2 3; do
setup ""; run "heap"
setup "ALTER TABLE fm_floor ADD PRIMARY KEY (filter_id, profile_id);"; run "pk"
setup "ALTER TABLE fm_floor ADD PRIMARY KEY (filter_id, profile_id); CREATE INDEX ON fm_floor (matched_at, filter_id);"; run "pk+ret2"
setup "ALTER TABLE fm_floor ADD PRIMARY KEY (filter_id, profile_id); CREATE INDEX ON fm_floor (matched_at);"; run "pk+ret1"
setup "ALTER TABLE fm_floor ADD PRIMARY KEY (filter_id, profile_id); CREATE INDEX ON fm_floor using brin (matched_at);"; run "pk+brin"
done
