import Chronology
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Synchronization
import Testing

@Suite(.serialized) struct RunIntegrationTests {
    @Test func twoDaysWithChangesGiveExactlyTheExpectedRows() throws {
        let twin = try Twin()
        var world = ScenarioWorld(seed: 42)
        let day1 = world.day1(profiles: 400, filters: 80)
        try twin.saveProfiles(day1.profiles, at: ScenarioWorld.day1)
        try twin.saveFilters(day1.filters)
        try twin.block(day1.blocks)

        let first = try twin.runBoth(at: ScenarioWorld.day1)
        #expect(first.postgres.counters == first.memory.counters)
        #expect(first.postgres.counters.candidates == 400)
        #expect(first.postgres.counters.matchesWritten > 500)
        #expect(first.postgres.counters.notificationsWritten > 20)
        #expect(first.postgres.counters.filtersInvalid > 0)
        var pg = try Rows.of(twin.connection)
        var mem = Rows.of(twin.memory)
        #expect(pg.matches == mem.matches)
        #expect(pg.notifications == mem.notifications)

        // Day 2: updates, inserts, hidden and deleted profiles, edited and deleted filters, new blocks.
        let updated = (1...40).map { world.profile(Int64($0 * 9), at: ScenarioWorld.day2) }
        let inserted = (401...420).map { world.profile(Int64($0), at: ScenarioWorld.day2) }
        let hidden = [3, 5, 8, 13, 21].map { Int64($0) }
        let deleted = [34, 55, 89].map { Int64($0) }
        let byId = Dictionary((day1.profiles + updated).map { ($0.id, $0) }, uniquingKeysWith: { $1 })
        let statusChanges = hidden.map { byId[$0]!.with(status: 2) } + deleted.map { byId[$0]!.with(status: 4) }
        try twin.saveProfiles(updated + inserted + statusChanges, at: ScenarioWorld.day2)
        let edited = day1.filters.prefix(3).map { world.filter($0.id, owner: $0.ownerId, at: ScenarioWorld.day2) }
        let removed = day1.filters.dropFirst(3).prefix(2).map { $0.with(deletedAt: ScenarioWorld.day2) }
        try twin.saveFilters(edited + removed)
        try twin.block((0..<10).map { i in Block(blockerId: day1.filters[10 + i].ownerId, blockedId: Int64(401 + i)) })

        let second = try twin.runBoth(at: ScenarioWorld.day2)
        #expect(second.postgres.counters == second.memory.counters)
        // Candidates: profiles whose matching state changed (a re-generated profile may differ only in its
        // login; a status may be set to what it was), and the inserted ones.
        let day1ById = Dictionary(day1.profiles.map { ($0.id, $0) }, uniquingKeysWith: { $1 })
        let day2ById = Dictionary((updated + statusChanges).map { ($0.id, $0) }, uniquingKeysWith: { $1 })
        let reallyChanged = day2ById.values.filter { p in day1ById[p.id].map { p.isMatchingChange(from: $0) } ?? true }
        #expect(second.postgres.counters.candidates == reallyChanged.count + 20)
        pg = try Rows.of(twin.connection)
        mem = Rows.of(twin.memory)
        #expect(pg.matches == mem.matches)
        #expect(pg.notifications == mem.notifications)

        // Spot checks that do not lean on the twin.
        let removedIds = removed.map(\.id)
        let day2Matches = try twin.connection.query(
            "SELECT filter_id, profile_id FROM filter_matches WHERE matched_at = $1", [.timestamptz(ScenarioWorld.day2)]
        ).rows
        #expect(!day2Matches.isEmpty)
        for row in day2Matches {
            #expect(!removedIds.contains(try row.int64(0)))
            #expect(!(hidden + deleted).contains(try row.int64(1)))
        }
        let day2Digests = try twin.connection.query(
            "SELECT profile_ids FROM notifications WHERE created_at = $1", [.timestamptz(ScenarioWorld.day2)]
        ).rows
        for row in day2Digests {
            #expect(Set(try row.int64Array(0)).isDisjoint(with: hidden + deleted))
        }

        // A rerun adds nothing.
        let rerun = try RunMatching(MatchingRepositories(store: twin.postgres))
            .execute(.init(now: ScenarioWorld.day2))
        #expect(rerun.counters.matchesWritten == 0 && rerun.counters.notificationsWritten == 0)
        #expect(try Rows.of(twin.connection).matches == pg.matches)
        #expect(try Rows.of(twin.connection).notifications == pg.notifications)

        // Day 3: filters with a two-day rhythm get their digest of day 2's waiting matches.
        let third = try twin.runBoth(at: ScenarioWorld.day3)
        #expect(third.postgres.counters == third.memory.counters)
        #expect(try Rows.of(twin.connection).notifications == Rows.of(twin.memory).notifications)

        // The runs table has one row per run with its summary, and invalid filters are queryable.
        let runs = try twin.connection.query(
            """
            SELECT status, candidates, matches_written, phase_seconds ? 'evaluate' FROM matcher_runs ORDER BY id
            """
        ).rows
        try #require(runs.count == 4)
        #expect(try runs.allSatisfy { try $0.string(0) == "succeeded" && $0.bool(3) })
        #expect(try runs[0].int32(2) == Int32(first.postgres.counters.matchesWritten))
        let invalid = try twin.connection.query("SELECT item_key, reason FROM matcher_invalid_filters").rows
        #expect(invalid.count == third.postgres.counters.filtersInvalid)  // day 2 fixed one of day 1's
        #expect(try invalid.allSatisfy { try $0.string(1) == "age: min 40 is greater than max 30" })
    }

