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

    /// Unlocks, then ends the session. Closing alone releases the lock only once the server's backend has
    /// noticed and exited, a moment later: a run started right after (the next command of a script, the next
    /// run of a test) could find the lock still held and exit 75. The unlock waits at most a few seconds, so
    /// that after a network failure it does not wait out a full deadline on the broken path; the close
    /// releases the lock then, as before.
    func release() {
        connection.callTimeout = Self.unlockTimeout
        _ = try? connection.query("SELECT pg_advisory_unlock_all()")
        connection.close()
    }

    static let unlockTimeout: Duration = .seconds(5)
}

extension PostgresMatchingStore: RunRepository {
    /// Two-key advisory lock: (namespace + kind, shard count << 16 | shard index).
    package static func lockKeys(kind: RunKind, shard: Shard) -> (Int32, Int32) {
        let namespace: Int32 = 0x4D_41_54_10  // "MAT" + 0x10
        let kindKey: Int32 = kind == .run ? 0 : 1
        return (namespace + kindKey, Int32(truncatingIfNeeded: shard.count << 16 | shard.index))
    }

    /// A connection of its own for a run lock. Its session sits idle for the whole run: a server-wide
    /// idle_session_timeout (PostgreSQL 14+) would end it, and the lock with it, while the run goes on, and a second
    /// run of the shard could start. (The command line's connections turn it off already; this store may be given
    /// connections made otherwise.)
    private func openLockConnection() throws -> PostgresConnection {
        let lockConnection = try openConnection()
        do {
            try lockConnection.query(
                """
                SELECT set_config('idle_session_timeout', '0', false)
                WHERE current_setting('server_version_num')::int >= 140000
                """)
        } catch {
            lockConnection.close()
            throw error
        }
        return lockConnection
    }

    public func tryLock(kind: RunKind, shard: Shard) throws -> (any RunLock)? {
        let lockConnection = try openLockConnection()
        let keys = Self.lockKeys(kind: kind, shard: shard)
        let acquired = try lockConnection.query(
            "SELECT pg_try_advisory_lock($1, $2)", [.int4(keys.0), .int4(keys.1)]
        ).rows[0].bool(0)
        guard acquired else {
            lockConnection.close()
            return nil
        }
        return PostgresRunLock(connection: lockConnection)
    }

    public func tryLockAlone(kind: RunKind, shard: Shard) throws -> RunLockAttempt {
        let lockConnection = try openLockConnection()
        var handedOver = false
        defer { if !handedOver { lockConnection.close() } }
        let keys = Self.lockKeys(kind: kind, shard: shard)
        let attempt = try lockConnection.transaction { tx -> RunLockAttempt in
            // One start decides at a time (a transaction's lock, a moment long): the held locks read below, then
            // this one taken, with no other start between.
            _ = try tx.query("SELECT pg_advisory_xact_lock($1, 0)", [.int4(keys.0 + Self.admissionOffset)])
            // The run locks held now, by layout: the second key is count << 16 | index (`lockKeys`).
            let held = try tx.query(
                """
                SELECT l.objid::bigint FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND l.classid = $1::bigint::oid
                """, [.int8(Int64(keys.0))]
            ).rows.compactMap { row -> Shard? in
                let key = try row.int64(0)
                return try? Shard(index: Int(key & 0xFFFF), count: Int(key >> 16))
            }
            let overlapping = held.filter { $0 != shard && $0.intersects(shard) }
            guard overlapping.isEmpty else {
                return .overlapping(overlapping.sorted { $0.description < $1.description })
            }
            // A session's lock, kept past this transaction's end, until the run releases it or its session ends.
            let acquired = try tx.query(
                "SELECT pg_try_advisory_lock($1, $2)", [.int4(keys.0), .int4(keys.1)]
            ).rows[0].bool(0)
            return acquired ? .acquired(PostgresRunLock(connection: lockConnection)) : .held
        }
        guard case .acquired(let lock) = attempt else { return attempt }
        handedOver = true
        if verifiesSchemaUnderRunLock {
            do {
                try MigrationRunner.verifyCurrentUnderRunLock(lockConnection)
            } catch {
                lock.release()
                throw error
            }
        }
        return attempt
    }

