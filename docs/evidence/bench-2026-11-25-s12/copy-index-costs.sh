P="psql -X -h /work/main/.pgdata/socket -U matcher -d matcher_bench_worker"
$P -q <<'SQL'
DROP TABLE IF EXISTS t1, t2, t3, t5;
CREATE TABLE t1 (LIKE filter_matches INCLUDING DEFAULTS) WITH (fillfactor=90); ALTER TABLE t1 ADD PRIMARY KEY (filter_id, profile_id);
CREATE TABLE t2 (LIKE filter_matches INCLUDING DEFAULTS) WITH (fillfactor=90); ALTER TABLE t2 ADD PRIMARY KEY (filter_id, profile_id); CREATE INDEX ON t2 (matched_at, filter_id);
CREATE TABLE t3 (LIKE filter_matches INCLUDING DEFAULTS) WITH (fillfactor=90); ALTER TABLE t3 ADD PRIMARY KEY (filter_id, profile_id); CREATE INDEX ON t3 (matched_at, filter_id) WITH (deduplicate_items = off);
CREATE TABLE t5 (LIKE filter_matches INCLUDING DEFAULTS) WITH (fillfactor=90); ALTER TABLE t5 ADD PRIMARY KEY (filter_id, profile_id); CREATE INDEX ON t5 USING brin (matched_at) WITH (pages_per_range = 32);
SQL
for r in 1 2 3 4 5; do
  for t in t1 t2 t3 t5; do
    $P -q -c "TRUNCATE $t" -c "CHECKPOINT"
    s=$(date +%s.%N); $P -q -c "\copy $t FROM '/tmp/fm.bin' (FORMAT binary)"; e=$(date +%s.%N)
    echo "$r $t $(echo "$e - $s" | bc)"
  done
done
$P -q -c "DROP TABLE t1, t2, t3, t5"
