import Chronology
import Foundation
import Matching
import MatchingPostgres
import PostgresClient
import PostgresTestSupport
import Testing

/// SIGTERM stops a real `matcher run` at the next unit-of-work boundary: the unit in flight commits,
/// nothing is half-written, one clear line, exit 143; the next run completes the rest.
@Suite(.serialized) struct SignalTests {
    @Test func sigtermStopsAtAUnitBoundaryAndTheNextRunCompletes() throws {
        let (clean, stopped) = try Twin.pair(seed: 5)
        let arguments = ["run", "--now", "2026-03-01T03:00:00Z", "--unit-filters", "10"]
        #expect(try MatcherProcess.run(arguments, database: clean.database.conninfo).status == 0)

        // Hold a lock the first unit needs, so the run waits inside it at a known point.
        let blocker = try stopped.database.connect()
        try blocker.execute("BEGIN; LOCK TABLE filter_matches IN SHARE MODE")
        let process = Process()
        process.executableURL = MatcherProcess.executable
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = stopped.database.conninfo
        process.environment = environment
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = Pipe()
        // Standard error as it comes, so that the test can wait for the signal to be taken.
        let written = Locked(Data())
        stderr.fileHandleForReading.readabilityHandler = { handle in
            let more = handle.availableData
            written.update { $0.append(more) }
        }
        var text: String { String(decoding: written.value, as: UTF8.self) }
        try process.run()

        // Wait until the run's unit is blocked on the lock, then ask it to stop and let the unit finish.
        let watcher = try stopped.database.connect()
        let blockerPid = try blocker.query("SELECT pg_backend_pid()").rows[0].int32(0)
        // Up to 60 s, as the fault scenarios allow the same wait on a loaded machine (the run first reads and
        // evaluates its world).
        var waiting = false
        for _ in 0..<1_200 where !waiting {
            // Blocked by our lock, not waiting a moment on a lock of its own (extending a table).
            waiting = try !watcher.query(
                """
                SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'matcher %'
                  AND $1 = ANY (pg_blocking_pids(pid))
                """, [.int4(blockerPid)]
            ).rows.isEmpty
            if !waiting { Thread.sleep(forTimeInterval: 0.05) }
        }
        if !waiting {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            stderr.fileHandleForReading.readabilityHandler = nil
        }
        try #require(waiting, "the run's unit never waited for the held lock")
        kill(process.processIdentifier, SIGTERM)
        // The signal is taken on a queue of the worker's: only once it says so may the unit go on.
        let deadline = Date().addingTimeInterval(30)
        while !text.contains("SIGTERM received"), Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(text.contains("SIGTERM received"), "\(text)")
        try blocker.execute("COMMIT")
        // Bounded: a worker that never exits fails this test, not the whole run at CI's limit.
        let exitBy = Date().addingTimeInterval(120)
        while process.isRunning, Date() < exitBy { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            Issue.record("the worker did not exit within 120 s of SIGTERM")
        }
        process.waitUntilExit()
        stderr.fileHandleForReading.readabilityHandler = nil
        let rest = stderr.fileHandleForReading.readDataToEndOfFile()
        written.update { $0.append(rest) }
        let message = text
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 143, "SIGTERM: 143")
        #expect(message.contains("stopped at a unit-of-work boundary"), "\(message)")

        // The units in flight, one per write connection (10 filters each), were committed: nothing half-written.
        let run = try stopped.connection.query("SELECT status, resume_after_filter FROM matcher_runs").rows
        try #require(run.count == 1)
        #expect(try run[0].string(0) == "failed")
        let committedFilters = try stopped.connection.query("SELECT count(DISTINCT filter_id) FROM filter_matches").rows
        let committed = try committedFilters[0].int64(0)
        #expect(committed > 0, "the units in flight committed")
        #expect(committed <= 10 * Int64(PostgresMatchingStore.defaultWriteConnections))
        // Each committed filter whole (found by review in session 32: a count alone passed a unit half-written):
        // its rows are the clean run's rows of that filter, notifications included.
        let committedIds = Set(
            try stopped.connection.query("SELECT DISTINCT filter_id FROM filter_matches").rows.map { try $0.int64(0) })
        func ofCommitted(_ rows: [String]) -> [String] {
            rows.filter { row in Int64(row.prefix { $0 != "/" }).map(committedIds.contains) ?? false }
        }
        let partial = try Rows.of(stopped.connection)
        #expect(partial.matches == ofCommitted(try Rows.of(clean.connection).matches))
        let cleanNotifications = try Rows.of(clean.connection).notifications.filter { row in
            Int64(row.split(separator: " ")[1]).map(committedIds.contains) ?? false
        }
        #expect(partial.notifications == cleanNotifications)

        // The next run completes the interrupted one: the rows equal one clean run's.
        let next = try MatcherProcess.run(arguments, database: stopped.database.conninfo)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(try Rows.of(stopped.connection).matches == Rows.of(clean.connection).matches)
        #expect(try Rows.of(stopped.connection).notifications == Rows.of(clean.connection).notifications)
    }
}
