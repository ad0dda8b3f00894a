#!/bin/bash
# usage: replay-ab.sh ROUNDS DAY... -- kept days replayed by binA (main) and binB (spread), alternating which goes first
export DATABASE_URL="host=/work/main/.pgdata/socket port=5432 user=matcher dbname=matcher"
export MATCHER_SQL_DIR=/work/main/sql
rounds=$1; shift; days=""; for d in "$@"; do days="$days --day $d"; done
one() { /tmp/s18/bin$1/matcher-bench replay $days --rounds 1 2>&1 | grep -E "^ +1 " | sed "s/^/$1 /"; }
for r in $(seq 1 $rounds); do
  if [ $((r % 2)) -eq 1 ]; then one A; one B; else one B; one A; fi
done
