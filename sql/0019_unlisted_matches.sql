-- Matches recorded while their filter's notify is off. runs.md: a filter with notify on and unnotified matches gets
-- a digest when it is due, so the matches a filter recorded while its owner had notify off are counted by its
-- first digest after notify is turned on (those still within the retention, and still candidates then).
-- They are not listed as waiting while notify is off: matcher_waiting_matches holds what a digest may count, and
-- listing every notify-off filter's pairs for the whole retention would double their writes and their forgetting.
-- Instead a unit that records such matches notes here the earliest clock it recorded them at, holding the row until
-- it commits; the first run that finds the filter notifying lists its unnotified, non-silent matches recorded from
-- then on (and within the retention) as waiting, and clears the note, in one transaction of two statements (the
-- notes locked, then listed and cleared: PostgresMatchingStore.listUnlistedMatches). One row per filter, forgotten
-- with the filter.
ALTER TABLE matcher_filter_state ADD COLUMN IF NOT EXISTS unlisted_from timestamptz;
-- The runs read the noted filters only (a few per cent of the table at most).
CREATE INDEX IF NOT EXISTS matcher_filter_state_unlisted ON matcher_filter_state (filter_id)
    WHERE unlisted_from IS NOT NULL;
-- Matches recorded before this migration while their filter's notify was off are noted from the start of time
-- (the retention bounds what is listed). A filter that had notify on, passed a match over and then turned
-- notify off may so get such a match listed once more; the note cannot tell them apart.
INSERT INTO matcher_filter_state (filter_id, last_notified_at, unlisted_from)
SELECT f.id, (SELECT max(n.created_at) FROM notifications n WHERE n.filter_id = f.id), '-infinity'
FROM saved_filters f
WHERE f.deleted_at IS NULL AND coalesce(f.notify::text, 'true') NOT IN ('true', 't')
  AND EXISTS (SELECT 1 FROM filter_matches m
              WHERE m.filter_id = f.id AND m.notification_id IS NULL AND NOT m.silent)
ORDER BY f.id
ON CONFLICT (filter_id) DO UPDATE SET unlisted_from = '-infinity';
