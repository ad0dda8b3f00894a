-- Every table the worker writes stays bounded (issue 12): besides the pairs of
-- filter_matches, the routine run's retention sweep forgets
--   * notifications the push sender has sent (sent_at set) and that are older
--     than --retention-days (unsent ones are the push sender's and are kept);
--   * finished runs older than that, except each shard layout's latest and any
--     run a shard's progress points at;
--   * bookkeeping rows of filters and profiles whose row is gone.
-- The notifications sweep finds its rows by this index, oldest first, in
-- bounded batches like the pairs' (one index entry per digest written).
CREATE INDEX IF NOT EXISTS notifications_created_at ON notifications (created_at);