    @Test func lateCommitIsPickedUpByTheNextRunWithoutWaiting() throws {
        let twin = try Twin()
        try twin.saveProfiles([ScenarioWorldProfiles.man(1)], at: ScenarioWorld.day1)
        try twin.saveFilters([
            SavedFilter(
                id: 10, ownerId: 1, name: nil, conditionsJSON: #"{"gender": {"anyOf": [2]}}"#,
                createdAt: ScenarioWorld.day1, updatedAt: ScenarioWorld.day1)
        ])
        let run = RunMatching(MatchingRepositories(store: twin.postgres))
        _ = try run.execute(.init(now: ScenarioWorld.day1))

        // A transaction that began before the next run inserts a matching profile and commits after it.
        let app = try twin.database.connect()
        try app.execute("BEGIN")
        try AppTableWriter(connection: app).insertProfiles(
            [ScenarioWorldProfiles.woman(2)], updatedAt: ScenarioWorld.day1)
        let started = Date()
        let during = try run.execute(.init(now: ScenarioWorld.day2))
        #expect(Date().timeIntervalSince(started) < 10)  // it did not wait for the open transaction
        #expect(during.counters.matchesWritten == 0)
        try app.execute("COMMIT")

        let after = try run.execute(.init(now: ScenarioWorld.day3))
        #expect(after.counters.candidates == 1)
        #expect(after.counters.matchesWritten == 1)
        #expect(try twin.postgres.matches(filterId: 10).map(\.profileId) == [2])
    }

    @Test func fourShardsWriteExactlyWhatOneRunWrites() throws {
        let (whole, sharded) = try Twin.pair(seed: 7)
        func run(_ twin: Twin, _ shard: Shard) throws -> RunSummary {
            try RunMatching(MatchingRepositories(store: twin.postgres))
                .execute(.init(now: ScenarioWorld.day1, shard: shard))
        }
        let reference = try run(whole, .all)
        #expect(reference.counters.matchesWritten > 100 && reference.counters.notificationsWritten > 10)
        for k in 0..<4 { _ = try run(sharded, try Shard(index: k, count: 4)) }
        #expect(try Rows.of(sharded.connection).matches == Rows.of(whole.connection).matches)
        #expect(try Rows.of(sharded.connection).notifications == Rows.of(whole.connection).notifications)
        let progress = try sharded.connection.query("SELECT count(*) FROM matcher_shard_progress WHERE shard_count = 4")
            .rows
        #expect(try progress[0].int64(0) == 4)
    }

