BEGIN;
EXPLAIN (ANALYZE, BUFFERS, WAL, TIMING ON)
WITH stop AS (
    SELECT m.filter_id FROM filter_matches m
    WHERE m.matched_at = '2026-03-23 03:00:00+00' AND m.filter_id BETWEEN 3000 AND 6000
    ORDER BY m.filter_id OFFSET 50000 LIMIT 1
), span AS (
    SELECT coalesce((SELECT filter_id FROM stop) - 1, 6000::bigint) AS last
), kept AS MATERIALIZED (
    SELECT w.filter_id, w.profile_id FROM matcher_waiting_matches w
            JOIN saved_filters f ON f.id = w.filter_id AND f.deleted_at IS NULL
                                 AND f.notify::text IN ('true', 't')
            LEFT JOIN matcher_filter_state s ON s.filter_id = w.filter_id
            WHERE w.matched_at = '2026-03-23 03:00:00+00' AND w.filter_id BETWEEN 3000 AND (SELECT last FROM span)
              AND (s.last_notified_at IS NULL OR s.last_notified_at < w.matched_at)
), gone AS (
    DELETE FROM filter_matches m
    WHERE m.matched_at = '2026-03-23 03:00:00+00' AND m.filter_id BETWEEN 3000 AND (SELECT last FROM span) AND
      NOT (m.notification_id IS NULL AND NOT m.silent
                 AND (m.filter_id, m.profile_id) IN (SELECT filter_id, profile_id FROM kept))
    RETURNING 1
), waiting_gone AS (
    DELETE FROM matcher_waiting_matches w
    WHERE w.matched_at = '2026-03-23 03:00:00+00' AND w.filter_id BETWEEN 3000 AND (SELECT last FROM span)
      AND (w.filter_id, w.profile_id) NOT IN (SELECT filter_id, profile_id FROM kept)
)
SELECT (SELECT count(*) FROM gone), (SELECT last FROM span), EXISTS (SELECT 1 FROM stop);
ROLLBACK;
