-- Pairs recorded in bulk are listed by clock and filter instead of indexed one by one (issue 12).
--
-- A run that considers every profile for every filter (the service's first run, a backfill) records the
-- world's matches at once: 887k pairs at 100k x 10k. Each pair's entry in the retention index cost about
-- a microsecond of server time: the first run took 3.94 s with the index and 3.20 s without it (medians of
-- eight alternating runs each, docs/evidence/bench-2026-11-26-s17/). Such a run now writes its pairs with
-- `bulk` set, which keeps them out of the retention index, and lists them in matcher_bulk_matches, one row
-- per (filter, clock). The retention sweep forgets them from that list through the primary key, in bounded
-- batches, when their clock expires: once, for what was one run's write.
--
-- Every other run's pairs stay in the retention index, which forgets a day's pairs more cheaply than the
-- list would (a stretch of one index read in heap order, against a descent of the primary key a pair:
-- measured in session 5, docs/decisions.md "The retention index stays").
--
-- `bulk` never changes after the insert, so marking a match notified stays a HOT update.
ALTER TABLE filter_matches ADD COLUMN IF NOT EXISTS bulk boolean NOT NULL DEFAULT false;

CREATE TABLE IF NOT EXISTS matcher_bulk_matches (
    filter_id   bigint NOT NULL,
    matched_at  timestamptz NOT NULL,
    -- The pairs (filter_id, profile_id) recorded at matched_at with bulk set, ascending.
    profile_ids bigint[] NOT NULL,
    PRIMARY KEY (filter_id, matched_at)
);
-- Whether anything listed has expired: one descent, so that the runs of a young service pay nothing.
CREATE INDEX IF NOT EXISTS matcher_bulk_matches_matched_at ON matcher_bulk_matches (matched_at);

-- The retention index without the bulk pairs. Built without CONCURRENTLY (migrations run in a
-- transaction): it blocks the table's writes, not its reads, for about ten seconds per ten million pairs.
CREATE INDEX IF NOT EXISTS filter_matches_retention ON filter_matches (matched_at, filter_id) WHERE NOT bulk;
DROP INDEX IF EXISTS filter_matches_matched_at_filter;
