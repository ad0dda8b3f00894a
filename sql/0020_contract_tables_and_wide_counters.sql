-- 1. The worker's own output tables as the contract lists them (runs.md "Tables"), created before the
--    first `matcher migrate` by another team (the push sender's, say): 0001 leaves existing tables as they
--    are, and the contract does not list `notifications.run_id`, which the units write. Added only where
--    missing, so that an installation whose tables have it takes no lock on them here.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                   WHERE attrelid = 'notifications'::regclass AND attname = 'run_id' AND NOT attisdropped) THEN
        ALTER TABLE notifications ADD COLUMN run_id bigint;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                   WHERE attrelid = 'filter_matches'::regclass AND attname = 'run_id' AND NOT attisdropped) THEN
        ALTER TABLE filter_matches ADD COLUMN run_id bigint;
    END IF;
END
$$;

-- 2. A run's match counters as bigint: a backfill of every filter at 1M x 100k with a cap above about 21k
--    records more than 2^31 pairs, and the unit that passed it failed "integer out of range" on every resume.
--    matcher_runs holds a bounded number of rows (0009), so the rewrite is small. Binaries of schema 19 read
--    the columns as before (their values fit) and add to them the same way.
ALTER TABLE matcher_runs
    ALTER COLUMN matches_written TYPE bigint,
    ALTER COLUMN matches_mutual TYPE bigint;
