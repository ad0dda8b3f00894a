-- Matching over months (runs.md, "Incremental run", "Shards", retention).
--
-- 1. Change capture records only changes that matter to matching. The triggers themselves
--    are derived from the MasterItem catalogue and (re)installed by `matcher migrate` after
--    the numbered files (MatchingPostgres/ChangeCapture.swift), so adding an item needs no
--    trigger edit. Rows recorded so far are kept: pending changes survive the upgrade.
--    `changed_at` lets an operator reset progress to a time (after a restore).
DROP TRIGGER IF EXISTS matcher_profiles_inserted ON profiles;
DROP TRIGGER IF EXISTS matcher_profiles_updated ON profiles;
DROP FUNCTION IF EXISTS matcher_record_profile_changes();
ALTER TABLE matcher_profile_changes ADD COLUMN changed_at timestamptz;

-- 2. Progress survives any change of the shard count: one row per layout's shard that has
--    succeeded (its "coverage"), ordered by when its snapshot was taken. A run derives, for each
--    of its filters, the newest coverage of the filter's owner. `snapshot` may be NULL after an
--    operator reset to a time (`reset_to`): then the changes recorded at or after that time count.
ALTER TABLE matcher_shard_progress ADD COLUMN taken_at timestamptz;
UPDATE matcher_shard_progress SET taken_at = updated_at;
ALTER TABLE matcher_shard_progress ALTER COLUMN taken_at SET NOT NULL;
ALTER TABLE matcher_shard_progress ALTER COLUMN snapshot DROP NOT NULL;
ALTER TABLE matcher_shard_progress ADD COLUMN reset_to timestamptz;
ALTER TABLE matcher_shard_progress ADD COLUMN time_zone text;
ALTER TABLE matcher_shard_progress
    ADD CONSTRAINT matcher_shard_progress_mark CHECK (snapshot IS NOT NULL OR reset_to IS NOT NULL);

-- A run's change windows (the coverage it started from), so that a resumed run uses exactly
-- the same ones; the time zone it ran with; and a status for runs an operator abandoned or
-- that a newer layout superseded.
ALTER TABLE matcher_runs ADD COLUMN coverage jsonb;
ALTER TABLE matcher_runs ADD COLUMN snapshot_taken_at timestamptz;
ALTER TABLE matcher_runs ADD COLUMN time_zone text;
ALTER TABLE matcher_runs ADD COLUMN retention_days integer;
ALTER TABLE matcher_runs ADD COLUMN matches_forgotten bigint NOT NULL DEFAULT 0;
ALTER TABLE matcher_runs DROP CONSTRAINT matcher_runs_status_check;
ALTER TABLE matcher_runs ADD CONSTRAINT matcher_runs_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'abandoned'));

-- 3. filter_matches: one write per match, the fewest indexes that serve.
--    PRIMARY KEY (filter_id, profile_id): the contract; a run's probe for already-recorded pairs
--      and the insert's own uniqueness check.
--    (matched_at): the retention sweep reads exactly the oldest rows, in order. Inserts arrive in time
--      order, so they only ever append at its right edge (cheap). A BRIN index would be smaller but
--      stops helping once deleted space is reused: a block range keeps the oldest time it ever held.
--    Dropped: (profile_id), which only served loading every recorded pair of every candidate (the
--      design that made a day's cost follow the history), and the partial index on unnotified
--      rows, whose predicate made marking a match notified a non-HOT rewrite. Waiting matches are
--      listed in matcher_waiting_matches instead, and fillfactor leaves room on each page so that
--      marking one notified (notification_id, mutual: no index reads them) is a HOT update.
DROP INDEX IF EXISTS filter_matches_profile_id;
DROP INDEX IF EXISTS filter_matches_unnotified;
ALTER TABLE filter_matches ADD COLUMN IF NOT EXISTS silent boolean NOT NULL DEFAULT false;
ALTER TABLE filter_matches ADD COLUMN IF NOT EXISTS mutual boolean NOT NULL DEFAULT false;
ALTER TABLE filter_matches SET (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.02,
                                autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX IF NOT EXISTS filter_matches_matched_at ON filter_matches (matched_at);

-- Matches recorded for a filter with notify on and not yet notified: what a digest may count. A row leaves
-- when its match is notified or forgotten. Small: at most what waits for the next digests.
CREATE TABLE matcher_waiting_matches (
    filter_id  bigint NOT NULL,
    profile_id bigint NOT NULL,
    matched_at timestamptz NOT NULL,
    PRIMARY KEY (filter_id, profile_id)
);
INSERT INTO matcher_waiting_matches (filter_id, profile_id, matched_at)
SELECT m.filter_id, m.profile_id, m.matched_at
FROM filter_matches m JOIN saved_filters f ON f.id = m.filter_id AND f.deleted_at IS NULL AND f.notify
WHERE m.notification_id IS NULL;

-- notifications: how many of a digest's matches are mutual (runs.md "Mutual matches").
ALTER TABLE notifications ADD COLUMN IF NOT EXISTS mutual_count integer NOT NULL DEFAULT 0;

-- Runs recorded before this migration: their single change window becomes their coverage, so
-- that an interrupted one is resumed with exactly the window it started with.
UPDATE matcher_runs SET snapshot_taken_at = started_at,
    coverage = jsonb_build_object('entries', CASE WHEN since_snapshot IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(
        jsonb_build_object(
            'shard', jsonb_build_object('index', shard_index, 'count', shard_count),
            'mark', jsonb_build_object('token', since_snapshot::text),
            'takenAt', jsonb_build_object('microsecondsSinceEpoch',
                                          (extract(epoch FROM started_at) * 1000000)::bigint))) END)
WHERE kind = 'run';