    /// Added to a kind's first lock key for the lock that one start at a time takes (`tryLockAlone`); the run
    /// locks use the kind's own key (`lockKeys`: run + 0, backfill + 1), `MigrationRunner.lockNamespace` others.
    /// A third kind would need its own offsets (its key would be this one's).
    package static let admissionOffset: Int32 = 2

    static let runColumns = """
        id, kind, shard_index, shard_count, clock, max_per_filter, write_notifications, status,
        coverage::text, snapshot::text, resume_after_filter, parameters::text,
        candidates, filters_evaluated, filters_invalid, filters_paid_ignored, matches_written, notifications_written,
        snapshot_taken_at, time_zone, retention_days, matches_forgotten,
        profiles_quarantined, filters_quarantined, odd_values,
        filters_suspended, digests_held_back, matches_mutual, owner::text
        """

    static func run(from row: PostgresRow) throws -> RunRecord {
        RunRecord(
            id: try row.int64(0), kind: RunKind(rawValue: try row.string(1)) ?? .run,
            shard: try Shard(index: Int(try row.int32(2)), count: Int(try row.int32(3))),
            clock: try row.timestamp(4), maxPerFilter: Int(try row.int32(5)), writesNotifications: try row.bool(6),
            status: RunStatus(rawValue: try row.string(7)) ?? .failed,
            coverage: try row.optionalString(8).map(decodeCoverage),
            upTo: try row.optionalString(9).map(ChangeMark.init),
            upToTakenAt: try row.optionalTimestamp(18), timeZone: try row.optionalString(19),
            retentionDays: try row.optionalInt32(20).map(Int.init),
            resumeAfterFilter: try row.optionalInt64(10), parameters: try row.string(11),
            counters: RunCounters(
                candidates: Int(try row.int32(12)), filtersEvaluated: Int(try row.int32(13)),
                filtersInvalid: Int(try row.int32(14)), filtersPaidIgnored: Int(try row.int32(15)),
                matchesWritten: Int(clamping: try row.int64(16)), notificationsWritten: Int(try row.int32(17)),
                matchesForgotten: Int(clamping: try row.int64(21)),
                profilesQuarantined: Int(try row.int32(22)), filtersQuarantined: Int(try row.int32(23)),
                oddValues: Int(try row.int32(24)), filtersSuspended: Int(try row.int32(25)),
                digestsHeldBack: Int(try row.int32(26)), matchesMutual: Int(clamping: try row.int64(27))),
            owner: try row.optionalString(28))
    }

    /// A new owner token (`RunRecord.owner`) for a run this process starts or claims.
    static func newOwner() -> String { UUID().uuidString.lowercased() }

    static func decodeCoverage(_ json: String) throws -> Coverage {
        try JSONDecoder().decode(Coverage.self, from: Data(json.utf8))
    }