    /// Review of session 34: a shard's progress reset far back re-reads changes whose pairs the retention has
    /// forgotten since, and they came again in digests (248 profiles in the review's world). Said by a warning when
    /// the time is before the retention; a reset within it says nothing more.
    @Test func aProgressResetBeforeTheRetentionWarns() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        _ = try ScenarioWorld.ownerAndTwoWomen(connection)
        let run = try MatcherProcess.run(["run", "--retention-days", "7"], database: database.conninfo)
        #expect(run.status == 0, "\(run.stderr)")
        let iso = ISO8601DateFormatter()
        let near = try MatcherProcess.run(
            ["progress", "reset", "--shard", "0/1", "--to", iso.string(from: Date().addingTimeInterval(-86_400))],
            database: database.conninfo)
        #expect(near.status == 0 && !near.stderr.contains("before the retention"), "\(near.stderr)")
        let far = try MatcherProcess.run(
            ["progress", "reset", "--shard", "0/1", "--to", iso.string(from: Date().addingTimeInterval(-30 * 86_400))],
            database: database.conninfo)
        #expect(far.status == 0, "\(far.stderr)")
        #expect(far.stderr.contains("progress reset before the retention: changes older than 7 days"), "\(far.stderr)")
    }

    @Test func concurrentStartOfTheSameShardExits75AndWritesNothing() throws {
        let twin = try Twin()
        var world = ScenarioWorld(seed: 3)
        let day1 = world.day1(profiles: 50, filters: 10)
        try twin.load(day1)
        let held = try #require(try twin.postgres.tryLock(kind: .run, shard: .all))
        let refused = try MatcherProcess.run(
            ["run", "--now", "2026-03-01T03:00:00Z"], database: twin.database.conninfo)
        #expect(refused.status == 75)
        #expect(
            refused.stderr.contains("holds the lock") && refused.stderr.contains("the next run goes on"),
            "\(refused.stderr)")
        #expect(try twin.connection.query("SELECT count(*) FROM matcher_runs").rows[0].int64(0) == 0)
        #expect(try twin.connection.query("SELECT count(*) FROM filter_matches").rows[0].int64(0) == 0)
        // An operator's command refused by the same lock is told to repeat itself, not to wait for a run.
        let reset = try MatcherProcess.run(
            ["progress", "reset", "--shard", "0/1", "--to", "2026-03-01T00:00:00Z"], database: twin.database.conninfo)
        #expect(reset.status == 75)
        #expect(reset.stderr.contains("run `matcher progress reset` again"), "\(reset.stderr)")
        // A shard of another layout reads the same window for the owners it shares with the running one: held
        // back too, naming the running shard (review of session 35: both filled their filters past the other's
        // pairs, up to twice the cap).
        let other = try MatcherProcess.run(
            ["run", "--now", "2026-03-01T03:00:00Z", "--shard", "1/2"],
            database: twin.database.conninfo)
        #expect(other.status == 75, "\(other.stderr)")
        #expect(
            other.stderr.contains("a run of shard 0/1 holds its lock, and its filters overlap shard 1/2's"),
            "\(other.stderr)"
        )
        held.release()
        let after = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: twin.database.conninfo)
        #expect(after.status == 0, "\(after.stderr)")
        // Shards of one layout are not held back by each other.
        let half = try #require(try twin.postgres.tryLock(kind: .run, shard: Shard(index: 0, count: 2)))
        let sibling = try MatcherProcess.run(
            ["run", "--now", "2026-03-02T03:00:00Z", "--shard", "1/2"], database: twin.database.conninfo)
        #expect(sibling.status == 0, "\(sibling.stderr)")
        half.release()
    }

    /// The start's decision is one at a time: while another start holds the decision (its transaction-level lock)
    /// a start waits, and then sees the lock that one took. Without the wait it would have taken its own lock
    /// beside an overlapping one.
    @Test func aStartWaitsForAnotherStartsDecisionAndSeesItsLock() throws {
        let twin = try Twin()
        let other = try twin.database.connect()
        defer { other.close() }
        let (runKey, _) = PostgresMatchingStore.lockKeys(kind: .run, shard: .all)
        let quarter = try Shard(index: 1, count: 4)
        let (_, quarterKey) = PostgresMatchingStore.lockKeys(kind: .run, shard: quarter)
        try other.execute("BEGIN")
        try other.query(
            "SELECT pg_advisory_xact_lock($1, 0)", [.int4(runKey + PostgresMatchingStore.admissionOffset)])
        let outcome = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let attempt = Result { try twin.postgres.tryLockAlone(kind: .run, shard: .all) }
            let said: String
            switch attempt {
            case .success(.acquired(let lock)):
                lock.release()
                said = "acquired"
            case .success(.held): said = "held"
            case .success(.overlapping(let shards)): said = "overlapping \(shards)"
            case .failure(let error): said = "\(error)"
            }
            outcome.withLock { $0 = said }
            done.signal()
        }
        Thread.sleep(forTimeInterval: 0.5)
        #expect(outcome.withLock { $0 } == nil, "the start did not wait for the other's decision")
        try other.query("SELECT pg_advisory_lock($1, $2)", [.int4(runKey), .int4(quarterKey)])
        try other.execute("COMMIT")
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(outcome.withLock { $0 } == "overlapping [1/4]")
        try other.query("SELECT pg_advisory_unlock_all()")
    }

    /// Runs of layouts that overlap, started together: each start reads the locks held and takes its own with no
    /// other start between, so the ones that go share no owner (exactly one of the unsharded run and its shards,
    /// or the shards of one layout together), whatever the order.
    @Test func ofOverlappingLayoutsStartedTogetherOnlyDisjointShardsGo() throws {
        let twin = try Twin()
        let halves = try (0..<2).map { try Shard(index: $0, count: 2) }
        let quarters = try (0..<4).map { try Shard(index: $0, count: 4) }
        let shards = [Shard.all] + halves + quarters
        for round in 0..<5 {
            let attempts = Mutex<[(Shard, (any RunLock)?)]>([])
            DispatchQueue.concurrentPerform(iterations: shards.count) { i in
                let shard = shards[(i + round) % shards.count]
                let lock: (any RunLock)?
                if case .acquired(let held) = try? twin.postgres.tryLockAlone(kind: .run, shard: shard) {
                    lock = held
                } else {
                    lock = nil
                }
                attempts.withLock { $0.append((shard, lock)) }
            }
            let all = attempts.withLock { $0 }
            let going = all.filter { $0.1 != nil }.map(\.0)
            #expect(!going.isEmpty, "round \(round)")
            for (i, a) in going.enumerated() {
                for b in going[(i + 1)...] {
                    #expect(!a.intersects(b), "round \(round): \(a) and \(b) both went")
                }
            }
            for (_, lock) in all { lock?.release() }
        }
    }

    /// `matcher run` without `--now`, as the timer starts it (cli.md: the database's clock when the run starts):
    /// the run's clock, every `matched_at` and every `notifications.created_at` are one instant, between the
    /// server's `now()` before the run and after it.
    @Test func aRunWithoutNowTakesTheDatabasesClockForEverythingItWrites() throws {
        let twin = try FaultScenarioTests.world()
        let before = try twin.connection.query("SELECT now()").rows[0].timestamp(0)
        let outcome = try MatcherProcess.run(["run"], database: twin.database.conninfo)
        let after = try twin.connection.query("SELECT now()").rows[0].timestamp(0)
        #expect(!outcome.signalled && outcome.status == 0, "\(outcome.stderr)")
        let row = try twin.connection.query(
            """
            SELECT (SELECT count(DISTINCT clock) FROM matcher_runs), (SELECT min(clock) FROM matcher_runs),
                   (SELECT count(DISTINCT matched_at) FROM filter_matches), (SELECT min(matched_at) FROM filter_matches),
                   (SELECT count(DISTINCT created_at) FROM notifications), (SELECT min(created_at) FROM notifications),
                   (SELECT count(*) FROM filter_matches), (SELECT count(*) FROM notifications)
            """
        ).rows[0]
        #expect(try row.int64(6) > 0 && row.int64(7) > 0, "the run wrote matches and digests")
        #expect(try row.int64(0) == 1 && row.int64(2) == 1 && row.int64(4) == 1, "one clock for everything")
        let clock = try row.timestamp(1)
        #expect(try row.timestamp(3) == clock && row.timestamp(5) == clock)
        #expect(before <= clock && clock <= after, "\(before) <= \(clock) <= \(after)")
    }

    /// The command line's defaults (cli.md), as a timer's `matcher run` with no flags applies them: at most 100 new
    /// pairs a filter, and a new service keeps a recorded pair 180 days (one recorded 181 days and an hour before
    /// the clock is forgotten, one recorded 179 days before is kept).
    @Test func theCommandLinesDefaultsAreAHundredPairsAFilterAndHundredEightyDays() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        let writer = AppTableWriter(connection: connection)
        try writer.upsertProfiles(
            [World.profile(1, gender: 1)] + (10..<160).map { World.profile(Int64($0)) }, updatedAt: ScenarioWorld.day1)
        try writer.upsertFilters([World.filter(100, owner: 1, #"{"residence": {"anyOf": [13]}}"#)])
        let clock = ScenarioWorld.day1
        for (profile, age) in [(Int64(900), Int64(181 * 24 + 1)), (901, 179 * 24)] {
            try connection.query(
                "INSERT INTO filter_matches (filter_id, profile_id, matched_at, silent) VALUES (100, $1, $2, true)",
                [.int8(profile), .timestamptz(clock.adding(microseconds: -age * 3_600_000_000))])
        }
        let outcome = try MatcherProcess.run(["run", "--now", clock.iso8601], database: database.conninfo)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let row = try connection.query(
            """
            SELECT (SELECT count(*) FROM filter_matches WHERE filter_id = 100 AND profile_id < 900),
                   (SELECT array_agg(profile_id ORDER BY profile_id) FROM filter_matches WHERE profile_id >= 900),
                   (SELECT retention_days FROM matcher_runs)
            """
        ).rows[0]
        #expect(try row.int64(0) == 100, "150 qualify; the default --max-per-filter records 100")
        #expect(try row.int64Array(1) == [901], "the default --retention-days forgets what is past 180 days")
        #expect(try row.optionalInt64(2) == 180)
    }

    /// `--dry-run` (cli.md): it evaluates and reports what it found, writes nothing, and is neither refused nor
    /// held back by a real run of the same shard holding the run lock.
    @Test func aDryRunReportsWhatItFindsWritesNothingAndIsNotHeldBackByARealRun() throws {
        let twin = try FaultScenarioTests.world()
        let tables = [
            "filter_matches", "notifications", "matcher_runs", "matcher_shard_progress", "matcher_invalid_filters",
            "matcher_quarantine", "matcher_waiting_matches", "matcher_filter_state", "matcher_bulk_matches",
        ]
        func counts() throws -> [String: Int64] {
            var counts: [String: Int64] = [:]
            for table in tables {
                counts[table] = try twin.connection.query("SELECT count(*) FROM \(table)").rows[0].int64(0)
            }
            return counts
        }
        let untouched = try counts()
        let held = try #require(try twin.postgres.tryLock(kind: .run, shard: .all))
        let dry = try MatcherProcess.run(
            ["run", "--dry-run", "--now", FaultScenarioTests.now, "--format", "json"], database: twin.database.conninfo,
            timeout: 120)
        #expect(!dry.signalled && dry.status == 0, "\(dry.stderr)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(dry.stdout.utf8)) as? [String: Any], "\(dry.stdout)")
        let found = try #require((report["counts"] as? [String: Any])?["matches_found"] as? Int, "\(dry.stdout)")
        #expect(found > 100, "it evaluated: \(dry.stdout)")
        #expect(try counts() == untouched)
        held.release()
        // The real run finds what the dry run reported.
        let real = try MatcherProcess.run(
            ["run", "--now", FaultScenarioTests.now, "--format", "json"], database: twin.database.conninfo)
        #expect(real.status == 0, "\(real.stderr)")
        #expect(try twin.connection.query("SELECT count(*) FROM filter_matches").rows[0].int64(0) == Int64(found))
    }

    /// A released run lock is free at once for the next run: closing the session alone freed it only once the
    /// server's backend had exited, and a run started right after could exit 75 (seen in CI: two back-to-back
    /// runs of one test, under load).
    @Test func aReleasedRunLockIsFreeForTheNextRunAtOnce() throws {
        let twin = try Twin()
        for attempt in 1...100 {
            let held = try #require(try twin.postgres.tryLock(kind: .run, shard: .all), "attempt \(attempt)")
            held.release()
        }
    }

    /// A server that ends idle sessions (`idle_session_timeout`, set by a DBA for the app's pools) must not end the
    /// run lock's: it sits idle for the whole run, and a second run of the shard would start beside the first.
    @Test func theRunLockOutlivesTheServersIdleSessionTimeout() throws {
        let twin = try Twin()
        let alter = try twin.connection.query(
            "SELECT format('ALTER DATABASE %I SET idle_session_timeout = %L', current_database(), '500ms')"
        ).rows[0].string(0)
        try twin.connection.execute(alter)
        let held = try #require(try twin.postgres.tryLock(kind: .run, shard: .all))
        defer { held.release() }
        Thread.sleep(forTimeInterval: 1.5)
        let second = try twin.postgres.tryLock(kind: .run, shard: .all)
        #expect(second == nil)
        second?.release()
    }

    @Test func sigkillAtSeveralPointsThenOneMoreRunEqualsOneCleanRun() throws {
        let (clean, killed) = try Twin.pair(seed: 11)
        let arguments = ["run", "--now", "2026-03-01T03:00:00Z", "--unit-filters", "5"]
        let reference = try MatcherProcess.run(arguments, database: clean.database.conninfo)
        #expect(reference.status == 0, "\(reference.stderr)")

        // Killed after reading, inside an open unit, right after a commit, and before finishing; each
        // following process resumes the interrupted run.
        for fault in [
            "after-read", "unit-before-commit:2", "unit-after-commit:3", "unit-before-commit:1",
            "before-finish",
        ] {
            let outcome = try MatcherProcess.run(
                arguments, database: killed.database.conninfo,
                environment: ["MATCHER_FAULT": fault])
            #expect(outcome.signalled && outcome.status == SIGKILL, "\(fault): \(outcome.stderr)")
            // Its run lock goes with its server sessions, which end when the server notices.
            try FaultScenarioTests.waitUntilNoWorkerSession(killed)
        }
        let last = try MatcherProcess.run(arguments, database: killed.database.conninfo)
        #expect(last.status == 0, "\(last.stderr)")
        #expect(try Rows.of(killed.connection).matches == Rows.of(clean.connection).matches)
        #expect(try Rows.of(killed.connection).notifications == Rows.of(clean.connection).notifications)
        let statuses = try killed.connection.query("SELECT status FROM matcher_runs ORDER BY id").rows.map {
            try $0.string(0)
        }
        #expect(statuses.allSatisfy { $0 == "succeeded" })
    }

    /// The seam `MATCHER_FAULT` uses: the store reaches its points in the order the tests above rely on, the
    /// extra write connections' units included.
    @Test func theStoreReachesItsFaultPointsInRunOrder() throws {
        let twin = try Twin()
        var world = ScenarioWorld(seed: 11)
        try twin.load(world.day1(profiles: 300, filters: 60))
        let recorder = RecordedFaultPoints()
        let database = twin.database
        let store = PostgresMatchingStore(connection: try database.connect(), faultPoints: recorder) {
            try database.connect()
        }
        let summary = try RunMatching(MatchingRepositories(store: store), options: PassOptions(unitFilterLimit: 5))
            .execute(.init(now: ScenarioWorld.day1, shard: .all, maxPerFilter: 100))
        #expect(summary.counters.matchesWritten > 0)
        // Units may be written on several connections at once: each commit follows its own before-commit.
        let points = recorder.points
        let units = points.filter { $0 == .unitAfterCommit }.count
        #expect(units == 12)  // 60 filters, 5 a unit: the units of every write connection reach the seam
        #expect(points.first == .afterRead && points.last == .beforeFinish)
        #expect(points.filter { $0 == .unitBeforeCommit }.count == units)
        #expect(points.filter { $0 == .afterRead || $0 == .beforeFinish }.count == 2)
        var open = 0
        for point in points {
            if point == .unitBeforeCommit { open += 1 }
            if point == .unitAfterCommit { open -= 1 }
            #expect(open >= 0)
        }
    }

    /// A write connection the server refuses is not a failed run: the units are written by those that opened,
    /// the rows are those of a run with every connection, and the run says how many it had and why not more.
    @Test func aRefusedWriteConnectionIsReportedAndTheRunWritesTheSameRows() throws {
        let twin = try Twin(), reference = try Twin("reference")
        var world = ScenarioWorld(seed: 12), same = ScenarioWorld(seed: 12)
        try twin.load(world.day1(profiles: 300, filters: 60))
        try reference.load(same.day1(profiles: 300, filters: 60))
        // The store opens, in order: the run lock's connection, the extra writers', the sweeper's. The third,
        // the second extra writer, is refused.
        let database = twin.database
        let refusal = RefusedConnection(call: 3)
        let store = PostgresMatchingStore(connection: try database.connect(), writeConnections: 3) {
            try refusal.next()
            return try database.connect()
        }
        let output = RecordingRunOutput()
        let summary = try RunMatching(
            MatchingRepositories(store: store), output: output, options: PassOptions(unitFilterLimit: 5)
        )
        .execute(.init(now: ScenarioWorld.day1, shard: .all, maxPerFilter: 100))
        let shortfalls = output.events.compactMap { event -> UnitWriterShortfall? in
            if case .writersUnavailable(let shortfall) = event { return shortfall }
            return nil
        }
        #expect(shortfalls.map(\.opened) == [2])
        #expect(shortfalls.map(\.configured) == [3])
        #expect(shortfalls.first?.reason.contains("refused for the test") == true)

        let full = try RunMatching(
            MatchingRepositories(store: reference.postgres), options: PassOptions(unitFilterLimit: 5)
        )
        .execute(.init(now: ScenarioWorld.day1, shard: .all, maxPerFilter: 100))
        #expect(summary.counters.matchesWritten > 0)
        #expect(summary.counters.matchesWritten == full.counters.matchesWritten)
        #expect(try Rows.of(twin.connection).matches == Rows.of(reference.connection).matches)
        #expect(try Rows.of(twin.connection).notifications == Rows.of(reference.connection).notifications)
    }
}

/// Refuses one connection, the `call`-th opened, as a server at `max_connections` would.
final class RefusedConnection: @unchecked Sendable {
    struct Refused: Error, CustomStringConvertible {
        var description: String { "connection refused for the test" }
    }
    private let lock = NSLock()
    private var calls = 0
    private let call: Int
    init(call: Int) { self.call = call }
    func next() throws {
        lock.lock()
        calls += 1
        let current = calls
        lock.unlock()
        if current == call { throw Refused() }
    }
}

/// The store's fault points as a test sees them: every point reached, in order.
final class RecordedFaultPoints: StoreFaultPoints, @unchecked Sendable {
    private let lock = NSLock()
    private var reached: [StoreFaultPoint] = []
    func reach(_ point: StoreFaultPoint) {
        lock.lock()
        reached.append(point)
        lock.unlock()
    }
    var points: [StoreFaultPoint] {
        lock.lock()
        defer { lock.unlock() }
        return reached
    }
}

enum ScenarioWorldProfiles {
    static func man(_ id: Int64) -> Profile {
        Profile.make(id: id, lastLoginAt: ScenarioWorld.day1, createdAt: ScenarioWorld.day1, ["gender": .code(1)])
    }

    static func woman(_ id: Int64) -> Profile {
        Profile.make(id: id, lastLoginAt: ScenarioWorld.day1, createdAt: ScenarioWorld.day1, ["gender": .code(2)])
    }
}

extension Profile {
    func with(status: Int16) -> Profile { Profile(id: id, status: status, plan: plan, values: values) }
}

extension SavedFilter {
    func with(deletedAt: Timestamp?) -> SavedFilter {
        SavedFilter(
            id: id, ownerId: ownerId, name: name, conditionsJSON: conditionsJSON, notify: notify,
            notifyEvery: notifyEvery, createdAt: createdAt, updatedAt: updatedAt, deletedAt: deletedAt)
    }
}
