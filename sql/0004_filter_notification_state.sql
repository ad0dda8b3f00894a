-- Per-filter notification state, owned by the worker. A unit of work locks the rows
-- of the filters it decides notifications for (in id order), so that two writers
-- (a run and an overlapping backfill, say) never both decide a digest for the same
-- filter, whether or not matches are waiting; and it keeps the last notification
-- time, so the decision needs no scan of notifications.
CREATE TABLE matcher_filter_state (
    filter_id        bigint PRIMARY KEY,
    last_notified_at timestamptz
);
