#!/bin/bash
# Full-page images of one replayed run, by relation.
set -e
cd /work/main
PSQL="psql -X -h /work/main/.pgdata/socket -U matcher"
WALDUMP=/usr/lib/postgresql/15/bin/pg_waldump
for day in "$@"; do
  $PSQL -d matcher -qc "DROP DATABASE IF EXISTS matcher_fpi WITH (FORCE)" -c "CREATE DATABASE matcher_fpi TEMPLATE matcher_bench_soak_day_$day STRATEGY file_copy"
  clock=$(date -u -d "2026-03-01T03:00:00Z + $((day-1)) days" +%Y-%m-%dT%H:%M:%SZ)
  $PSQL -d matcher_fpi -qc "CHECKPOINT"
  lsn1=$($PSQL -d matcher_fpi -Atc "select pg_current_wal_insert_lsn()")
  start=$(date +%s.%N)
  DATABASE_URL="host=/work/main/.pgdata/socket port=5432 user=matcher dbname=matcher_fpi" .build/release/matcher run --now "$clock" --retention-days 7 --format json --log-format json > /tmp/s26/run-$day.json 2>/dev/null
  end=$(date +%s.%N)
  lsn2=$($PSQL -d matcher_fpi -Atc "select pg_current_wal_insert_lsn()")
  echo "day $day run $(echo "$end - $start" | bc) s, WAL $lsn1 .. $lsn2"
  runuser -u postgres -- $WALDUMP -p .pgdata/data/pg_wal -s $lsn1 -e $lsn2 2>/dev/null > /tmp/s26/wal-$day.txt || true
  $PSQL -d matcher_fpi -Atc "select relfilenode||' '||relname from pg_class where relfilenode<>0" > /tmp/s26/rels-$day.txt
  python3 - "$day" <<'PYEOF'
import re,sys,collections
day=sys.argv[1]
rels=dict(l.split(' ',1) for l in open(f'/tmp/s26/rels-{day}.txt').read().split('\n') if l)
fpi=collections.Counter(); recs=collections.Counter(); fpibytes=collections.Counter()
for line in open(f'/tmp/s26/wal-{day}.txt'):
    m=re.match(r'rmgr: (\w+)\s+len \(rec/tot\):\s+(\d+)/\s*(\d+).*?desc: (\w+)',line)
    if not m: continue
    for b in re.finditer(r'blkref #\d+: rel \d+/\d+/(\d+)(?: fork \w+)? blk \d+( FPW)?',line):
        name=rels.get(b.group(1),b.group(1))
        key=(name,m.group(1)+'/'+m.group(4))
        recs[key]+=1
        if b.group(2): fpi[key]+=1
tot=sum(fpi.values())
print(f'day {day}: {tot} full-page images')
for k,v in fpi.most_common(15): print(f'  {v:7d} FPI  {recs[k]:8d} refs  {k[0]}  {k[1]}')
PYEOF
done
