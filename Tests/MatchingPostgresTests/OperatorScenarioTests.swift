import Chronology
import Foundation
import Matching
import MatchingPostgres
import PostgresClient
import PostgresTestSupport
import Testing

/// The bad day on PostgreSQL: the notification pause inside the unit commit, `matcher status` over the real
/// tables as the worker role, and the two fault scenarios of `scripts/fault-scenarios` that need an operator
/// (10: time going backwards, then `matcher progress reset`; 11: a run that cannot be completed, then
/// `matcher runs abandon`), with the real binary.
@Suite(.serialized) struct OperatorScenarioTests {
    // MARK: - The pause

    @Test func aPausedRunRecordsMatchesAndSendsNothingAndAfterResumeTheNextRunSendsTheWaitingDigests() throws {
        let twin = try FaultScenarioTests.world()
        let state = PostgresServiceState(connection: twin.connection)
        try state.pauseNotifications(by: "test", reason: "push outage")
        try twin.memory.pauseNotifications(by: "test", reason: "push outage")
        // The in-memory twin holds the same world: load it there too.
        var world = ScenarioWorld(seed: 11)
        let day1 = world.day1(profiles: 300, filters: 60)
        twin.memory.save(day1.profiles)
        twin.memory.save(day1.filters)
        for block in day1.blocks { twin.memory.block(block.blockerId, block.blockedId) }

        let paused = try twin.runBoth(at: ScenarioWorld.day1)
        #expect(paused.postgres.counters.matchesWritten > 0)
        #expect(paused.postgres.counters.notificationsWritten == 0 && paused.memory.counters.notificationsWritten == 0)
        let count = { (sql: String) in try twin.connection.query(sql).rows[0].int64(0) }
        #expect(try count("SELECT count(*) FROM notifications") == 0)
        #expect(try count("SELECT count(*) FROM filter_matches WHERE notification_id IS NOT NULL") == 0)
        #expect(try count("SELECT count(*) FROM matcher_filter_state WHERE last_notified_at IS NOT NULL") == 0)
        // Every match of a notifying filter waits for the resume (a notify-off filter's never waits).
        let waiting = try count("SELECT count(*) FROM matcher_waiting_matches")
        let ofNotifying = try count(
            """
            SELECT count(*) FROM filter_matches m JOIN saved_filters f ON f.id = m.filter_id WHERE f.notify
            """)
        #expect(waiting == ofNotifying && waiting > 0)

        try state.resumeNotifications()
        try twin.memory.resumeNotifications()
        let resumed = try twin.runBoth(at: ScenarioWorld.day1.adding(microseconds: 60_000_000))
        #expect(resumed.postgres.counters.matchesWritten == 0)
        #expect(resumed.postgres.counters.notificationsWritten > 0)
        #expect(resumed.postgres.counters.notificationsWritten == resumed.memory.counters.notificationsWritten)
        #expect(try Rows.of(twin.connection).matches == Rows.of(twin.memory).matches)
        #expect(try Rows.of(twin.connection).notifications == Rows.of(twin.memory).notifications)
        #expect(try count("SELECT count(*) FROM matcher_waiting_matches") < waiting)
    }

    // MARK: - Status as the worker role

