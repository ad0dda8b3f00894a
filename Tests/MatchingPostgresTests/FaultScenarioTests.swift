import Chronology
import Foundation
import Matching
import MatchingPostgres
import PostgresClient
import PostgresTestSupport
import Testing

/// The fault scenarios of `scripts/fault-scenarios` that are deterministic and fast enough for CI
/// (docs/fault-scenarios.md): a connection terminated inside a unit of work, a statement timeout, runs
/// started together, hostile input. Each checks the one invariant of the script: after the fault and the
/// normal runs that follow, `filter_matches` and `notifications` hold exactly the rows of one clean run.
/// The faults that need real timing (SIGKILL at instants of a run, the server stopped, a frozen or dropping
/// network) stay in the script; the late commit is `RunIntegrationTests.lateCommitIsPickedUpByTheNextRunWithoutWaiting`.
///
/// The faults are placed deterministically: a session of the test holds a lock the run needs (an
/// uncommitted insert of a pair the run will write, or the notifications table), the test waits until
/// pg_stat_activity shows the worker's backend waiting for it, then acts.
@Suite(.serialized) struct FaultScenarioTests {
    static let now = "2026-03-01T03:00:00Z"
    /// Small units, so that a run commits several before the fault.
    static let run = ["run", "--now", now, "--unit-filters", "5"]

    // MARK: - 2. The worker's connection terminated inside a unit

    @Test func terminatedConnectionInsideAUnitFailsCleanlyAndTheNextRunCompletesIt() throws {
        let clean = try Self.world()
        try Self.expectSuccess(try MatcherProcess.run(Self.run, database: clean.database.conninfo))
        let reference = try Rows.of(clean.connection)
        #expect(reference.matches.count > 100 && reference.notifications.count > 10, "a reference worth comparing")
        // A pair the run writes in its fifth unit (filters 1021…1025): its insert (or COPY) waits on ours.
        let pair = try #require(
            try clean.connection.query(
                """
                SELECT filter_id, profile_id FROM filter_matches WHERE filter_id BETWEEN 1021 AND 1025
                ORDER BY filter_id, profile_id LIMIT 1
                """
            ).rows.first)
        let (filterId, profileId) = (try pair.int64(0), try pair.int64(1))

        let faulted = try Self.world()
        let app = try faulted.database.connect()
        defer { app.close() }
        try app.execute("BEGIN")
        try app.query(
            "INSERT INTO filter_matches (filter_id, profile_id, matched_at) VALUES ($1, $2, now())",
            [.int8(filterId), .int8(profileId)])
        let appPid = try app.query("SELECT pg_backend_pid()").rows[0].int32(0)
        let worker = Background(Self.run, database: faulted.database.conninfo)
        // The backend our held pair blocks, by `pg_blocking_pids`: another of the run's writers can wait a moment
        // on a lock of its own (extending the table), and terminating that one instead would leave the fifth
        // unit waiting on our pair until the statement timeout, which is what one CI run on a loaded machine
        // showed when any lock wait was taken.
        let backend = try Self.waitFor("the worker's insert waiting on the held pair") {
            try faulted.connection.query(
                """
                SELECT pid FROM pg_stat_activity
                WHERE datname = current_database() AND application_name LIKE 'matcher %'
                  AND $1 = ANY (pg_blocking_pids(pid))
                  AND query ~* '^\\s*(INSERT INTO|COPY) filter_matches'
                """, [.int4(appPid)]
            ).rows.first.map { try $0.int32(0) }
        }
        // Units 1 to 4 commit; the fifth is open, its rows written up to the held pair. With two write
        // connections the fourth may still be on its way when the fifth blocks: the cursor gets to 1020 (and no
        // further: the sixth waits for the fifth's commit).
        let cursor = try Self.waitFor("units 1 to 4 committed", timeout: 30) {
            let value = try faulted.connection.query("SELECT resume_after_filter FROM matcher_runs").rows.first?
                .optionalInt64(0)
            return value == 1020 ? value : nil
        }
        #expect(cursor == 1020)
        let committed = try faulted.connection.query("SELECT count(*) FROM filter_matches").rows[0].int64(0)
        #expect(committed > 0)

