-- The retention sweep's index, keyed (matched_at, filter_id) instead of (matched_at) alone.
--
-- Every pair a run records has the run's clock as matched_at, so with (matched_at) alone the
-- run's write connections all inserted the same key at the index's right edge and queued on the
-- same leaf pages. With the filter id in the key, each connection's unit (a range of filter ids)
-- inserts into its own pages. Measured on the first run at 100k x 10k (887k pairs, two write
-- connections): the write phase 3.95 s median with (matched_at), 3.35 s with (matched_at,
-- filter_id); with one write connection the two are equal (5.5-6.2 s), so the difference is the
-- contention. The sweep reads it exactly as before (matched_at < cutoff, oldest first), and
-- deduplication keeps it as small (a filter's pairs of one run share a key).
--
-- Built without CONCURRENTLY (migrations run in a transaction): it blocks the table's writes, not
-- its reads, for about ten seconds per ten million pairs.
CREATE INDEX IF NOT EXISTS filter_matches_matched_at_filter ON filter_matches (matched_at, filter_id);
DROP INDEX IF EXISTS filter_matches_matched_at;
