\timing on
CHECKPOINT;
BEGIN;
SET jit = off;
EXPLAIN (ANALYZE, BUFFERS, WAL, COSTS OFF)
WITH stop AS (
    SELECT m.filter_id FROM filter_matches m
    WHERE m.matched_at = '2026-03-07 03:00+00' AND m.filter_id BETWEEN 0 AND 100000000
    ORDER BY m.filter_id OFFSET 10000000 LIMIT 1
), span AS (
    SELECT coalesce((SELECT filter_id FROM stop) - 1, 100000000::bigint) AS last
), gone AS (
    DELETE FROM filter_matches m
    WHERE m.matched_at = '2026-03-07 03:00+00' AND m.filter_id BETWEEN 0 AND (SELECT last FROM span)
      AND CASE WHEN m.notification_id IS NOT NULL OR m.silent THEN true
                      ELSE NOT coalesce((
                          SELECT true FROM matcher_waiting_matches w
                          JOIN saved_filters f ON f.id = w.filter_id AND f.deleted_at IS NULL
                                               AND f.notify::text IN ('true', 't')
                          LEFT JOIN matcher_filter_state s ON s.filter_id = w.filter_id
                          WHERE w.filter_id = m.filter_id AND w.profile_id = m.profile_id
                            AND (s.last_notified_at IS NULL OR s.last_notified_at < w.matched_at)), false)
                      END
    RETURNING m.filter_id, m.profile_id, m.notification_id IS NULL AND NOT m.silent AS may_wait
), waiting_gone AS (
    DELETE FROM matcher_waiting_matches w USING gone d
    WHERE d.may_wait AND w.filter_id = d.filter_id AND w.profile_id = d.profile_id
      AND w.filter_id = ANY (ARRAY(SELECT filter_id FROM gone WHERE may_wait))
)
SELECT (SELECT count(*) FROM gone), (SELECT last FROM span), EXISTS (SELECT 1 FROM stop);
ROLLBACK;
