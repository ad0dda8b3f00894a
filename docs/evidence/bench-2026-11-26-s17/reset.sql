TRUNCATE filter_matches, notifications, matcher_runs, matcher_shard_progress, matcher_invalid_filters, matcher_filter_state, matcher_waiting_matches, matcher_quarantine, matcher_bulk_matches;
VACUUM ANALYZE filter_matches, notifications;
CHECKPOINT;