    @Test func statusReadsTheRealTablesWithTheWorkersGrants() throws {
        let twin = try FaultScenarioTests.world()
        let run = try RunMatching(MatchingRepositories(store: twin.postgres))
            .execute(.init(now: ScenarioWorld.day1, retentionDays: 30))
        let db = twin.connection
        try db.query(
            """
            INSERT INTO matcher_quarantine (kind, row_id, reason) VALUES ('profile', 1, 'test'), ('filter', 2, 'test'),
                                                                         ('filter', 3, 'test')
            """)
        try PostgresServiceState(connection: db).pauseNotifications(by: "oncall", reason: "APNs")
        // An interrupted run of the shard: no process holds its lock.
        let interrupted = try twin.postgres.start(
            NewRun(
                kind: .run, shard: .all, clock: ScenarioWorld.day2, maxPerFilter: 100, writesNotifications: true,
                coverage: nil, upTo: nil, upToTakenAt: nil, timeZone: "Asia/Tokyo", retentionDays: 30,
                parameters: "{}",
                candidates: 0))

        // A role of this test's own (roles are the whole cluster's), dropped with the database at the end.
        let role = "matcher_status_reader_\(twin.database.name.suffix(12))"
        try Self.applyWorkerRole(twin.database, role: role)
        defer { ChangeCaptureSecurityTests.dropDatabaseAndRole(twin.database, role) }
        let worker = try twin.database.connect()
        defer { worker.close() }
        try worker.execute("SET ROLE \(role)")
        let status = try PostgresStatusRepository(connection: worker).serviceStatus()

        let shard = try #require(status.shard(.all))
        #expect(shard.lastSuccess?.id == run.runId && shard.lastSuccess?.clock == ScenarioWorld.day1)
        #expect(shard.runsSince.map(\.id) == [interrupted.id] && shard.runsSince.first?.lockHeld == false)
        // Its last success (day 1) is months before the database's clock: lagging, though interrupted (session 33).
        #expect(status.state(of: shard) == .lagging)
        #expect(shard.progress.map { ChangeMark.Form($0.mark) } != nil && shard.progress?.timeZone == "Asia/Tokyo")
        let waitingRows = try db.query("SELECT count(*) FROM matcher_waiting_matches").rows[0].int64(0)
        #expect(Int64(status.digests.matches + status.digests.notNotifiable) == waitingRows)
        #expect(status.invalidFilters == run.counters.filtersInvalid && status.invalidFilters > 0)
        #expect(status.quarantinedProfiles == 1 && status.quarantinedFilters == 2 && status.quarantinedRows == 3)
        #expect(status.retention.rows == run.counters.matchesWritten && !status.retention.rowsEstimated)
        #expect(status.retention.oldestMatchedAt == ScenarioWorld.day1 && status.retention.retentionDays == 30)
        // The worker's role reads where the marks landed too (statistics and the table's options are public).
        #expect(status.retention.marks?.fillfactor == 90)
        #expect(status.notificationPause?.reason == "APNs")
        // The metrics' read leaves the oldest matched_at out.
        #expect(
            try PostgresStatusRepository(connection: worker).serviceStatus(retention: false).retention.oldestMatchedAt
                == nil)