    static func encodeCoverage(_ coverage: Coverage) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(coverage), as: UTF8.self)
    }

    public func interruptedRun(kind: RunKind, shard: Shard) throws -> RunRecord? {
        let latest = try connection.query(
            """
            SELECT \(Self.runColumns) FROM matcher_runs
            WHERE kind = $1 AND shard_index = $2 AND shard_count = $3 ORDER BY id DESC LIMIT 1
            """, [.text(kind.rawValue), .int4(Int32(shard.index)), .int4(Int32(shard.count))]
        ).rows.first
            .map(Self.run(from:))
        guard let latest, latest.status.isUnfinished else { return nil }
        return latest
    }

    public func interruptedRuns(intersecting shard: Shard) throws -> [RunRecord] {
        try connection.query(
            """
            SELECT \(Self.runColumns) FROM matcher_runs r
            WHERE kind = 'run' AND status IN ('running', 'failed') AND shard_count <> $1
              AND id = (SELECT max(id) FROM matcher_runs l
                        WHERE l.kind = 'run' AND l.shard_index = r.shard_index AND l.shard_count = r.shard_count)
            ORDER BY id
            """, [.int4(Int32(shard.count))]
        ).rows.map(Self.run(from:)).filter { $0.shard.intersects(shard) }
    }

    public func abandon(runId: Int64) throws {
        try connection.query(
            """
            UPDATE matcher_runs SET status = 'abandoned', finished_at = coalesce(finished_at, clock_timestamp())
            WHERE id = $1 AND status IN ('running', 'failed')
            """, [.int8(runId)])
    }

    public func coverage() throws -> Coverage {
        try Self.coverage(connection)
    }

    static func coverage(_ connection: PostgresConnection, forUpdate: Bool = false) throws -> Coverage {
        Coverage(
            entries: try connection.query(
                """
                SELECT shard_index, shard_count, snapshot::text, reset_to, taken_at, time_zone FROM matcher_shard_progress
                \(forUpdate ? "FOR UPDATE" : "")
                """
            ).rows.map { row in
                let mark: ChangeMark
                if let snapshot = try row.optionalString(2) {
                    mark = ChangeMark(snapshot)
                } else {
                    mark = .resetTo(try row.timestamp(3))
                }
                return CoverageEntry(
                    shard: try Shard(index: Int(try row.int32(0)), count: Int(try row.int32(1))),
                    mark: mark, takenAt: try row.timestamp(4), timeZone: try row.optionalString(5))
            })
    }

    public func start(_ run: NewRun) throws -> RunRecord {
        let row = try connection.query(
            """
            INSERT INTO matcher_runs (kind, shard_index, shard_count, clock, max_per_filter, write_notifications,
                                      status, coverage, snapshot, snapshot_taken_at, time_zone, retention_days,
                                      parameters, candidates, owner)
            VALUES ($1, $2, $3, $4, $5, $6, 'running', $7::text::jsonb, $8::text::pg_snapshot, $9, $10, $11,
                    $12::text::jsonb, $13, $14::uuid)
            RETURNING \(Self.runColumns)
            """,
            [
                .text(run.kind.rawValue), .int4(Int32(run.shard.index)), .int4(Int32(run.shard.count)),
                .timestamptz(run.clock), .int4(Int32(clamping: run.maxPerFilter)), .bool(run.writesNotifications),
                try run.coverage.map { .text(try Self.encodeCoverage($0)) } ?? .null,
                run.upTo.map { .text($0.token) } ?? .null, run.upToTakenAt.map { .timestamptz($0) } ?? .null,
                .text(run.timeZone), .int4(Int32(clamping: run.retentionDays)),
                .text(run.parameters), .int4(Int32(clamping: run.candidates)), .text(Self.newOwner()),
            ]
        ).rows[0]
        return try Self.run(from: row)
    }

    /// The UPDATE waits for a unit of the former owner that has moved the cursor and not yet committed (it holds
    /// the row), so the cursor returned is the one that unit left; a unit that moves it later finds a new owner.
    public func claim(runId: Int64) throws -> RunRecord? {
        try connection.query(
            """
            UPDATE matcher_runs SET owner = $2::uuid, status = 'running', finished_at = NULL, error = NULL
            WHERE id = $1 AND status IN ('running', 'failed')
            RETURNING \(Self.runColumns)
            """, [.int8(runId), .text(Self.newOwner())]
        ).rows.first.map(Self.run(from:))
    }

    public func finish(runId: Int64, _ completion: RunCompletion) throws {
        faultPoints?.reach(.beforeFinish)
        try connection.transaction { tx in
            let row = try tx.query(
                """
                SELECT kind, shard_index, shard_count, snapshot::text, snapshot_taken_at, time_zone, phase_seconds::text,
                       clock, owner IS NOT DISTINCT FROM $2::uuid AND status IN ('running', 'failed')
                FROM matcher_runs WHERE id = $1 FOR UPDATE
                """, [.int8(runId), completion.owner.map { .text($0) } ?? .null]
            ).rows[0]
            guard try row.bool(8) else { throw RunTakenOver(runId: runId) }
            var seconds = Self.decodeSeconds(try row.string(6))
            for (phase, value) in completion.phaseSeconds { seconds[phase.rawValue, default: 0] += value }
            try tx.query(
                """
                UPDATE matcher_runs SET status = 'succeeded', finished_at = clock_timestamp(), error = NULL,
                    phase_seconds = $2::text::jsonb, matches_forgotten = matches_forgotten + $3
                WHERE id = $1
                """, [.int8(runId), .text(Self.encodeSeconds(seconds)), .int8(Int64(completion.matchesForgotten))])
            guard try row.string(0) == RunKind.run.rawValue, let snapshot = try row.optionalString(3),
                let takenAt = try row.optionalTimestamp(4)
            else { return }
            // One coverage writer at a time: shards finishing together each see the other's entry.
            try tx.query("SELECT pg_advisory_xact_lock($1, $2)", [.int4(MigrationRunner.lockNamespace), .int4(2)])
            let shard = try Shard(index: Int(try row.int32(1)), count: Int(try row.int32(2)))
            let before = try Self.coverage(tx, forUpdate: true)
            let after = before.recording(
                CoverageEntry(
                    shard: shard, mark: ChangeMark(snapshot), takenAt: takenAt,
                    timeZone: try row.optionalString(5)))
            try Self.store(after, replacing: before, tx, runId: runId, clock: try row.timestamp(7))
        }
    }

    /// Under the coverage writers' lock (the one `finish` takes), in one transaction.
    public func updateCoverage(
        _ body: (Coverage, Timestamp) throws -> Coverage
    ) throws -> (before: Coverage, after: Coverage) {
        try connection.transaction { tx in
            try tx.query("SELECT pg_advisory_xact_lock($1, $2)", [.int4(MigrationRunner.lockNamespace), .int4(2)])
            let before = try Self.coverage(tx, forUpdate: true)
            let now = try tx.query("SELECT clock_timestamp()").rows[0].timestamp(0)
            let after = try body(before, now)
            try Self.store(after, replacing: before, tx, runId: nil, clock: now)
            return (before, after)
        }
    }

    /// Writes `after` over `before`: entries no longer kept are deleted, new or changed ones upserted.
    static func store(
        _ after: Coverage, replacing before: Coverage, _ tx: PostgresConnection, runId: Int64?,
        clock: Timestamp
    ) throws {
        let keptShards = Set(after.entries.map(\.shard))
        for gone in before.entries where !keptShards.contains(gone.shard) {
            try tx.query(
                "DELETE FROM matcher_shard_progress WHERE shard_index = $1 AND shard_count = $2",
                [.int4(Int32(gone.shard.index)), .int4(Int32(gone.shard.count))])
        }
        let previous = Set(before.entries)
        for entry in after.entries where !previous.contains(entry) {
            let snapshot: PostgresValue
            let resetTo: PostgresValue
            switch ChangeMark.Form(entry.mark) {
            case .snapshot(let text): (snapshot, resetTo) = (.text(text), .null)
            case .time(let time): (snapshot, resetTo) = (.null, .timestamptz(time))
            }
            try tx.query(
                """
                INSERT INTO matcher_shard_progress (shard_index, shard_count, snapshot, reset_to, taken_at, time_zone,
                                                    clock, run_id)
                VALUES ($1, $2, $3::text::pg_snapshot, $4, $5, $6, $8, coalesce($7, 0))
                ON CONFLICT (shard_count, shard_index) DO UPDATE SET snapshot = EXCLUDED.snapshot,
                    reset_to = EXCLUDED.reset_to, taken_at = EXCLUDED.taken_at, time_zone = EXCLUDED.time_zone,
                    clock = EXCLUDED.clock, run_id = EXCLUDED.run_id, updated_at = clock_timestamp()
                """,
                [
                    .int4(Int32(entry.shard.index)), .int4(Int32(entry.shard.count)), snapshot, resetTo,
                    .timestamptz(entry.takenAt), entry.timeZone.map { .text($0) } ?? .null,
                    runId.map { .int8($0) } ?? .null, .timestamptz(clock),
                ])
        }
    }

    public func fail(runId: Int64, owner: String?, error: String) throws {
        try connection.query(
            """
            UPDATE matcher_runs SET status = 'failed', finished_at = clock_timestamp(), error = $2
            WHERE id = $1 AND owner IS NOT DISTINCT FROM $3::uuid AND status IN ('running', 'failed')
            """, [.int8(runId), .text(String(error.prefix(2_000))), owner.map { .text($0) } ?? .null])
    }

    public func latestRetentionDays() throws -> Int? {
        try connection.query(Self.latestRetentionDaysSQL).rows.first.flatMap { try $0.optionalInt32(0) }.map(Int.init)
    }

    /// `--retention-days` of the latest run or backfill that recorded one (also read by `matcher status`).
    static let latestRetentionDaysSQL =
        "SELECT retention_days FROM matcher_runs WHERE retention_days IS NOT NULL ORDER BY id DESC LIMIT 1"

    public func matchesRecorded(clockAfter after: Timestamp, through: Timestamp) throws -> Int {
        // A scan of matcher_runs: a few rows a day and shard, kept through the retention.
        Int(
            try connection.query(
                "SELECT coalesce(sum(matches_written), 0)::bigint FROM matcher_runs WHERE clock > $1 AND clock <= $2",
                [.timestamptz(after), .timestamptz(through)]
            ).rows[0].int64(0))
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
            let quarantinedNow = Set(
                issues.quarantined.compactMap { row in row.rowId.map { "\(row.kind.rawValue) \($0)" } })
            var forgetKinds: [String] = [], forgetIds: [Int64] = []
            for (kind, read) in [(QuarantinedRow.Kind.profile, issues.profileIdsRead), (.filter, issues.filterIdsRead)]
            {
                guard let entries = listed[kind], !entries.isEmpty else { continue }
                for id in read where entries.contains(id) && !quarantinedNow.contains("\(kind.rawValue) \(id)") {
                    forgetKinds.append(kind.rawValue)
                    forgetIds.append(id)
                }
            }
            if !forgetIds.isEmpty {
                try tx.query(
                    """
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
                try tx.query(
                    """
                    INSERT INTO matcher_quarantine AS q (kind, row_id, reason, run_id)
                    SELECT u.kind, u.row_id, u.reason, $4 FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u(kind, row_id, reason)
                    ON CONFLICT (kind, row_id) DO UPDATE SET reason = EXCLUDED.reason, run_id = EXCLUDED.run_id,
                        detected_at = CASE WHEN q.reason = EXCLUDED.reason THEN q.detected_at ELSE clock_timestamp() END
                    """,
                    [
                        .textArray(rows.map(\.kind.rawValue)), .int8Array(rows.map { $0.rowId ?? 0 }),
                        .textArray(rows.map { String($0.reason.prefix(2_000)) }), .int8(runId),
                    ])
            }
            let c = issues.counters
            try tx.query(
                """
                UPDATE matcher_runs SET profiles_quarantined = GREATEST(profiles_quarantined, $2),
                    filters_quarantined = GREATEST(filters_quarantined, $3), odd_values = GREATEST(odd_values, $4)
                WHERE id = $1
                """,
                [
                    .int8(runId), .int4(Int32(clamping: c.profilesQuarantined)),
                    .int4(Int32(clamping: c.filtersQuarantined)), .int4(Int32(clamping: c.oddValues)),
                ])
        }
    }

    static func decodeSeconds(_ json: String) -> [String: Double] {
        guard let data = json.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return [:] }
        return object.compactMapValues { ($0 as? NSNumber)?.doubleValue }
    }

    static func encodeSeconds(_ seconds: [String: Double]) -> String {
        "{"
            + seconds.keys.sorted().map { "\"\($0)\": \(String(format: "%.6f", seconds[$0] ?? 0))" }
            .joined(separator: ", ") + "}"
    }
}
