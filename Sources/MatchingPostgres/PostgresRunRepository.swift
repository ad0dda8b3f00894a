import Chronology
import Foundation
import Matching
import PostgresClient

/// A session-level advisory lock on a connection of its own: held until the session ends, which the
/// server notices when the holder closes it or its process dies, so nobody cleans up by hand.
final class PostgresRunLock: RunLock, @unchecked Sendable {
    private let connection: PostgresConnection

    init(connection: PostgresConnection) {
        self.connection = connection
    }

    /// Ends the session, which releases the lock. No unlock statement: after a network failure it
    /// would only wait out another deadline on the same broken path.
    func release() {
        connection.close()
    }
}

extension PostgresMatchingStore: RunRepository {
    /// Two-key advisory lock: (namespace + kind, shard count << 16 | shard index).
    static func lockKeys(kind: RunKind, shard: Shard) -> (Int32, Int32) {
        let namespace: Int32 = 0x4D_41_54_10   // "MAT" + 0x10
        let kindKey: Int32 = kind == .run ? 0 : 1
        return (namespace + kindKey, Int32(truncatingIfNeeded: shard.count << 16 | shard.index))
    }

    public func tryLock(kind: RunKind, shard: Shard) throws -> (any RunLock)? {
        let lockConnection = try openConnection()
        let keys = Self.lockKeys(kind: kind, shard: shard)
        let acquired = try lockConnection.query(
            "SELECT pg_try_advisory_lock($1, $2)", [.int4(keys.0), .int4(keys.1)]).rows[0].bool(0)
        guard acquired else {
            lockConnection.close()
            return nil
        }
        return PostgresRunLock(connection: lockConnection)
    }

    static let runColumns = """
        id, kind, shard_index, shard_count, clock, max_per_filter, write_notifications, status,
        since_snapshot::text, snapshot::text, resume_after_filter, parameters::text,
        candidates, filters_evaluated, filters_invalid, filters_paid_ignored, matches_written, notifications_written,
        profiles_quarantined, filters_quarantined, odd_values
        """

    static func run(from row: PostgresRow) throws -> RunRecord {
        RunRecord(
            id: try row.int64(0), kind: RunKind(rawValue: try row.string(1)) ?? .run,
            shard: try Shard(index: Int(try row.int32(2)), count: Int(try row.int32(3))),
            clock: try row.timestamp(4), maxPerFilter: Int(try row.int32(5)), writesNotifications: try row.bool(6),
            status: RunStatus(rawValue: try row.string(7)) ?? .failed,
            since: try row.optionalString(8).map(ChangeMark.init), upTo: try row.optionalString(9).map(ChangeMark.init),
            resumeAfterFilter: try row.optionalInt64(10), parameters: try row.string(11),
            counters: RunCounters(
                candidates: Int(try row.int32(12)), filtersEvaluated: Int(try row.int32(13)),
                filtersInvalid: Int(try row.int32(14)), filtersPaidIgnored: Int(try row.int32(15)),
                matchesWritten: Int(try row.int32(16)), notificationsWritten: Int(try row.int32(17)),
                profilesQuarantined: Int(try row.int32(18)), filtersQuarantined: Int(try row.int32(19)),
                oddValues: Int(try row.int32(20))))
    }

    public func interruptedRun(kind: RunKind, shard: Shard) throws -> RunRecord? {
        let latest = try connection.query("""
            SELECT \(Self.runColumns) FROM matcher_runs
            WHERE kind = $1 AND shard_index = $2 AND shard_count = $3 ORDER BY id DESC LIMIT 1
            """, [.text(kind.rawValue), .int4(Int32(shard.index)), .int4(Int32(shard.count))]).rows.first
            .map(Self.run(from:))
        guard let latest, latest.status != .succeeded else { return nil }
        return latest
    }

    public func progressMark(shard: Shard) throws -> ChangeMark? {
        try connection.query("""
            SELECT snapshot::text FROM matcher_shard_progress WHERE shard_index = $1 AND shard_count = $2
            """, [.int4(Int32(shard.index)), .int4(Int32(shard.count))]).rows.first.map { ChangeMark(try $0.string(0)) }
    }

    public func start(_ run: NewRun) throws -> RunRecord {
        let row = try connection.query("""
            INSERT INTO matcher_runs (kind, shard_index, shard_count, clock, max_per_filter, write_notifications,
                                      status, since_snapshot, snapshot, parameters, candidates)
            VALUES ($1, $2, $3, $4, $5, $6, 'running', $7::text::pg_snapshot, $8::text::pg_snapshot, $9::text::jsonb, $10)
            RETURNING \(Self.runColumns)
            """,
            [.text(run.kind.rawValue), .int4(Int32(run.shard.index)), .int4(Int32(run.shard.count)),
             .timestamptz(run.clock), .int4(Int32(run.maxPerFilter)), .bool(run.writesNotifications),
             run.since.map { .text($0.token) } ?? .null, run.upTo.map { .text($0.token) } ?? .null,
             .text(run.parameters), .int4(Int32(run.candidates))]).rows[0]
        return try Self.run(from: row)
    }