        // While a process holds the shard's lock, the running run is running, not interrupted.
        let lock = try #require(try twin.postgres.tryLock(kind: .run, shard: .all))
        defer { lock.release() }
        let held = try PostgresStatusRepository(connection: worker).serviceStatus(retention: false)
        let heldShard = try #require(held.shard(.all))
        // (Its clock is the test's 2026-03-01, far behind the server's: lagging wins over running.)
        #expect(heldShard.runsSince.first?.lockHeld == true && held.state(of: heldShard) != .interrupted)
    }

    // MARK: - Metrics with data

    @Test func theMetricsFileCarriesLagQuarantineAndWaitingDigests() throws {
        let twin = try FaultScenarioTests.world()
        // A row no run reads.
        try twin.connection.query(
            "INSERT INTO matcher_quarantine (kind, row_id, reason) VALUES ('profile', 999999, 'test')")
        try PostgresServiceState(connection: twin.connection).pauseNotifications(by: "test", reason: "push outage")
        let metrics = FileManager.default.temporaryDirectory.appendingPathComponent("status-\(UUID().uuidString).prom")
        defer { try? FileManager.default.removeItem(at: metrics) }
        let run = try MatcherProcess.run(
            FaultScenarioTests.run + ["--metrics-file", metrics.path],
            database: twin.database.conninfo)
        try FaultScenarioTests.expectSuccess(run)
        let text = try String(contentsOf: metrics, encoding: .utf8)
        let values = Dictionary(
            text.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { line in
                line.split(separator: " ").count == 2
                    ? (String(line.split(separator: " ")[0]), Double(line.split(separator: " ")[1])) : nil
            }, uniquingKeysWith: { a, _ in a })
        let labels = "{kind=\"run\",shard=\"0/1\"}"
        let waiting = try twin.connection.query(
            """
            SELECT count(DISTINCT w.filter_id) FROM matcher_waiting_matches w JOIN saved_filters f ON f.id = w.filter_id
            JOIN profiles o ON o.id = f.owner_id AND o.status = 1
            WHERE f.notify AND f.deleted_at IS NULL AND NOT w.passed_over
            """
        ).rows[0].int64(0)
        #expect(waiting > 0)
        #expect(values["matcher_digests_waiting" + labels] == Double(waiting), "\(text)")
        #expect(values["matcher_quarantined_rows" + labels] == 1, "\(text)")
        // The run's clock is the test's 2026-03-01: the lag and the oldest waiting digest are measured from it.
        let lag = try #require(values["matcher_lag_seconds" + labels] ?? nil, "\(text)")
        let serverNow = try twin.connection.query("SELECT now()").rows[0].timestamp(0)
        let expected = Double(
            (serverNow.microsecondsSinceEpoch - ScenarioWorld.day1.microsecondsSinceEpoch) / 1_000_000)
        #expect(abs(lag - expected) < 120, "\(lag) vs \(expected)")
        let oldest = try #require(values["matcher_oldest_digest_waiting_seconds" + labels] ?? nil, "\(text)")
        #expect(abs(oldest - expected) < 120)
        // The waiting digests of filters notified on the run's day are due a day later: a digest first due then.
        let overdue = try #require(values["matcher_digest_overdue_seconds" + labels] ?? nil, "\(text)")
        #expect(overdue >= 0 && overdue <= oldest)
        // What the status reads now (found by review in session 32: a file that always said 0 passed): the oldest
        // digest due, measured from the server's clock, within the seconds between the two reads.
        let dueSince = try #require(
            try PostgresStatusRepository(connection: twin.connection).serviceStatus(retention: false).digests
                .oldestDueSince)
        let expectedOverdue = Double((serverNow.microsecondsSinceEpoch - dueSince.microsecondsSinceEpoch) / 1_000_000)
        #expect(overdue > 0 && abs(overdue - expectedOverdue) < 120, "\(overdue) vs \(expectedOverdue)")
        // Where the marks of waiting matches landed, as the server's statistics stood after the run.
        let marks = try #require(values["matcher_filter_matches_marks_total" + labels] ?? nil, "\(text)")
        let inPlace = try #require(values["matcher_filter_matches_marks_in_place_total" + labels] ?? nil, "\(text)")
        #expect(marks >= 0 && inPlace <= marks)

        // A shard's run reports its own filters' waiting digests (review of session 31), not the service's.
        let shardMetrics = FileManager.default.temporaryDirectory.appendingPathComponent(
            "status-\(UUID().uuidString).prom")
        defer { try? FileManager.default.removeItem(at: shardMetrics) }
        let shardRun = try MatcherProcess.run(
            FaultScenarioTests.run + ["--shard", "1/2", "--metrics-file", shardMetrics.path],
            database: twin.database.conninfo)
        try FaultScenarioTests.expectSuccess(shardRun)
        let shardText = try String(contentsOf: shardMetrics, encoding: .utf8)
        let ofShard = try twin.connection.query(
            """
            SELECT count(DISTINCT w.filter_id) FROM matcher_waiting_matches w JOIN saved_filters f ON f.id = w.filter_id
            JOIN profiles o ON o.id = f.owner_id AND o.status = 1
            WHERE f.notify AND f.deleted_at IS NULL AND NOT w.passed_over AND f.owner_id % 2 = 1
            """
        ).rows[0].int64(0)
        #expect(ofShard > 0 && ofShard < waiting)
        #expect(
            shardText.contains("matcher_digests_waiting{kind=\"run\",shard=\"1/2\"} \(Double(ofShard))\n"),
            "\(shardText)")
    }

    // MARK: - 10. Time going backwards (a restore): refused, reset, then the next run is exact

    @Test func progressAheadAfterARestoreIsRefusedAndAResetMakesTheNextRunExact() throws {
        let day1 = FaultScenarioTests.run
        let day2 = ["run", "--now", ScenarioWorld.day2.iso8601, "--unit-filters", "5"]
        var changes = ScenarioWorld(seed: 23)
        let edited = (0..<40).map { changes.profile(Int64(1 + $0 * 7), at: ScenarioWorld.day2) }

        let reference = try FaultScenarioTests.world()
        try FaultScenarioTests.expectSuccess(try MatcherProcess.run(day1, database: reference.database.conninfo))
        try reference.writer.upsertProfiles(edited, updatedAt: ScenarioWorld.day2)
        try FaultScenarioTests.expectSuccess(try MatcherProcess.run(day2, database: reference.database.conninfo))

        let restored = try FaultScenarioTests.world()
        try FaultScenarioTests.expectSuccess(try MatcherProcess.run(day1, database: restored.database.conninfo))
        let dataCurrentAt = try restored.connection.query("SELECT clock_timestamp()").rows[0].timestamp(0)
        // The restore: the recorded snapshot is a million transactions ahead of this server.
        try Self.pushProgressAhead(restored.connection)
        try restored.writer.upsertProfiles(edited, updatedAt: ScenarioWorld.day2)

        let refused = try MatcherProcess.run(day2, database: restored.database.conninfo)
        OperationsTests.expectOneLine(refused, status: 78, containing: "matcher progress reset --shard 0/1 --to")
        #expect(try FaultScenarioTests.statuses(restored) == ["succeeded"])
        // What an operator asks first says it, though the refused run wrote no run row.
        let told = try MatcherProcess.run(["status", "--format", "json"], database: restored.database.conninfo)
        #expect(told.status == 0 && told.stdout.contains("\"state\": \"progress_ahead\""), "\(told.stdout)")
        let toldText = try MatcherProcess.run(["status"], database: restored.database.conninfo)
        #expect(
            toldText.stdout.contains("snapshot ahead of the database: matcher progress reset"), "\(toldText.stdout)")

        let noZone = try MatcherProcess.run(
            ["progress", "reset", "--shard", "0/1", "--to", "2026-03-01T03:00:00"],
            database: restored.database.conninfo)
        #expect(noZone.status == 64, "\(noZone.stderr)")
        let reset = try MatcherProcess.run(
            ["progress", "reset", "--shard", "0/1", "--to", dataCurrentAt.iso8601],
            database: restored.database.conninfo)
        #expect(reset.status == 0 && reset.stdout.contains("reset to \(dataCurrentAt.iso8601)"), "\(reset.stderr)")
        let status = try MatcherProcess.run(["status", "--format", "json"], database: restored.database.conninfo)
        #expect(
            status.status == 0 && status.stdout.contains("\"reset_to\": \"\(dataCurrentAt.iso8601)\""),
            "\(status.stdout)")

        try FaultScenarioTests.expectSuccess(try MatcherProcess.run(day2, database: restored.database.conninfo))
        #expect(try Rows.of(restored.connection).matches == Rows.of(reference.connection).matches)
        #expect(try Rows.of(restored.connection).notifications == Rows.of(reference.connection).notifications)
        // Progress is a snapshot of this server again.
        #expect(
            try restored.connection.query("SELECT count(*) FROM matcher_shard_progress WHERE snapshot IS NOT NULL")
                .rows[0].int64(0) == 1)
    }

    /// A restore that brings a run interrupted mid-way: its snapshot is ahead of this server too, and it is refused
    /// before it is completed (exit 78), not completed first. Completed, it read with the old server's snapshot
    /// (changes another shard's reset had settled counted as seen) and recorded that snapshot as the shard's
    /// progress. The shard's reset abandons it, and the next run is exact.
    @Test func aRestoredInterruptedRunIsRefusedBeforeItIsCompleted() throws {
        let day2 = ["run", "--now", ScenarioWorld.day2.iso8601, "--unit-filters", "5"]
        var changes = ScenarioWorld(seed: 31)
        let edited = (0..<40).map { changes.profile(Int64(1 + $0 * 7), at: ScenarioWorld.day2) }
        let reference = try FaultScenarioTests.world()
        try FaultScenarioTests.expectSuccess(
            try MatcherProcess.run(FaultScenarioTests.run, database: reference.database.conninfo))
        try reference.writer.upsertProfiles(edited, updatedAt: ScenarioWorld.day2)
        try FaultScenarioTests.expectSuccess(try MatcherProcess.run(day2, database: reference.database.conninfo))

        let restored = try FaultScenarioTests.world()
        try FaultScenarioTests.expectSuccess(
            try MatcherProcess.run(FaultScenarioTests.run, database: restored.database.conninfo))
        let dataCurrentAt = try restored.connection.query("SELECT clock_timestamp()").rows[0].timestamp(0)
        try restored.writer.upsertProfiles(edited, updatedAt: ScenarioWorld.day2)
        let killed = try MatcherProcess.run(
            day2, database: restored.database.conninfo, environment: ["MATCHER_FAULT": "unit-after-commit:2"])
        #expect(
            killed.signalled && killed.status == SIGKILL,
            "\(killed.status) \(killed.stdout) \(killed.stderr.suffix(600))")
        try FaultScenarioTests.waitUntilNoWorkerSession(restored)
        // The restore: the recorded snapshots, the interrupted run's among them, are far ahead of this server.
        try Self.pushProgressAhead(restored.connection)
        try restored.connection.execute(
            """
            UPDATE matcher_runs SET snapshot = format('%1$s:%1$s:',
                pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000000)::pg_snapshot
            WHERE status = 'running'
            """)
        let matchesBefore = try Rows.of(restored.connection).matches

        let refused = try MatcherProcess.run(day2, database: restored.database.conninfo)
        OperationsTests.expectOneLine(refused, status: 78, containing: "matcher progress reset --shard 0/1 --to")
        // Not completed: recorded failed with the refusal (the claim made it running; session 37).
        #expect(try FaultScenarioTests.statuses(restored) == ["succeeded", "failed"], "not completed")
        let error = try restored.connection.query("SELECT error FROM matcher_runs WHERE status = 'failed'").rows
            .map { try $0.optionalString(0) ?? "" }
        #expect(error.count == 1 && error[0].contains("ahead"), "\(error)")
        #expect(try Rows.of(restored.connection).matches == matchesBefore)

        let reset = try MatcherProcess.run(
            ["progress", "reset", "--shard", "0/1", "--to", dataCurrentAt.iso8601],
            database: restored.database.conninfo)
        #expect(reset.status == 0, "\(reset.stderr)")
        #expect(try FaultScenarioTests.statuses(restored) == ["succeeded", "abandoned"])
        try FaultScenarioTests.expectSuccess(try MatcherProcess.run(day2, database: restored.database.conninfo))
        #expect(try Rows.of(restored.connection).matches == Rows.of(reference.connection).matches)
    }

    /// A dump restored into a new cluster: its change rows keep the old cluster's transaction ids, ahead of every
    /// transaction here (and of every snapshot a run takes for months). The reset settles them, so that the
    /// runs after it take only real changes; before, every run took their profiles again.
    @Test func aDumpRestoredIntoANewClusterTakesOnlyRealChangesAfterTheReset() throws {
        let day2 = ["run", "--now", ScenarioWorld.day2.iso8601, "--unit-filters", "5"]
        let day3 = ["run", "--now", ScenarioWorld.day1.adding(days: 2).iso8601, "--unit-filters", "5"]
        var changes = ScenarioWorld(seed: 29)
        let edited = (0..<20).map { changes.profile(Int64(1 + $0 * 11), at: ScenarioWorld.day2) }
        let restored = try FaultScenarioTests.world()
        try FaultScenarioTests.expectSuccess(
            try MatcherProcess.run(FaultScenarioTests.run, database: restored.database.conninfo))
        let dataCurrentAt = try restored.connection.query("SELECT clock_timestamp()").rows[0].timestamp(0)
        try Self.pushProgressAhead(restored.connection)
        let moved = try restored.connection.query(
            """
            UPDATE matcher_profile_changes
            SET changed_by = (changed_by::text::bigint + 1000000)::text::xid8 WHERE changed_by IS NOT NULL
            """
        ).affectedRows
        #expect(moved >= 300)
        try restored.writer.upsertProfiles(edited, updatedAt: ScenarioWorld.day2)
        OperationsTests.expectOneLine(
            try MatcherProcess.run(day2, database: restored.database.conninfo), status: 78,
            containing: "matcher progress reset --shard 0/1 --to")

        let reset = try MatcherProcess.run(
            ["progress", "reset", "--shard", "0/1", "--to", dataCurrentAt.iso8601],
            database: restored.database.conninfo)
        #expect(reset.status == 0, "\(reset.stderr)")
        // The 20 edited profiles' rows were written here; the others came with the dump.
        #expect(reset.stdout.contains("Changes from another server's transactions settled"), "\(reset.stdout)")
        #expect(reset.stdout.contains("\(moved - 20)"), "\(reset.stdout)")
        func lastCandidates() throws -> Int32 {
            try restored.connection.query("SELECT candidates FROM matcher_runs ORDER BY id DESC LIMIT 1").rows[0]
                .int32(0)
        }
        try FaultScenarioTests.expectSuccess(try MatcherProcess.run(day2, database: restored.database.conninfo))
        #expect(try lastCandidates() == 20)
        try FaultScenarioTests.expectSuccess(try MatcherProcess.run(day3, database: restored.database.conninfo))
        #expect(try lastCandidates() == 0)
    }

    /// A dump restored into a server whose transactions are behind the dump's change rows but not behind the
    /// runs' progress: no run refuses, and every run takes those profiles again until the server's transactions
    /// pass them. Each run says so (a warning naming the reset), and the reset settles them.
    @Test func changeRowsAheadOfTheServerAreNamedByEveryRunUntilSettled() throws {
        let day2 = ["run", "--now", ScenarioWorld.day2.iso8601, "--unit-filters", "5"]
        let world = try FaultScenarioTests.world()
        try FaultScenarioTests.expectSuccess(
            try MatcherProcess.run(FaultScenarioTests.run, database: world.database.conninfo))
        let dataCurrentAt = try world.connection.query("SELECT clock_timestamp()").rows[0].timestamp(0)
        let moved = try world.connection.query(
            """
            UPDATE matcher_profile_changes SET changed_by = (changed_by::text::bigint + 1000000)::text::xid8
            WHERE profile_id <= 30 AND changed_by IS NOT NULL
            """
        ).affectedRows
        #expect(moved == 30)
        let warned = try MatcherProcess.run(day2, database: world.database.conninfo)
        #expect(warned.status == 0, "\(warned.stderr)")
        #expect(warned.stderr.contains("from another server's transactions"), "\(warned.stderr)")
        #expect(warned.stderr.contains("changes=30"), "\(warned.stderr)")
        #expect(warned.stderr.contains("matcher progress reset"), "\(warned.stderr)")

        let reset = try MatcherProcess.run(
            ["progress", "reset", "--shard", "0/1", "--to", dataCurrentAt.iso8601], database: world.database.conninfo)
        #expect(reset.status == 0, "\(reset.stderr)")
        let quiet = try MatcherProcess.run(day2, database: world.database.conninfo)
        #expect(quiet.status == 0, "\(quiet.stderr)")
        #expect(!quiet.stderr.contains("from another server's transactions"), "\(quiet.stderr)")
    }

    /// A killed backfill is resumed only by the same backfill, and only while it is the shard's latest: once a
    /// backfill of another selection starts, nothing could complete it. It is abandoned then (the log says so),
    /// where it stayed `running` for ever, never swept, and named in `matcher status`.
    @Test func aKilledBackfillOfAnotherSelectionIsAbandonedWhenTheNextStarts() throws {
        let world = try FaultScenarioTests.world()
        let killed = try MatcherProcess.run(
            ["backfill", "--now", ScenarioWorld.day1.iso8601, "--unit-filters", "5", "--filter"]
                + (1001...1020).map(String.init),
            database: world.database.conninfo, environment: ["MATCHER_FAULT": "unit-after-commit:1"])
        #expect(
            killed.signalled && killed.status == SIGKILL,
            "\(killed.status) \(killed.stdout) \(killed.stderr.suffix(600))")
        try FaultScenarioTests.waitUntilNoWorkerSession(world)
        #expect(try FaultScenarioTests.statuses(world) == ["running"])

        let other = try MatcherProcess.run(
            ["backfill", "--now", ScenarioWorld.day1.iso8601, "--filter", "1021", "1022"],
            database: world.database.conninfo
        )
        #expect(other.status == 0, "\(other.stderr)")
        #expect(other.stderr.contains("interrupted backfill of another selection abandoned"), "\(other.stderr)")
        #expect(try FaultScenarioTests.statuses(world) == ["abandoned", "succeeded"])
    }

    // MARK: - 11. A run that cannot be completed: abandoned, then the next run is exact

    @Test func aRunThatCannotBeCompletedIsAbandonedAndTheNextRunIsExact() throws {
        let clean = try FaultScenarioTests.world()
        try FaultScenarioTests.expectSuccess(
            try MatcherProcess.run(FaultScenarioTests.run, database: clean.database.conninfo))
        let reference = try Rows.of(clean.connection)

        let stuck = try FaultScenarioTests.world()
        try Self.refuseFutureMatches(stuck.connection)
        // A mistyped --now (2036 for 2026): the worker refuses it (exit 64, nothing written)...
        let mistyped = ["run", "--now", "2036-03-01T03:00:00Z", "--unit-filters", "5"]
        let refused = try MatcherProcess.run(mistyped, database: stuck.database.conninfo)
        OperationsTests.expectOneLine(refused, status: 64, containing: "after the database's clock")
        #expect(refused.stderr.contains("--allow-future-now"), "\(refused.stderr)")
        #expect(try FaultScenarioTests.statuses(stuck).isEmpty, "no run row")
        let backfill = try MatcherProcess.run(
            ["backfill", "--now", "2036-03-01T03:00:00Z"], database: stuck.database.conninfo)
        OperationsTests.expectOneLine(backfill, status: 64, containing: "after the database's clock")
        let dryRun = try MatcherProcess.run(mistyped + ["--dry-run"], database: stuck.database.conninfo)
        #expect(dryRun.status == 0, "a dry run writes nothing and may look ahead: \(dryRun.stderr)")
        // ...unless told it is on purpose; then the app's guard refuses its matches, and every attempt to
        // complete the run keeps the run's clock, so the retry fails the same way.
        let first = try MatcherProcess.run(mistyped + ["--allow-future-now"], database: stuck.database.conninfo)
        OperationsTests.expectOneLine(first, status: 1, containing: "matched_at in the future")
        try FaultScenarioTests.waitUntilNoWorkerSession(stuck)
        let retry = try MatcherProcess.run(FaultScenarioTests.run, database: stuck.database.conninfo)
        OperationsTests.expectOneLine(retry, status: 1, containing: "matched_at in the future")
        #expect(try FaultScenarioTests.statuses(stuck) == ["failed"])
        try FaultScenarioTests.waitUntilNoWorkerSession(stuck)

        let status = try MatcherProcess.run(["status"], database: stuck.database.conninfo)
        #expect(status.status == 0 && status.stdout.contains("failing"), "\(status.stdout)")
        let both = try MatcherProcess.run(
            ["runs", "abandon", "--run", "1", "--shard", "0/1"], database: stuck.database.conninfo)
        #expect(both.status == 64, "\(both.stderr)")
        let abandon = try MatcherProcess.run(["runs", "abandon", "--shard", "0/1"], database: stuck.database.conninfo)
        #expect(
            abandon.status == 0 && abandon.stdout.contains("abandoned: it will never be resumed"), "\(abandon.stderr)")
        let again = try MatcherProcess.run(["runs", "abandon", "--shard", "0/1"], database: stuck.database.conninfo)
        #expect(again.status == 0 && again.stdout.contains("nothing to abandon"), "\(again.stdout)")
        #expect(try FaultScenarioTests.statuses(stuck) == ["abandoned"])

        try FaultScenarioTests.expectSuccess(
            try MatcherProcess.run(FaultScenarioTests.run, database: stuck.database.conninfo))
        #expect(try FaultScenarioTests.statuses(stuck) == ["abandoned", "succeeded"])
        #expect(try Rows.of(stuck.connection).matches == reference.matches)
        #expect(try Rows.of(stuck.connection).notifications == reference.notifications)
    }

    // MARK: - Helpers

    /// What a restore to an older server does to recorded progress: its snapshot is ahead of every transaction.
    static func pushProgressAhead(_ connection: PostgresConnection) throws {
        try connection.execute(
            """
            UPDATE matcher_shard_progress SET snapshot = format('%1$s:%1$s:',
                pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000000)::pg_snapshot
            """)
    }

    /// A guard the app might have: no match recorded in the future (by more than a day).
    static func refuseFutureMatches(_ connection: PostgresConnection) throws {
        try connection.execute(
            """
            CREATE FUNCTION test_refuse_future_matches() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.matched_at > now() + interval '1 day' THEN
                    RAISE EXCEPTION 'matched_at in the future: %', NEW.matched_at;
                END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER test_refuse_future_matches BEFORE INSERT ON filter_matches
                FOR EACH ROW EXECUTE FUNCTION test_refuse_future_matches();
            """)
    }

    /// Applies `sql/roles/worker_role.sql` for `role` with psql, as deploy/README.md says to.
    static func applyWorkerRole(_ database: TestDatabase, role: String) throws {
        let psql =
            ["/usr/bin/psql"]
            + ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .sorted().reversed().map { "/usr/lib/postgresql/\($0)/bin/psql" }
        let executable = try #require(psql.first { FileManager.default.isExecutableFile(atPath: $0) }, "psql not found")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "-X", "-q", "-v", "worker_role=\(role)", "-f",
            MigratedDatabase.sqlDirectory.appendingPathComponent("roles/worker_role.sql").path,
            database.conninfo,
        ]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let stderr = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(String(decoding: stderr, as: UTF8.self))")
    }
}