        try faulted.connection.query("SELECT pg_terminate_backend($1)", [.int4(backend)])
        let failed = try worker.wait()
        try app.execute("ROLLBACK")
        #expect(!failed.signalled && failed.status == 1, "\(failed.stderr)")
        let lines = Self.failureLines(failed)
        #expect(lines.count == 1, "\(failed.stderr)")
        // libpq reports the server's FATAL 57P01 when it could read it, else the closed connection.
        let line = lines.first ?? ""
        #expect(
            line.hasPrefix("matcher: run failed: ") && (line.contains("57P01") || line.contains("connection")),
            "\(lines)")
        // Nothing of the open unit is left; the committed units are.
        #expect(try faulted.connection.query("SELECT count(*) FROM filter_matches").rows[0].int64(0) == committed)
        #expect(
            try faulted.connection.query("SELECT count(*) FROM filter_matches WHERE filter_id > 1020").rows[0].int64(0)
                == 0)

        try Self.waitUntilNoWorkerSession(faulted)
        try Self.expectSuccess(try MatcherProcess.run(Self.run, database: faulted.database.conninfo))
        #expect(try Rows.of(faulted.connection).matches == reference.matches)
        #expect(try Rows.of(faulted.connection).notifications == reference.notifications)
        #expect(try Self.statuses(faulted) == ["succeeded", "succeeded"])
    }

    // MARK: - 4. statement_timeout while another session holds a lock

    @Test func statementTimeoutWhileALockIsHeldFailsCleanlyAndTheNextRunCompletes() throws {
        let clean = try Self.world()
        try Self.expectSuccess(try MatcherProcess.run(Self.run, database: clean.database.conninfo))
        let reference = try Rows.of(clean.connection)
        #expect(reference.matches.count > 100 && reference.notifications.count > 10, "a reference worth comparing")

        let faulted = try Self.world()
        let locker = try faulted.database.connect()
        defer { locker.close() }
        try locker.execute("BEGIN; LOCK TABLE notifications IN ACCESS EXCLUSIVE MODE")
        let started = Date()
        let timedOut = try MatcherProcess.run(
            Self.run + ["--statement-timeout", "1"], database: faulted.database.conninfo)
        let seconds = Date().timeIntervalSince(started)
        try locker.execute("ROLLBACK")
        #expect(!timedOut.signalled && timedOut.status == 1, "\(timedOut.stderr)")
        #expect(seconds < 30)
        let lines = Self.failureLines(timedOut)
        #expect(lines.count == 1, "\(timedOut.stderr)")
        #expect(
            lines.first?.contains("57014") == true && lines.first?.contains("statement timeout") == true, "\(lines)")
        // The first unit waited for the lock and was rolled back; the run is recorded as failed.
        #expect(try faulted.connection.query("SELECT count(*) FROM filter_matches").rows[0].int64(0) == 0)
        #expect(try Self.statuses(faulted) == ["failed"])

        try Self.waitUntilNoWorkerSession(faulted)
        try Self.expectSuccess(try MatcherProcess.run(Self.run, database: faulted.database.conninfo))
        #expect(try Rows.of(faulted.connection).matches == reference.matches)
        #expect(try Rows.of(faulted.connection).notifications == reference.notifications)
        #expect(try Self.statuses(faulted) == ["succeeded", "succeeded"])
    }

    // MARK: - 6. Runs started together

    @Test func twoRunsOfTheSameShardStartedTogetherWriteEverythingOnce() throws {
        let clean = try Self.world()
        try Self.expectSuccess(try MatcherProcess.run(Self.run, database: clean.database.conninfo))
        let reference = try Rows.of(clean.connection)
        #expect(reference.matches.count > 100 && reference.notifications.count > 10, "a reference worth comparing")

        let twice = try Self.world()
        // The runs overlap for certain: a session of the test holds a lock the first run's first unit needs, the
        // second run starts only once the first waits for it (holding the shard's run lock, its run recorded),
        // and the lock is let go only after the second has ended.
        let locker = try twice.database.connect()
        defer { locker.close() }
        try locker.execute("BEGIN; LOCK TABLE filter_matches IN SHARE MODE")
        let first = Background(Self.run, database: twice.database.conninfo)
        do {
            _ = try Self.waitFor("the first run's unit waiting on the held lock") {
                try twice.connection.query(
                    """
                    SELECT 1 FROM pg_stat_activity
                    WHERE datname = current_database() AND application_name LIKE 'matcher %'
                      AND $1 = ANY (pg_blocking_pids(pid))
                    """, [.int4(locker.backendPID)]
                ).rows.first.map { _ in true }
            }
        } catch {
            // Let the first run go on and end before the test fails.
            try locker.execute("ROLLBACK")
            _ = try? first.wait()
            throw error
        }
        // Bounded: a second run that waited for the first instead of being refused fails here, after 30 s.
        let second = try MatcherProcess.run(Self.run, database: twice.database.conninfo, timeout: 30)
        // Refused while the first is still inside its run: nothing written, only the first run's row.
        let runsWhileBlocked = try twice.connection.query("SELECT count(*) FROM matcher_runs").rows[0].int64(0)
        let stillBlocked = try twice.connection.query(
            """
            SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND application_name LIKE 'matcher %'
              AND $1 = ANY (pg_blocking_pids(pid))
            """, [.int4(locker.backendPID)]
        ).rows[0].int64(0)
        try locker.execute("COMMIT")
        let outcome = try first.wait()
        let statuses = [outcome, second].map(\.status)
        #expect(statuses == [0, 75], "\([outcome, second].map(\.stderr))")
        #expect(!outcome.signalled && !second.signalled)
        #expect(second.stderr.contains("holds the lock"), "\(second.stderr)")
        #expect(stillBlocked > 0, "the first run was still waiting when the second ended")
        #expect(runsWhileBlocked == 1)
        #expect(try Self.statuses(twice) == ["succeeded"])
        try Self.waitUntilNoWorkerSession(twice)
        try Self.expectSuccess(try MatcherProcess.run(Self.run, database: twice.database.conninfo))
        #expect(try Rows.of(twice.connection).matches == reference.matches)
        #expect(try Rows.of(twice.connection).notifications == reference.notifications)
    }

    @Test func fourShardsStartedTogetherWriteWhatOneRunWrites() throws {
        let clean = try Self.world()
        try Self.expectSuccess(try MatcherProcess.run(Self.run, database: clean.database.conninfo))
        let reference = try Rows.of(clean.connection)
        #expect(reference.matches.count > 100 && reference.notifications.count > 10, "a reference worth comparing")

        let sharded = try Self.world()
        let workers = (0..<4).map { k in
            Background(Self.run + ["--shard", "\(k)/4"], database: sharded.database.conninfo)
        }
        for outcome in try workers.map({ try $0.wait() }) {
            #expect(!outcome.signalled && outcome.status == 0, "\(outcome.stderr)")
        }
        #expect(try Rows.of(sharded.connection).matches == reference.matches)
        #expect(try Rows.of(sharded.connection).notifications == reference.notifications)
        #expect(
            try sharded.connection.query("SELECT count(*) FROM matcher_shard_progress WHERE shard_count = 4")
                .rows[0].int64(0) == 4)
    }

    // MARK: - 8. Hostile input

    /// Invalid filters: id, name, conditions (JSON text) and the item key recorded for them (nil: the
    /// document as a whole).
    static let hostileFilters: [(id: Int64, name: String, json: String, key: String?)] = {
        let megabyte = String(repeating: "a", count: 1 << 20)
        let sql = "'; DROP TABLE profiles; --"
        // Long, but within the 64 KiB of JSON text (as jsonb prints it) that a filter may have.
        let hugeInvalid = (1..<15_000).map { String(1 + $0 % 48) }.joined(separator: ",") + ",99"
        return [
            (
                5001, "deep",
                #"{"age": "# + String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000) + "}", nil
            ),
            (5002, "huge list", #"{"residence": {"anyOf": [\#(hugeInvalid)]}}"#, "residence"),
            // Over 64 KiB: refused as a whole before it is parsed.
            (5003, String(repeating: "n", count: 1 << 20), #"{"smoking": {"anyOf": ["\#(megabyte)"]}}"#, nil),
            (5004, sql, #"{"\#(sql)": {"anyOf": ["\#(sql)"]}}"#, #""\#(sql)""#),
            (5005, "x'); DELETE FROM filter_matches; --", #"{"age": {"min": "\#(sql)"}}"#, "age"),
            (
                5006, #""quoted" \ back\slash"#,
                #"{"gender": {"anyOf": [1], "'); DELETE FROM filter_matches; --": 1}}"#, "gender"
            ),
            (5007, "beyond 64 bits", #"{"height": {"min": 123456789012345678901234567890}}"#, "height"),
            (5008, "2^64", #"{"communities": {"anyOf": [18446744073709551616]}}"#, "communities"),
            (5009, "caf\u{FFFD}", #"{"resid\uFFFDence": {"anyOf": [13]}}"#, "\"resid\u{FFFD}ence\""),
            (5010, "escaped surrogate as text", #"{"\\ud800": 1}"#, #""\\ud800""#),
            (5011, "a list", "[]", nil),
            (5012, "a flag as a string", #"{"has_photo": "yes"}"#, "has_photo"),
        ]
    }()

    @Test func hostileInputIsRecordedPerFilterAndChangesNothingElse() throws {
        let clean = try Self.world()
        try Self.expectSuccess(try MatcherProcess.run(Self.run, database: clean.database.conninfo))
        let reference = try Rows.of(clean.connection)
        #expect(reference.matches.count > 100 && reference.notifications.count > 10, "a reference worth comparing")
        let referenceInvalid = try Self.invalidFilters(clean)

        let hostile = try Self.world()
        let db = hostile.connection
        // PostgreSQL itself refuses invalid UTF-8, lone surrogates and NUL in a UTF8 database, so no such
        // text ever reaches the worker.
        for refused in [
            "SELECT convert_from('\\xff'::bytea, 'UTF8')", #"SELECT '{"a": "\ud800"}'::jsonb"#,
            #"SELECT '{"a": "\u0000"}'::jsonb"#,
        ] {
            #expect(throws: PostgresError.self, "\(refused)") { try db.query(refused) }
        }
        let owner = try db.query("SELECT min(id) FROM profiles WHERE status = 1").rows[0].int64(0)
        for filter in Self.hostileFilters {
            try db.query(
                """
                INSERT INTO saved_filters (id, owner_id, name, conditions, created_at, updated_at)
                VALUES ($1, $2, $3, $4::text::jsonb, $5, $5)
                """,
                [
                    .int8(filter.id), .int8(owner), .text(filter.name), .text(filter.json),
                    .timestamptz(ScenarioWorld.day1),
                ])
        }
        // Two valid filters without a gender condition, to show out-of-domain values are evaluated and fail.
        try db.query(
            """
            INSERT INTO saved_filters (id, owner_id, name, conditions, created_at, updated_at) VALUES
              (5101, $1, 'residence 13', '{"residence": {"anyOf": [13]}}', $2, $2),
              (5102, $1, 'height 120+', '{"height": {"min": 120}}', $2, $2)
            """, [.int8(owner), .timestamptz(ScenarioWorld.day1)])
        // Out-of-domain profiles. Every world filter constrains gender, so gender 0 and 7 keep them out of
        // the world's rows (which must equal the clean run's exactly); status 9 is not active.
        let day1 = ScenarioWorld.day1
        try hostile.writer.insertProfiles(
            [
                Profile.make(
                    id: 9001, lastLoginAt: day1, createdAt: day1, ["gender": .code(7), "residence": .code(99)]),
                Profile.make(
                    id: 9002, lastLoginAt: day1, createdAt: day1, ["gender": .code(0), "height": .integer(-5)]),
                Profile.make(
                    id: 9003, lastLoginAt: day1, createdAt: day1,
                    ["gender": .code(7), "communities": .codes([-1, -2])]),
                Profile.make(id: 9004, status: 9, lastLoginAt: day1, createdAt: day1, ["gender": .code(2)]),
            ], updatedAt: day1)

        let outcome = try MatcherProcess.run(Self.run, database: hostile.database.conninfo)
        try Self.expectSuccess(outcome)
        #expect(outcome.stderr.utf8.count < 100_000)

        // Each invalid filter: one record, with the key, a short reason, and no rows.
        let recorded = try Self.invalidFilters(hostile)
        for filter in Self.hostileFilters {
            let record = try #require(recorded[filter.id], "filter \(filter.id) not recorded")
            #expect(record.key == filter.key, "filter \(filter.id): \(record.reason)")
            #expect(record.reason.count < 200, "filter \(filter.id)")
        }
        #expect(recorded.filter { $0.key <= 5000 }.mapValues(\.reason) == referenceInvalid.mapValues(\.reason))
        #expect(recorded[5101] == nil && recorded[5102] == nil)
        #expect(
            try db.query("SELECT count(*) FROM filter_matches WHERE filter_id BETWEEN 5001 AND 5100").rows[0].int64(0)
                == 0)
        // The valid extra filters matched world profiles but no out-of-domain value.
        #expect(
            try db.query("SELECT count(*) FROM filter_matches WHERE filter_id IN (5101, 5102)").rows[0].int64(0) > 0)
        #expect(try db.query("SELECT count(*) FROM filter_matches WHERE profile_id > 9000").rows[0].int64(0) == 0)
        // The world's filters wrote exactly what they write without the hostile rows. The two valid extra
        // filters are `owner`'s: a world pair whose profile is `owner` may be mutual here (runs.md, "Mutual
        // matches"), and a digest counting one says so; nothing else may differ.
        let rows = try Rows.of(db)
        let ownerPair = { (row: String) in row.split(separator: " ").first?.hasSuffix("/\(owner)") == true }
        let worldMatches = rows.matches.filter { Self.filterId(match: $0) < 5000 }
        #expect(worldMatches.filter { !ownerPair($0) } == reference.matches.filter { !ownerPair($0) })
        #expect(worldMatches.map(Self.withoutMutual) == reference.matches.map(Self.withoutMutual))
        #expect(
            rows.notifications.filter { Self.filterId(notification: $0) < 5000 }.map(Self.withoutMutual)
                == reference.notifications.map(Self.withoutMutual))
        #expect(try db.query("SELECT count(*) FROM profiles").rows[0].int64(0) == 304)
    }

    // MARK: - Helpers

    /// A fresh database with ScenarioWorld's day 1 (300 profiles, 60 filters 1001…1060, some invalid, blocks).
    static func world(_ label: String = #function) throws -> Twin {
        let twin = try Twin(label)
        var world = ScenarioWorld(seed: 11)
        let day1 = world.day1(profiles: 300, filters: 60)
        try twin.load(day1)
        return twin
    }

    static func expectSuccess(
        _ outcome: MatcherProcess.Outcome, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        #expect(!outcome.signalled && outcome.status == 0, "\(outcome.stderr)", sourceLocation: sourceLocation)
    }

    /// The worker's own lines on stderr (its logs are logfmt lines there too).
    static func failureLines(_ outcome: MatcherProcess.Outcome) -> [String] {
        outcome.stderr.split(separator: "\n").map(String.init).filter { $0.hasPrefix("matcher: ") }
    }

    static func statuses(_ twin: Twin) throws -> [String] {
        try twin.connection.query("SELECT status FROM matcher_runs ORDER BY id").rows.map { try $0.string(0) }
    }

    static func invalidFilters(_ twin: Twin) throws -> [Int64: (key: String?, reason: String)] {
        var records: [Int64: (key: String?, reason: String)] = [:]
        for row in try twin.connection.query("SELECT filter_id, item_key, reason FROM matcher_invalid_filters").rows {
            records[try row.int64(0)] = (try row.optionalString(1), try row.string(2))
        }
        return records
    }

    /// A killed or failed worker's sessions end when the server notices; a run started before that would
    /// find the shard's lock still held.
    static func waitUntilNoWorkerSession(_ twin: Twin) throws {
        _ = try waitFor("the worker's sessions to end") {
            try twin.connection.query(
                """
                SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'matcher %'
                """
            ).rows[0].int64(0) == 0 ? true : nil
        }
    }

    static func waitFor<T>(_ what: String, timeout: TimeInterval = 60, _ probe: () throws -> T?) throws -> T {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let value = try probe() { return value }
            Thread.sleep(forTimeInterval: 0.01)
        }
        throw FaultScenarioError(message: "timed out waiting for \(what)")
    }

    static func filterId(match row: String) -> Int64 { Int64(row.prefix { $0 != "/" }) ?? -1 }
    /// A `Rows` line without its mutual flag or count.
    static func withoutMutual(_ row: String) -> String {
        row.replacing(#/ mutual( \d+)?/#, with: "")
    }
    static func filterId(notification row: String) -> Int64 {
        Int64(row.split(separator: " ").dropFirst().first ?? "") ?? -1
    }
}

struct FaultScenarioError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// The worker started on another thread; `wait()` returns its outcome.
final class Background: @unchecked Sendable {
    private let group = DispatchGroup()
    private var result: Result<MatcherProcess.Outcome, any Error>?

    init(_ arguments: [String], database: String) {
        group.enter()
        DispatchQueue.global().async {
            self.result = Result { try MatcherProcess.run(arguments, database: database) }
            self.group.leave()
        }
    }

    func wait() throws -> MatcherProcess.Outcome {
        group.wait()
        return try result!.get()
    }
}