    public func finish(runId: Int64, _ completion: RunCompletion) throws {
        FaultInjection.reach("before-finish")
        try connection.transaction { tx in
            let row = try tx.query("""
                SELECT kind, shard_index, shard_count, snapshot::text, clock, phase_seconds::text
                FROM matcher_runs WHERE id = $1 FOR UPDATE
                """, [.int8(runId)]).rows[0]
            var seconds = Self.decodeSeconds(try row.string(5))
            for (phase, value) in completion.phaseSeconds { seconds[phase.rawValue, default: 0] += value }
            try tx.query("""
                UPDATE matcher_runs SET status = 'succeeded', finished_at = clock_timestamp(), error = NULL,
                    phase_seconds = $2::text::jsonb
                WHERE id = $1
                """, [.int8(runId), .text(Self.encodeSeconds(seconds))])
            if try row.string(0) == RunKind.run.rawValue, let snapshot = try row.optionalString(3) {
                try tx.query("""
                    INSERT INTO matcher_shard_progress (shard_index, shard_count, snapshot, clock, run_id)
                    VALUES ($1, $2, $3::text::pg_snapshot, $4, $5)
                    ON CONFLICT (shard_count, shard_index) DO UPDATE SET snapshot = EXCLUDED.snapshot,
                        clock = EXCLUDED.clock, run_id = EXCLUDED.run_id, updated_at = clock_timestamp()
                    """, [.int4(try row.int32(1)), .int4(try row.int32(2)), .text(snapshot), .timestamptz(try row.timestamp(4)),
                          .int8(runId)])
            }
        }
    }

    public func fail(runId: Int64, error: String) throws {
        try connection.query("""
            UPDATE matcher_runs SET status = 'failed', finished_at = clock_timestamp(), error = $2 WHERE id = $1
            """, [.int8(runId), .text(String(error.prefix(2_000)))])
    }

    public func run(id: Int64) throws -> RunRecord? {
        try connection.query("SELECT \(Self.runColumns) FROM matcher_runs WHERE id = $1", [.int8(id)])
            .rows.first.map(Self.run(from:))
    }

    /// Lists the run's quarantined rows in `matcher_quarantine` (forgetting entries of rows this run
    /// read fine) and keeps the larger of the recorded and the new counts on the run's row, in one
    /// transaction. The table is small (only unreadable rows), so it is read whole to find what to forget.
    public func recordReadIssues(_ issues: ReadIssues, runId: Int64) throws {
        try connection.transaction { tx in
            var listed: [QuarantinedRow.Kind: Set<Int64>] = [:]
            for row in try tx.query("SELECT kind, row_id FROM matcher_quarantine").rows {
                guard let kind = QuarantinedRow.Kind(rawValue: try row.string(0)) else { continue }
                listed[kind, default: []].insert(try row.int64(1))
            }
            let quarantinedNow = Set(issues.quarantined.compactMap { row in row.rowId.map { "\(row.kind.rawValue) \($0)" } })
            var forgetKinds: [String] = [], forgetIds: [Int64] = []
            for (kind, read) in [(QuarantinedRow.Kind.profile, issues.profileIdsRead), (.filter, issues.filterIdsRead)] {
                guard let entries = listed[kind], !entries.isEmpty else { continue }
                for id in read where entries.contains(id) && !quarantinedNow.contains("\(kind.rawValue) \(id)") {
                    forgetKinds.append(kind.rawValue)
                    forgetIds.append(id)
                }
            }
            if !forgetIds.isEmpty {
                try tx.query("""
                    DELETE FROM matcher_quarantine q USING unnest($1::text[], $2::bigint[]) AS u(kind, row_id)
                    WHERE q.kind = u.kind AND q.row_id = u.row_id
                    """, [.textArray(forgetKinds), .int8Array(forgetIds)])
            }
            // One entry per (kind, id): the last reason read wins within a run.
            var latest: [String: QuarantinedRow] = [:]
            for row in issues.quarantined {
                if let id = row.rowId { latest["\(row.kind.rawValue) \(id)"] = row }
            }
            let rows = latest.values.sorted { ($0.kind.rawValue, $0.rowId ?? 0) < ($1.kind.rawValue, $1.rowId ?? 0) }
            if !rows.isEmpty {
                try tx.query("""
                    INSERT INTO matcher_quarantine AS q (kind, row_id, reason, run_id)
                    SELECT u.kind, u.row_id, u.reason, $4 FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u(kind, row_id, reason)
                    ON CONFLICT (kind, row_id) DO UPDATE SET reason = EXCLUDED.reason, run_id = EXCLUDED.run_id,
                        detected_at = CASE WHEN q.reason = EXCLUDED.reason THEN q.detected_at ELSE clock_timestamp() END
                    """, [.textArray(rows.map(\.kind.rawValue)), .int8Array(rows.map { $0.rowId ?? 0 }),
                          .textArray(rows.map { String($0.reason.prefix(2_000)) }), .int8(runId)])
            }
            let c = issues.counters
            try tx.query("""
                UPDATE matcher_runs SET profiles_quarantined = GREATEST(profiles_quarantined, $2),
                    filters_quarantined = GREATEST(filters_quarantined, $3), odd_values = GREATEST(odd_values, $4)
                WHERE id = $1
                """, [.int8(runId), .int4(Int32(clamping: c.profilesQuarantined)),
                      .int4(Int32(clamping: c.filtersQuarantined)), .int4(Int32(clamping: c.oddValues))])
        }
    }

    static func decodeSeconds(_ json: String) -> [String: Double] {
        guard let data = json.data(using: .utf8),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return [:] }
        return object.compactMapValues { ($0 as? NSNumber)?.doubleValue }
    }

    static func encodeSeconds(_ seconds: [String: Double]) -> String {
        "{" + seconds.keys.sorted().map { "\"\($0)\": \(String(format: "%.6f", seconds[$0] ?? 0))" }
            .joined(separator: ", ") + "}"
    }
}
