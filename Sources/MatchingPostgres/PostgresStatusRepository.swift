import Chronology
import Foundation
import Matching
import PostgresClient

/// `StatusRepository` over the worker's tables, with reads only (every table it reads is one the worker role
/// may SELECT, plus `pg_class` and `pg_locks`, which every role may read), in one REPEATABLE READ
/// transaction so the figures agree with each other.
public struct PostgresStatusRepository: StatusRepository, @unchecked Sendable {
    private let connection: PostgresConnection

    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    /// Below this many rows (the planner's estimate) `filter_matches` is counted exactly.
    static let countedBelow: Int64 = 1_000_000

    public func serviceStatus(retention: Bool, digestsOf digestShard: Shard) throws -> ServiceStatus {
        try connection.transaction(isolation: .repeatableRead) { tx in
            let now = try tx.query("SELECT now()").rows[0].timestamp(0)
            let coverage = try PostgresMatchingStore.coverage(tx)
            let runKey = PostgresMatchingStore.lockKeys(kind: .run, shard: .all).0
            // Each shard's last successful incremental run, and its runs after it that did not succeed. A running
            // run's shard lock is looked up in pg_locks (the two-int4 advisory form: classid, objid, objsubid 2).
            let runs = try tx.query(
                """
                WITH last_success AS (
                    SELECT DISTINCT ON (shard_count, shard_index) id, shard_index, shard_count FROM matcher_runs
                    WHERE kind = 'run' AND status = 'succeeded' ORDER BY shard_count, shard_index, id DESC)
                SELECT r.id, r.shard_index, r.shard_count, r.status, r.clock, r.started_at, r.finished_at, r.error,
                       r.status = 'running' AND EXISTS (
                           SELECT 1 FROM pg_locks l
                           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                             AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                             AND l.classid = $1::bigint::oid
                             AND l.objid = ((r.shard_count::bigint << 16) | r.shard_index)::oid)
                FROM matcher_runs r
                LEFT JOIN last_success s ON s.shard_index = r.shard_index AND s.shard_count = r.shard_count
                WHERE r.kind = 'run' AND (r.id = s.id OR (r.id > coalesce(s.id, 0) AND r.status <> 'succeeded'))
                ORDER BY r.id
                """, [.int8(Int64(runKey))]
            ).rows.map { row in
                let status = RunStatus(rawValue: try row.string(3)) ?? .failed
                return RunBrief(
                    id: try row.int64(0), kind: .run,
                    shard: try Shard(index: Int(try row.int32(1)), count: Int(try row.int32(2))),
                    status: status, clock: try row.timestamp(4), startedAt: try row.optionalTimestamp(5),
                    finishedAt: try row.optionalTimestamp(6), error: try row.optionalString(7),
                    lockHeld: status == .running ? try row.bool(8) : nil)
            }
            // Progress ahead of this server's transactions (a restore, a failover): runs refuse before they start,
            // so no run row says so; the run's own check (`marksAhead`), read here.
            let ahead = Set(
                try tx.query(
                    """
                    SELECT shard_index, shard_count FROM matcher_shard_progress
                    WHERE snapshot IS NOT NULL AND \(PostgresMatchingStore.snapshotAhead("snapshot"))
                    """
                ).rows.map { try Shard(index: Int(try $0.int32(0)), count: Int(try $0.int32(1))) })
            let statuses = ShardStatus.statuses(runs: runs, coverage: coverage) { ahead.contains($0.shard) }

            // Waiting for a digest: the retention sweep's rule (`RetentionSQL.stillWaits`), for owners who are
            // active (their digests can come now), by filter; the other listed rows apart.
            // Of `digestShard`'s filters (a filter whose row is gone is no shard's: counted only for `.all`).
            let shardParameters: [PostgresValue] = [.int8(Int64(digestShard.count)), .int8(Int64(digestShard.index))]
            let listed = try tx.query(
                """
                SELECT count(*) FROM matcher_waiting_matches w
                WHERE $1 = 1 OR EXISTS (SELECT 1 FROM saved_filters f
                                        WHERE f.id = w.filter_id AND ((f.owner_id % $1) + $1) % $1 = $2)
                """, shardParameters
            ).rows[0].int64(0)
            let zone = coverage.entries.lazy.compactMap(\.timeZone).first.flatMap(TimeZone.init(identifier:))
            var waiting = (matches: Int64(0), filters: 0, oldest: Timestamp?.none, dueSince: Timestamp?.none)
            // A filter no run prepares sends no digest however long its matches wait: invalid, quarantined, or
            // suspended (every condition needs a plan its owner lacks, filter-language.md). Its matches are
            // listed apart, or a lapsed plan would hold the overdue alert up until the owner pays again. The
            // conditions are read as `json` (the app's column may be either; jsonb casts to json always).
            let paid = MasterItem.all.filter { $0.requiredPlan > Profile.Plan.free }
            for row in try tx.query(
                """
                SELECT g.n, g.first, s.last_notified_at, f.notify_every
                FROM (SELECT w.filter_id, count(*) AS n, min(w.matched_at) AS first
                      FROM matcher_waiting_matches w WHERE \(RetentionSQL.stillWaits) GROUP BY w.filter_id) AS g
                JOIN saved_filters f ON f.id = g.filter_id AND f.deleted_at IS NULL
                                     AND coalesce(f.notify::text, 'true') IN ('true', 't')
                JOIN profiles o ON o.id = f.owner_id AND o.status = 1
                LEFT JOIN matcher_filter_state s ON s.filter_id = g.filter_id
                WHERE ((f.owner_id % $3) + $3) % $3 = $4
                  AND NOT EXISTS (SELECT 1 FROM matcher_invalid_filters i WHERE i.filter_id = g.filter_id)
                  AND NOT EXISTS (SELECT 1 FROM matcher_quarantine q WHERE q.kind = 'filter' AND q.row_id = g.filter_id)
                  AND NOT CASE WHEN json_typeof(f.conditions::json) <> 'object' THEN false  -- invalid: listed
                      -- A `json` column's \\u0000, which json_object_keys cannot take ("cannot be converted to text"):
                      -- such a filter is invalid too; before a run lists it, counted, rather than fail the status.
                      WHEN strpos(f.conditions::text, chr(92) || 'u0000') > 0 THEN false
                      WHEN NOT EXISTS (SELECT 1 FROM json_object_keys(f.conditions::json)) THEN false  -- matches all
                      ELSE NOT EXISTS (
                          SELECT 1 FROM json_object_keys(f.conditions::json) AS k(key)
                          WHERE NOT EXISTS (
                              SELECT 1 FROM unnest($1::text[], $2::int2[]) AS p(key, plan)
                              WHERE p.key = k.key AND p.plan > greatest(o.plan, 0)))
                      END
                """, [.textArray(paid.map(\.key)), .int2Array(paid.map(\.requiredPlan))] + shardParameters
            ).rows {
                let first = try row.timestamp(1)
                // An interval the worker cannot read counts as the column's default, as a run reads it.
                let every =
                    (try? row.optionalInterval(3)).flatMap { $0 }.map {
                        NotifyInterval(months: $0.months, days: $0.days, microseconds: $0.microseconds)
                    } ?? .oneDay
                let due = WaitingDigests.dueSince(
                    firstWaiting: first, lastNotifiedAt: try row.optionalTimestamp(2), every: every,
                    timeZone: zone ?? .tokyo)
                waiting.matches += try row.int64(0)
                waiting.filters += 1
                waiting.oldest = min(waiting.oldest ?? first, first)
                waiting.dueSince = min(waiting.dueSince ?? due, due)
            }
            let setAside = try tx.query(
                """
                SELECT (SELECT count(*) FROM matcher_invalid_filters i
                        WHERE EXISTS (SELECT 1 FROM saved_filters f WHERE f.id = i.filter_id AND f.deleted_at IS NULL)),
                       (SELECT count(*) FROM matcher_quarantine WHERE kind = 'profile'),
                       (SELECT count(*) FROM matcher_quarantine WHERE kind = 'filter'),
                       (\(PostgresMatchingStore.latestRetentionDaysSQL))
                """
            ).rows[0]
            let retentionDays = try setAside.optionalInt32(3).map(Int.init)
            return ServiceStatus(
                now: now, shards: statuses,
                digests: WaitingDigests(
                    matches: Int(waiting.matches), filters: waiting.filters, oldestMatchedAt: waiting.oldest,
                    oldestDueSince: waiting.dueSince, notNotifiable: Int(listed - waiting.matches)),
                invalidFilters: Int(try setAside.int64(0)), quarantinedProfiles: Int(try setAside.int64(1)),
                quarantinedFilters: Int(try setAside.int64(2)),
                retention: try retentionState(tx, now: now, days: retentionDays, oldest: retention),
                notificationPause: try PostgresServiceState(connection: tx).notificationsPaused(),
                unsent: try unsentNotifications(tx))
        }
    }

