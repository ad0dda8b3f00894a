/// The retention sweep's statements (runs.md), run by `RetentionSweep`: `spanBound`, `forgetSpanPairs` and
/// `forgetSpanEntries` for most batches,
/// `forgetBatch` for a filter larger than a batch, `forgetBulkBatch` for the pairs recorded in bulk (which the
/// retention index leaves out, sql/0012_bulk_matches.sql; the others say `NOT bulk` to use it). All of them keep
/// matches waiting for a digest. A waiting match is
/// kept while its filter exists, is not deleted, has `notify` on, and has had no digest since the match was
/// recorded; once a digest passed it over (it no longer qualified) or the filter can never notify it, it is
/// forgotten like any other.
///
/// Only an unnotified, non-silent pair can wait, and its list entry carries the pair's own clock
/// (`UnitCommitter` lists a pair waiting in the transaction that records it unnotified for a notifying filter,
/// and `listUnlistedMatches` lists later those a filter recorded while its notify was off, once it is on: both
/// with the pair's `matched_at`; `markNotified` takes it off the list in the transaction that notifies it).
/// So a batch first reads the list's entries of its clock and filter ids that still wait (`kept`: the list's
/// `(matched_at, filter_id)` index, migration 0011, a few thousand entries for a day's batch), hashes them,
/// and deletes every pair of the batch outside that set; then the same clock's and filter ids' entries whose
/// pair is gone (`forgetSpanEntries`, `forgetBatch`). Measured on a 14-day soak's table (7.4M pairs, 287k
/// waiting), one statement over a whole day's clock (904k pairs), alternating on fresh copies: 2.2-3.3 s
/// probing the list once per unnotified pair (137k probes) and joining the deleted pairs back to it, against
/// 1.6-2.4 s (a bare DELETE of those rows: 1.0-1.1 s). The sweeper's session turns JIT off: a batch's cost
/// estimate is large, its work is not.
package enum RetentionSQL {
    /// The distinct `matched_at` values of pairs not recorded in bulk before the cutoff ($1), newest first, at
    /// most $2: one descent of the retention index each (a run's pairs share its clock, so there are about as
    /// many as expired runs).
    static let newestExpiredClocks = """
        WITH RECURSIVE clocks(t) AS (
            SELECT max(matched_at) FROM filter_matches WHERE matched_at < $1 AND NOT bulk
          UNION ALL
            SELECT (SELECT max(m.matched_at) FROM filter_matches m WHERE m.matched_at < c.t AND NOT m.bulk)
            FROM clocks c WHERE c.t IS NOT NULL
        )
        SELECT t FROM clocks WHERE t IS NOT NULL LIMIT $2
        """

    /// The clocks of pairs not recorded in bulk after $1 (NULL: from the first) and before $2, oldest first, at
    /// most $3: a descent of the retention index each.
    static let expiredClocksBetween = """
        WITH RECURSIVE clocks(t) AS (
            SELECT min(matched_at) FROM filter_matches
            WHERE matched_at > coalesce($1::timestamptz, '-infinity') AND matched_at < $2 AND NOT bulk
          UNION ALL
            SELECT (SELECT min(m.matched_at) FROM filter_matches m
                    WHERE m.matched_at > c.t AND m.matched_at < $2 AND NOT m.bulk)
            FROM clocks c WHERE c.t IS NOT NULL
        )
        SELECT t FROM clocks WHERE t IS NOT NULL LIMIT $3
        """

    /// Whether filter `f` (a `saved_filters` row) has `notify` on: whatever type the app gave the column; NULL is
    /// on, as the run reads it.
    static let filterNotifies = "coalesce(f.notify::text, 'true') IN ('true', 't')"

    /// The joins of a waiting-list entry `w` that `stillWaits` reads: its filter, and the filter's owner.
    private static let waitingJoins = """
        JOIN saved_filters f ON f.id = w.filter_id AND f.deleted_at IS NULL AND \(filterNotifies)
        JOIN profiles o ON o.id = f.owner_id AND o.status IS DISTINCT FROM 4
        """

    /// Whether entry `w` (with `waitingJoins`) still waits for a digest: its filter exists, is not deleted, has
    /// `notify` on, its owner has a profile that is not deleted (a hidden or suspended owner may come back; a
    /// deleted one, or one whose row is gone, never gets a digest), and no digest decision, written or held
    /// back, has read it and passed it over (`UnitTransaction.markPassedOver`).
    static let stillWaits = "NOT w.passed_over"

    /// Whether waiting-list entry `w` is no longer read at a clock (`PassedOverCutoffs`, the SQL expressions
    /// `recordedBefore` and `passedOverBefore`): a digest passed it over, and its pair was recorded before the
    /// retention's cutoff, or it was passed over before the comeback's (an entry no digest passed over is kept
    /// past the retention, `stillWaits`), whether the sweep has deleted it yet or not. An entry passed over
    /// before migration 0017 took the migration's time; one an older binary marks without a time goes by its
    /// recording.
    static func entryForgotten(recordedBefore: String, passedOverBefore: String) -> String {
        "(w.passed_over AND (w.matched_at < \(recordedBefore) OR coalesce(w.passed_over_at, w.matched_at) < \(passedOverBefore)))"
    }

    /// Whether recorded pair `m` waits for a digest, so that the sweep keeps it past the retention: the rule of
    /// `notKept` for one pair, through the list's key. For the pairs a run finds recorded before the cutoff
    /// (`keptAmong`, `forgetExpiredPairs`).
    static let waitsForDigest = waitsForDigest(probed: false)

    /// `waitsForDigest`; `probed`: the list is probed a pair (`OFFSET 0` keeps the planner from turning the
    /// `EXISTS` into a hash of the whole list), for a walk that stops at the first pair not kept.
    static func waitsForDigest(probed: Bool) -> String {
        """
        (m.notification_id IS NULL AND NOT m.silent AND EXISTS (
            SELECT 1 FROM matcher_waiting_matches w
            \(waitingJoins)
            WHERE w.filter_id = m.filter_id AND w.profile_id = m.profile_id AND w.matched_at = m.matched_at
              AND \(stillWaits)\(probed ? " OFFSET 0" : "")))
        """
    }

    /// The oldest `matched_at` of a pair the sweep may forget (`matcher status`): not waiting for a digest
    /// (`waitsForDigest`). A walk of the retention index from its oldest end, and of the bulk list's clock index,
    /// past the pairs kept for a digest (a listed row keeps only those once the sweep has passed it), probing the
    /// waiting list a pair: hashing the whole list first took 161 ms against 106 on 2M pairs with 60k waiting.
    static let oldestForgettable = """
        SELECT least(
            (SELECT min(m.matched_at) FROM filter_matches m WHERE NOT m.bulk AND NOT \(waitsForDigest(probed: true))),
            (SELECT min(l.matched_at) FROM matcher_bulk_matches l
             WHERE EXISTS (
                 SELECT 1 FROM unnest(l.profile_ids) AS p(profile_id)
                 WHERE NOT EXISTS (
                     SELECT 1 FROM matcher_waiting_matches w
                     \(waitingJoins)
                     WHERE w.filter_id = l.filter_id AND w.profile_id = p.profile_id AND w.matched_at = l.matched_at
                       AND \(stillWaits)))))
        """

    /// Among pairs ($1 filter ids, $2 profile ids, each just found recorded), those still recorded and kept at the
    /// run's clock: recorded at or after the cutoff ($3), or waiting for a digest. The rest are forgotten at the
    /// clock, swept or not, including a row a sweep deleted since the first probe (its own statement, its own
    /// snapshot): asking for the kept ones makes that pair new, as it is. A key probe a pair (`OFFSET 0` keeps
    /// it a probe, not a join over the table); only the pairs a run found recorded are asked about, the day's
    /// few re-matches.
    static let keptAmong = """
        SELECT x.filter_id, x.profile_id
        FROM (SELECT unnest($1::bigint[]) AS filter_id, unnest($2::bigint[]) AS profile_id) AS u
        CROSS JOIN LATERAL (
            SELECT m.filter_id, m.profile_id FROM filter_matches m
            WHERE m.filter_id = u.filter_id AND m.profile_id = u.profile_id
              AND (m.matched_at >= $3 OR \(waitsForDigest))
            OFFSET 0) AS x
        """

    /// Forgets pairs ($1, $2) recorded before the cutoff ($3) that no digest keeps, as the sweep does, with their
    /// list entries: a unit's pairs that the run found so (`UnitTransaction.forgetExpired`), before it records
    /// them again. By `ctid` after a key probe each: a row changed meanwhile is left, and the insert meets it.
    static let forgetExpiredPairs = """
        WITH doomed AS (
            SELECT x.row_id
            FROM (SELECT unnest($1::bigint[]) AS filter_id, unnest($2::bigint[]) AS profile_id) AS u
            CROSS JOIN LATERAL (
                SELECT m.ctid AS row_id FROM filter_matches m
                WHERE m.filter_id = u.filter_id AND m.profile_id = u.profile_id AND m.matched_at < $3
                  AND NOT \(waitsForDigest)
                OFFSET 0) AS x
        ), gone AS (
            DELETE FROM filter_matches WHERE ctid = ANY (ARRAY(SELECT row_id FROM doomed))
            RETURNING filter_id, profile_id
        )
        DELETE FROM matcher_waiting_matches w
        WHERE (w.filter_id, w.profile_id) IN (SELECT filter_id, profile_id FROM gone)
        """

    /// The entries of the waiting list at clock $1 and filter ids $2...`last` that wait for a digest: the pairs
    /// a batch keeps. `last` is an expression over the statement's CTEs.
    private static func kept(last: String) -> String {
        """
        SELECT w.filter_id, w.profile_id FROM matcher_waiting_matches w
                \(waitingJoins)
                WHERE w.matched_at = $1 AND w.filter_id BETWEEN $2 AND \(last) AND \(stillWaits)
        """
    }

    /// Whether pair `m` of a batch goes: it is notified or silent, or not among the `kept` CTE's entries (by
    /// pair, or with `byClock` by pair and clock, when a batch spans several clocks).
    private static func notKept(byClock: Bool = false) -> String {
        let (pair, entry) =
            byClock
            ? ("m.filter_id, m.profile_id, m.matched_at", "filter_id, profile_id, matched_at")
            : ("m.filter_id, m.profile_id", "filter_id, profile_id")
        return """
            NOT (m.notification_id IS NULL AND NOT m.silent AND (\(pair)) IN (SELECT \(entry) FROM kept))
            """
    }

    /// The bound of the next batch of one run's pairs (`matched_at` $1) from filter id $2 up to at most $3: the
    /// filter holding the range's ($4 + 1)-th pair (an index-only count on the retention index), or no row when
    /// the range holds no more. The batch is the filters before it (`RetentionSweep`: computed there, where no
    /// id can overflow), then `forgetSpanPairs` and `forgetSpanEntries` over them, in the same transaction; when
    /// the first filter alone holds more than $4 pairs, `forgetBatch` takes that filter.
    static let spanBound = """
        SELECT m.filter_id FROM filter_matches m
        WHERE m.matched_at = $1 AND m.filter_id BETWEEN $2 AND $3 AND NOT m.bulk
        ORDER BY m.filter_id OFFSET $4 LIMIT 1
        """

    /// A batch's pairs: one run's (`matched_at` $1) of filters $2...$3, deleted in place except the waiting
    /// ones; how many, from the statement's own count. One heap access a pair. One statement that also
    /// bounded the batch and deleted the list entries had to return the deleted rows to count them, and that
    /// took two fifths of its time (50k pairs of day 30's clock at 200k x 20k: 50 against 30 ms, fresh copies).
    static let forgetSpanPairs = """
        WITH kept AS MATERIALIZED (
            \(kept(last: "$3"))
        )
        DELETE FROM filter_matches m
        WHERE m.matched_at = $1 AND m.filter_id BETWEEN $2 AND $3 AND NOT m.bulk AND \(notKept())
        """

    /// The list entries of the pairs `forgetSpanPairs` forgot: the same clock's and filter ids' entries whose
    /// pair is gone (a key probe each; a day's batch has a few thousand). Not "the entries that no longer wait",
    /// read again: whether an entry waits follows columns the app can turn back (`notify`, `deleted_at`, the
    /// owner's status), and an entry that waited again between the two statements would have stayed without
    /// its pair, counted by the next digest and in the way of the pair's next listing.
    static let forgetSpanEntries = """
        DELETE FROM matcher_waiting_matches w
        WHERE w.matched_at = $1 AND w.filter_id BETWEEN $2 AND $3
          AND NOT EXISTS (SELECT 1 FROM filter_matches m
                          WHERE m.filter_id = w.filter_id AND m.profile_id = w.profile_id AND m.matched_at = w.matched_at)
        """

    /// A bounded batch of one run's pairs (`matched_at` $1) of one filter ($2), at most $3, except the waiting
    /// ones, and the list entries of those it deleted; returns how many it forgot. For a filter holding more
    /// than a batch at one clock, which `spanBound` cannot bound: found by the retention index, deleted by
    /// `ctid` (a DELETE has no LIMIT).
    static let forgetBatch = """
        WITH kept AS MATERIALIZED (
            \(kept(last: "$2"))
        ), doomed AS (
            SELECT m.ctid AS row_id FROM filter_matches m
            WHERE m.matched_at = $1 AND m.filter_id = $2 AND NOT m.bulk AND \(notKept())
            LIMIT $3
        ), gone AS (
            DELETE FROM filter_matches WHERE ctid = ANY (ARRAY(SELECT row_id FROM doomed))
            RETURNING filter_id, profile_id, notification_id IS NULL AND NOT silent AS may_wait
        ), waiting_gone AS (
            DELETE FROM matcher_waiting_matches w
            WHERE w.matched_at = $1 AND w.filter_id = $2
              AND (w.filter_id, w.profile_id) IN (SELECT filter_id, profile_id FROM gone WHERE may_wait)
        )
        SELECT count(*) FROM gone
        """

    /// Whether any pair recorded in bulk has expired (before $1): one descent of the list's clock index.
    static let bulkExpired = """
        SELECT EXISTS (SELECT 1 FROM matcher_bulk_matches WHERE matched_at < $1)
        """

    /// The next batch of pairs recorded in bulk before the cutoff ($1), in filter ids up to $3, after the list row
    /// ($2, $4; $4 NULL: from filter $2's first) in (filter_id, matched_at) order: at most $5 list rows (a
    /// filter's pairs of one clock each), and only those that begin within $6 pairs. Each
    /// listed pair still recorded at the row's clock is deleted through the primary key, except the waiting ones;
    /// the list entries of those it deleted go, and each list row then holds only its pairs that still wait, or
    /// goes. Returns how many pairs it forgot, whether list rows are left after the batch, and the last row it
    /// took (the next batch starts after it). The session disables hash and merge joins for it (`RetentionSweep`): a nested loop of
    /// key probes over the batch's pairs, not a scan of the table.
    static let forgetBulkBatch = """
        WITH candidates AS MATERIALIZED (
            SELECT l.filter_id, l.matched_at, l.profile_ids,
                   sum(cardinality(l.profile_ids)) OVER (ORDER BY l.filter_id, l.matched_at
                                                        ROWS UNBOUNDED PRECEDING) AS through
            FROM matcher_bulk_matches l
            WHERE (l.filter_id, l.matched_at) > ($2, coalesce($4::timestamptz, '-infinity'))
              AND l.filter_id <= $3 AND l.matched_at < $1
            ORDER BY l.filter_id, l.matched_at
            LIMIT $5
        ), batch AS MATERIALIZED (
            -- The rows that begin within $6 pairs (the first always): a run with a large --max-per-filter
            -- lists many pairs a row.
            SELECT filter_id, matched_at, profile_ids FROM candidates WHERE through - cardinality(profile_ids) < $6
        ), pairs AS MATERIALIZED (
            SELECT b.filter_id, p.profile_id, b.matched_at
            FROM batch b CROSS JOIN LATERAL unnest(b.profile_ids) AS p(profile_id)
        ), kept AS MATERIALIZED (
            SELECT w.filter_id, w.profile_id, w.matched_at FROM batch b
            JOIN matcher_waiting_matches w   -- a descent a list row, not a pair
              ON w.matched_at = b.matched_at AND w.filter_id = b.filter_id AND w.profile_id = ANY (b.profile_ids)
            \(waitingJoins)
            WHERE \(stillWaits)
        ), gone AS (
            DELETE FROM filter_matches m USING pairs x
            WHERE m.filter_id = x.filter_id AND m.profile_id = x.profile_id AND m.matched_at = x.matched_at AND m.bulk
              AND \(notKept(byClock: true))
            RETURNING 1
        ), waiting_gone AS (
            DELETE FROM matcher_waiting_matches w USING batch b
            WHERE w.matched_at = b.matched_at AND w.filter_id = b.filter_id AND w.profile_id = ANY (b.profile_ids)
              AND (w.filter_id, w.profile_id, w.matched_at) NOT IN (SELECT filter_id, profile_id, matched_at FROM kept)
        ), still AS (
            -- Only a row whose pairs changed: one that only keeps waiting pairs is not written again every run.
            UPDATE matcher_bulk_matches l SET profile_ids = k.ids
            FROM (SELECT filter_id, matched_at, array_agg(profile_id ORDER BY profile_id) AS ids
                  FROM kept GROUP BY filter_id, matched_at) k
            WHERE l.filter_id = k.filter_id AND l.matched_at = k.matched_at AND l.profile_ids IS DISTINCT FROM k.ids
        ), listed_gone AS (
            DELETE FROM matcher_bulk_matches l USING batch b
            WHERE l.filter_id = b.filter_id AND l.matched_at = b.matched_at
              AND NOT EXISTS (SELECT 1 FROM kept k WHERE k.filter_id = b.filter_id AND k.matched_at = b.matched_at)
        )
        SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM candidates) > count(*) OR count(*) >= $5,
               max(filter_id), (SELECT matched_at FROM batch ORDER BY filter_id DESC, matched_at DESC LIMIT 1)
        FROM batch
        """

    /// Waiting-list entries of matches a digest passed over before $1 (the run's clock less
    /// `Retention.comebackDays` and the sweep's lag), oldest first, at most $2 (migration 0017's partial index,
    /// on the readers' own expression: an entry an older binary marked without a time goes by its recording):
    /// no digest reads them any more. Their pairs stay recorded until the retention.
    package static let forgetPassedOverEntriesBatch = """
        DELETE FROM matcher_waiting_matches WHERE ctid = ANY (ARRAY(
            SELECT w.ctid FROM matcher_waiting_matches w
            WHERE w.passed_over AND coalesce(w.passed_over_at, w.matched_at) < $1
            ORDER BY coalesce(w.passed_over_at, w.matched_at)
            LIMIT $2))
          AND passed_over   -- again on the row deleted: READ COMMITTED re-checks only this WHERE
        """

    /// Sent notifications created before the cutoff ($1), oldest first, at most $2 (the created_at index).
    /// Unsent ones are the push sender's and are never forgotten by the worker.
    static let forgetNotificationsBatch = """
        DELETE FROM notifications WHERE ctid = ANY (ARRAY(
            SELECT n.ctid FROM notifications n
            WHERE n.created_at < $1 AND n.sent_at IS NOT NULL
            ORDER BY n.created_at
            LIMIT $2))
        """

    /// Bookkeeping that would otherwise grow with history, each statement a bounded batch ($1 the cutoff, $2
    /// the batch size): finished runs older than the cutoff except each layout's latest and those a shard's
    /// progress points at; and rows of filters and profiles whose row is gone (a filter's too when it was
    /// soft-deleted before the cutoff: users delete filters every day, and a deleted filter gets no digest; one
    /// the app restores within the retention keeps its last digest's time and its notify-off note, session 31).
    /// The scans are of tables as large as filters or profiles, never of history. A change row of a deleted profile is kept until the
    /// cutoff, so a run still writing never misses the deletion (`PostgresUnitTransaction.profileFacts`);
    /// a quarantine entry of a gone row too, so operators still find it listed for the retention.
    static let forgetBookkeeping = [
        """
        DELETE FROM matcher_runs WHERE id = ANY (ARRAY(
            SELECT r.id FROM matcher_runs r
            WHERE r.status <> 'running' AND r.clock < $1   -- the run's clock, like matched_at
              AND r.id NOT IN (SELECT max(l.id) FROM matcher_runs l GROUP BY l.kind, l.shard_count, l.shard_index)
              AND NOT EXISTS (SELECT 1 FROM matcher_shard_progress p WHERE p.run_id = r.id)
            ORDER BY r.id
            LIMIT $2))
        """,
        """
        DELETE FROM matcher_filter_state WHERE filter_id = ANY (ARRAY(
            SELECT s.filter_id FROM matcher_filter_state s
            WHERE NOT EXISTS (
                SELECT 1 FROM saved_filters f
                WHERE f.id = s.filter_id
                  AND (f.deleted_at IS NULL
                       -- Compared only while the app's column is a timestamptz: on a column the app retyped
                       -- the comparison would fail the run's sweep, so a deleted filter's state goes at once.
                       -- Through JSON's text, always ISO 8601 with a numeric offset: a plain text cast follows
                       -- the session's DateStyle, whose zone abbreviations ('WIB', 'CST') fail or misread.
                       OR CASE WHEN pg_typeof(f.deleted_at) = 'timestamptz'::regtype
                               THEN (to_jsonb(f.deleted_at) #>> '{}')::timestamptz >= $1
                                    AND (to_jsonb(f.deleted_at) #>> '{}')::timestamptz < 'infinity'
                               ELSE false END))
              AND $1::timestamptz IS NOT NULL
            LIMIT $2))
        """,
        """
        DELETE FROM matcher_invalid_filters WHERE filter_id = ANY (ARRAY(
            SELECT i.filter_id FROM matcher_invalid_filters i
            WHERE NOT EXISTS (SELECT 1 FROM saved_filters f WHERE f.id = i.filter_id AND f.deleted_at IS NULL)
              AND $1::timestamptz IS NOT NULL
            LIMIT $2))
        """,
        """
        DELETE FROM matcher_quarantine WHERE (kind, row_id) IN (
            SELECT q.kind, q.row_id FROM matcher_quarantine q
            WHERE CASE q.kind
                    WHEN 'filter' THEN NOT EXISTS (
                        SELECT 1 FROM saved_filters f WHERE f.id = q.row_id AND f.deleted_at IS NULL)
                    ELSE NOT EXISTS (SELECT 1 FROM profiles p WHERE p.id = q.row_id) END
              AND q.detected_at < $1   -- listed for operators through the retention, then forgotten
            LIMIT $2)
        """,
        """
        DELETE FROM matcher_profile_changes d WHERE d.profile_id = ANY (ARRAY(
            SELECT c.profile_id FROM matcher_profile_changes c
            WHERE coalesce(c.changed_at, '-infinity') < $1 AND NOT EXISTS (SELECT 1 FROM profiles p WHERE p.id = c.profile_id)
            LIMIT $2))
          -- Again on the row deleted: a profile inserted again under the same id meanwhile has just moved its
          -- row's changed_at (the capture's trigger), and READ COMMITTED re-checks only this WHERE on it.
          AND coalesce(d.changed_at, '-infinity') < $1
        """,
    ]
}