    /// Notifications the push sender has not marked sent: the partial index of unsent rows (sql/0001), so the
    /// cost follows the backlog, which is small while the push sender keeps up.
    private func unsentNotifications(_ tx: PostgresConnection) throws -> UnsentNotifications {
        let row = try tx.query("SELECT count(*), min(created_at) FROM notifications WHERE sent_at IS NULL").rows[0]
        return UnsentNotifications(count: Int(try row.int64(0)), oldestCreatedAt: try row.optionalTimestamp(1))
    }

    /// The size of `filter_matches` (the planner's estimate, counted when small) and, with `oldest`, its
    /// oldest `matched_at`: one descent of the retention index and one of the bulk list's clock index (a listed
    /// pair counts by its list row until the sweep takes it); and the oldest the sweep may forget, the same
    /// descents walking past the pairs kept for a digest (`RetentionSQL.oldestForgettable`).
    private func retentionState(
        _ tx: PostgresConnection, now: Timestamp, days: Int?, oldest: Bool
    ) throws -> RetentionState {
        let estimate =
            try tx.query(
                """
                SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass('filter_matches')
                """
            ).rows.first?.optionalInt64(0) ?? -1
        var rows = max(0, estimate)
        var estimated = true
        if oldest || estimate < 0, estimate < Self.countedBelow {
            rows = try tx.query("SELECT count(*) FROM filter_matches").rows[0].int64(0)
            estimated = false
        }
        let oldestMatchedAt =
            oldest
            ? try tx.query(
                """
                SELECT least((SELECT min(matched_at) FROM filter_matches WHERE NOT bulk),
                             (SELECT min(matched_at) FROM matcher_bulk_matches))
                """
            ).rows[0].optionalTimestamp(0) : nil
        let oldestForgettable =
            oldest ? try tx.query(RetentionSQL.oldestForgettable).rows[0].optionalTimestamp(0) : nil
        let upkeep = PrimaryKeyUpkeep(connection: tx)
        let key = try upkeep.size()
        return RetentionState(
            rows: Int(clamping: rows), rowsEstimated: estimated, oldestMatchedAt: oldestMatchedAt,
            oldestForgettableAt: oldestForgettable, retentionDays: days, primaryKey: key,
            abandonedRebuilds: try upkeep.leftovers(), marks: try markPlacement(tx))
    }

    /// The table's updates (every one a mark), those that were HOT, and its fillfactor (100 when unset, as
    /// PostgreSQL fills it then).
    private func markPlacement(_ tx: PostgresConnection) throws -> MarkPlacement? {
        guard
            let row = try tx.query(
                """
                SELECT coalesce(s.n_tup_upd, 0), coalesce(s.n_tup_hot_upd, 0),
                       coalesce((SELECT o.option_value::int FROM pg_options_to_table(c.reloptions) o
                                 WHERE o.option_name = 'fillfactor'), 100)
                FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
                WHERE c.oid = to_regclass('filter_matches')
                """
            ).rows.first
        else { return nil }
        return MarkPlacement(marks: try row.int64(0), inPlace: try row.int64(1), fillfactor: Int(try row.int32(2)))
    }
}
