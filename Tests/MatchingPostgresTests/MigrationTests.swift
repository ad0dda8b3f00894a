import Foundation
import Matching
import PostgresClient
import PostgresTestSupport
import Testing

@testable import MatchingPostgres

@Suite struct MigrationTests {
    func schema(_ connection: PostgresConnection) throws -> [String] {
        try connection.query(
            """
            SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
            FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position
            """
        ).rows.map { try $0.string(0) }
    }

    @Test func migrateCreatesEveryTableAndRepeatingChangesNothing() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        let first = try MigrationRunner(connection: connection).apply(migrations)
        #expect(first.map(\.version) == migrations.map(\.version))
        let before = try schema(connection)
        let recorded = try connection.query(
            "SELECT version, applied_at FROM matcher_schema_migrations ORDER BY version"
        ).rows
            .map { "\(try $0.int32(0)) \(try $0.timestamp(1))" }

        let second = try MigrationRunner(connection: connection).applyReporting(migrations)
        #expect(second.applied.isEmpty && second.captureReinstalled == nil)
        #expect(try schema(connection) == before)
        // A repair is said: the capture's trigger disabled, then mended by a migrate with nothing else to apply
        // (it printed "up to date" alone before, review of session 36); the next one keeps it.
        try connection.execute("ALTER TABLE profiles DISABLE TRIGGER matcher_profiles_changed")
        let mending = try MigrationRunner(connection: connection).applyReporting(migrations)
        #expect(mending.applied.isEmpty)
        #expect(mending.captureReinstalled == "disabled trigger(s) matcher_profiles_changed")
        #expect(try MigrationRunner(connection: connection).applyReporting(migrations).captureReinstalled == nil)
        #expect(try schema(connection) == before)
        let again = try connection.query("SELECT version, applied_at FROM matcher_schema_migrations ORDER BY version")
            .rows
            .map { "\(try $0.int32(0)) \(try $0.timestamp(1))" }
        #expect(again == recorded)

        // Every table of runs.md, and a column for every MasterItem with the type its kind needs.
        let tables = Set(
            try connection.query(
                """
                SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'
                """
            ).rows.map { try $0.string(0) })
        for table in ["profiles", "saved_filters", "blocks", "filter_matches", "notifications", "matcher_runs"] {
            #expect(tables.contains(table), "missing table \(table)")
        }
        let columns = Dictionary(
            uniqueKeysWithValues: try connection.query(
                """
                SELECT column_name, udt_name, is_nullable FROM information_schema.columns WHERE table_name = 'profiles'
                """
            ).rows.map { (try $0.string(0), (try $0.string(1), try $0.string(2))) })
        for item in MasterItem.all {
            let column = try #require(columns[item.column], "no column for \(item.key)")
            let expected: (String, String)
            switch item.storage {
            case .smallint: expected = ("int2", "NO")
            case .nullableSmallint: expected = ("int2", "YES")
            case .nullableDate: expected = ("date", "YES")
            case .smallintArray: expected = ("_int2", "NO")
            case .integerArray: expected = ("_int4", "NO")
            case .boolean: expected = ("bool", "NO")
            case .timestamptz: expected = ("timestamptz", "NO")
            }
            #expect(column == expected, "\(item.key)")
        }
    }

    /// Found by review in session 23: two `matcher migrate` at once failed one of them (`tuple concurrently
    /// updated`) when both replaced the change capture's functions, which they did outside the migrators' lock;
    /// and on a fresh database both created the bookkeeping table at once.
    @Test func twoMigratorsAtOnceBothSucceed() throws {
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        func together(_ database: TestDatabase, _ prepare: (PostgresConnection) throws -> Void) throws {
            let connections = try (0..<2).map { _ in try database.connect() }
            defer { for connection in connections { connection.close() } }
            try prepare(connections[0])
            let failures = Locked<[String]>([])
            // Two threads that meet before they start, so that the two migrators do run at once.
            let ready = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0), done = DispatchGroup()
            for index in 0..<2 {
                done.enter()
                Thread.detachNewThread {
                    ready.signal()
                    go.wait()
                    do {
                        try MigrationRunner(connection: connections[index]).apply(migrations)
                    } catch {
                        failures.update { $0.append("\(error)") }
                    }
                    done.leave()
                }
            }
            ready.wait()
            ready.wait()
            go.signal()
            go.signal()
            done.wait()
            #expect(failures.value.isEmpty, "\(failures.value)")
        }
        for _ in 0..<3 {
            try together(try TestDatabase.create()) { _ in }
        }
        let database = try TestDatabase.create()
        try MigrationRunner(connection: try database.connect()).apply(migrations)
        for _ in 0..<5 {
            // The installed capture no longer matches its text: both migrators reinstall it.
            try together(database) { connection in
                try connection.execute("COMMENT ON FUNCTION matcher_record_changed_profile() IS 'stale'")
            }
        }
    }

    /// The version the code needs is the newest file's, and a run on a database behind it is refused before it
    /// reads or writes anything (exit 78, one line saying what to do), rather than failing at the first
    /// statement that names a new column after committing some units; after `matcher migrate` it runs.
    @Test func aRunOnASchemaOlderThanTheCodeIsRefusedBeforeItWritesAnything() throws {
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        #expect(MigrationRunner.schemaVersion == migrations.map(\.version).max())
        let database = try TestDatabase.create()
        let connection = try database.connect()
        try MigrationRunner(connection: connection).apply(
            migrations.filter { $0.version < MigrationRunner.schemaVersion })
        #expect(throws: MigrationError.self) { try MigrationRunner.verifyCurrent(connection) }

        let refused = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo)
        #expect(refused.status == 78, "\(refused.stderr)")
        #expect(refused.stderr.contains("needs version \(MigrationRunner.schemaVersion)"), "\(refused.stderr)")
        #expect(refused.stderr.contains("matcher migrate"))
        #expect(try connection.query("SELECT count(*) FROM matcher_runs").rows[0].int64(0) == 0)

        try MigrationRunner(connection: connection).apply(migrations)
        try MigrationRunner.verifyCurrent(connection)
        let ran = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo)
        #expect(ran.status == 0, "\(ran.stderr)")
    }

    /// Review of the explain output: explain skipped the worker schema's version check that run and backfill make.
    /// On an empty database it advised adding columns, and on an old schema it failed with a raw 42703; it now
    /// says, as they do, to run `matcher migrate` (exit 78).
    @Test func explainOnAnEmptyOrOldSchemaSaysToRunMigrate() throws {
        let arguments = ["explain", "--filter", "1", "--profile", "2", "--now", "2026-03-01T03:00:00Z"]
        let empty = try TestDatabase.create()
        let onEmpty = try MatcherProcess.run(arguments, database: empty.conninfo)
        #expect(onEmpty.status == 78, "\(onEmpty.stderr)")
        #expect(onEmpty.stderr.contains("has no version mark"), "\(onEmpty.stderr)")
        #expect(onEmpty.stderr.contains("run `matcher migrate`"), "\(onEmpty.stderr)")

        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        let old = try TestDatabase.create()
        try MigrationRunner(connection: try old.connect()).apply(
            migrations.filter { $0.version < MigrationRunner.schemaVersion })
        let onOld = try MatcherProcess.run(arguments, database: old.conninfo)
        #expect(onOld.status == 78, "\(onOld.stderr)")
        #expect(onOld.stderr.contains("needs version \(MigrationRunner.schemaVersion)"), "\(onOld.stderr)")
    }

    /// A column the app retyped after `matcher migrate` checked it is refused by `run`, `backfill` and `explain`
    /// before they read (exit 78, naming the column), not misread: binary COPY carries no types, and a
    /// `timestamp` is eight bytes like the `timestamptz` the worker reads (a `real` four like an `integer`).
    @Test func aColumnRetypedAfterMigrateIsRefusedBeforeARunReads() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        try connection.execute("ALTER TABLE profiles ALTER COLUMN last_login_at TYPE timestamp without time zone")
        for arguments in [
            ["run", "--now", "2026-03-01T03:00:00Z"], ["backfill", "--now", "2026-03-01T03:00:00Z"],
            ["explain", "--filter", "1", "--profile", "2", "--now", "2026-03-01T03:00:00Z"],
        ] {
            let refused = try MatcherProcess.run(arguments, database: database.conninfo)
            #expect(refused.status == 78, "\(arguments[0]): \(refused.stderr)")
            #expect(
                refused.stderr.contains(
                    "profiles.last_login_at is timestamp without time zone; the worker reads it as timestamp with time zone"
                ), "\(arguments[0]): \(refused.stderr)")
        }
        #expect(try connection.query("SELECT count(*) FROM matcher_runs").rows[0].int64(0) == 0)

        try connection.execute("ALTER TABLE profiles ALTER COLUMN last_login_at TYPE timestamp with time zone")
        // The filters' owner, which the run's SQL computes the shard with (found by review in session 32).
        try connection.execute("ALTER TABLE saved_filters ALTER COLUMN owner_id TYPE text")
        let ownerAsText = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo)
        #expect(ownerAsText.status == 78, "\(ownerAsText.stderr)")
        #expect(ownerAsText.stderr.contains("saved_filters.owner_id is text"), "\(ownerAsText.stderr)")
        try connection.execute("ALTER TABLE saved_filters ALTER COLUMN owner_id TYPE bigint USING owner_id::bigint")
        // A column no COPY reads (`updated_at` is compared in SQL, which casts) is not the run's concern.
        try connection.execute("ALTER TABLE profiles ALTER COLUMN updated_at TYPE timestamp without time zone")
        let ran = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo)
        #expect(ran.status == 0, "\(ran.stderr)")
    }

    /// Found by review in session 32: a capture trigger dropped with a column (`DROP COLUMN … CASCADE`) or
    /// disabled left every run succeeding while the profiles' edits and status changes went unrecorded; only
    /// `matcher migrate` counted the triggers, and counted a disabled one. A run now refuses (exit 78, before it
    /// writes anything), and `matcher migrate` installs the capture again, a disabled trigger included.
    @Test func aRunRefusesWhileACaptureTriggerIsGoneOrDisabledAndMigrateMendsIt() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        let now = ["--now", "2026-03-01T03:00:00Z"]
        for (breakage, shown) in [
            ("DROP TRIGGER matcher_profiles_changed ON profiles", "matcher_profiles_changed missing"),
            ("ALTER TABLE profiles DISABLE TRIGGER matcher_profiles_inserted", "matcher_profiles_inserted disabled"),
            (
                "ALTER TABLE profiles ENABLE REPLICA TRIGGER matcher_profiles_deleted",
                "matcher_profiles_deleted disabled"
            ),
        ] {
            try connection.execute(breakage)
            let refused = try MatcherProcess.run(["run"] + now, database: database.conninfo)
            #expect(refused.status == 78, "\(breakage): \(refused.stderr)")
            #expect(refused.stderr.contains("the change capture on profiles is incomplete"), "\(refused.stderr)")
            #expect(refused.stderr.contains(shown) && refused.stderr.contains("matcher migrate"), "\(refused.stderr)")
            #expect(try connection.query("SELECT count(*) FROM matcher_runs").rows[0].int64(0) == 0)

            let migrated = try MatcherProcess.run(["migrate"], database: database.conninfo)
            #expect(migrated.status == 0, "\(breakage): \(migrated.stderr)")
            try ChangeCapture.verifyCapturing(connection)
        }
        let ran = try MatcherProcess.run(["run"] + now, database: database.conninfo)
        #expect(ran.status == 0, "\(ran.stderr)")
    }

    /// A migration that would wait behind another session's lock gives up whole after `--lock-timeout` (exit 75
    /// from the command line) rather than make every later statement on that table queue behind it; run again once
    /// the lock is gone, it applies.
    @Test func aMigrationWaitingForALockGivesUpWholeAndAppliesWhenRunAgain() throws {
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        let database = try TestDatabase.create()
        let connection = try database.connect()
        try MigrationRunner(connection: connection).apply(migrations.filter { $0.version <= 14 })
        // Another session reading the table migration 15 alters, in a transaction that stays open.
        let holder = try database.connect()
        try holder.execute("BEGIN; LOCK TABLE matcher_waiting_matches IN ACCESS SHARE MODE")
        func version() throws -> Int32 {
            try connection.query("SELECT max(version) FROM matcher_schema_migrations").rows[0].int32(0)
        }
        let started = ContinuousClock.now
        let error = try #require(throws: MigrationError.self) {
            try MigrationRunner(connection: try database.connect(), lockTimeoutSeconds: 1).apply(migrations)
        }
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(error.failureKind == .locked)
        #expect(error.description.contains("migration 15") && error.description.contains("--lock-timeout"))
        #expect(error.description.contains("nothing of it was applied, the migrations before it are"))
        #expect(try version() == 14)
        let cli = try MatcherProcess.run(
            ["migrate", "--lock-timeout", "1"], database: database.conninfo,
            environment: ["MATCHER_SQL_DIR": MigratedDatabase.sqlDirectory.path])
        #expect(cli.status == 75, "\(cli.stderr)")
        #expect(cli.stderr.contains("waited more than 1 s for a lock") && cli.stderr.contains("migrate again"))
        #expect(try version() == 14)
        try holder.execute("ROLLBACK")
        try MigrationRunner(connection: connection, lockTimeoutSeconds: 1).apply(migrations)
        #expect(try version() == Int32(MigrationRunner.schemaVersion))
    }

    /// Migration 15 gives the entries listed so far the answer the clock rule of migration 14 gave (passed over
    /// when their filter had a digest, written or held back, at or after their clock), and drops that rule's column.
    @Test func theWaitingListsClockRuleBecomesAFlagEntryByEntry() throws {
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        let database = try TestDatabase.create()
        let connection = try database.connect()
        try MigrationRunner(connection: connection).apply(migrations.filter { $0.version <= 14 })
        let day1 = ScenarioWorld.day1
        // Filters 1-4: a digest after the match; a digest before it; held back after it; no decision yet.
        for (filter, matched) in [(Int64(1), day1), (2, day1.adding(days: 2)), (3, day1), (4, day1)] {
            try connection.query(
                "INSERT INTO matcher_waiting_matches (filter_id, profile_id, matched_at) VALUES ($1, 10, $2)",
                [.int8(filter), .timestamptz(matched)])
        }
        try connection.query(
            """
            INSERT INTO matcher_filter_state (filter_id, last_notified_at, passed_over_at)
            VALUES (1, $1, NULL), (2, $1, NULL), (3, NULL, $1)
            """, [.timestamptz(day1.adding(days: 1))])
        try MigrationRunner(connection: connection).apply(migrations)
        let flags = try connection.query(
            "SELECT filter_id, passed_over FROM matcher_waiting_matches ORDER BY filter_id"
        ).rows.map { "\(try $0.int64(0)) \(try $0.bool(1))" }
        #expect(flags == ["1 true", "2 false", "3 true", "4 false"])
        let dropped = try connection.query(
            """
            SELECT count(*) FROM information_schema.columns
            WHERE table_name = 'matcher_filter_state' AND column_name = 'passed_over_at'
            """
        ).rows[0].int64(0)
        #expect(dropped == 0)
    }

    /// Migration 17 gives the entries passed over before it the migration's time (their whole comeback from the
    /// upgrade on), keeps the ones that still wait without one, and the retention sweep's statement finds the
    /// passed-over entries through its index. From a database at 16 as 389e42d wrote it, and from one at 16 as
    /// 909ddd3 wrote it (the same end state: `equivalentChecksums`).
    @Test(arguments: [false, true])
    func passedOverEntriesTakeTheMigrationsTimeAndTheSweepUsesTheIndex(from909ddd3: Bool) throws {
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        let database = try TestDatabase.create()
        let connection = try database.connect()
        #expect(Migration(version: 16, name: "x", sql: Self.migration16At909ddd3).checksum == "9289947144f982e4")
        let at16 = migrations.filter { $0.version <= 16 }.map { migration in
            guard from909ddd3, migration.version == 16 else { return migration }
            return Migration(version: 16, name: migration.name, sql: Self.migration16At909ddd3)
        }
        try MigrationRunner(connection: connection).apply(at16)
        for (profile, passedOver) in [(Int64(10), true), (11, false)] {
            try connection.query(
                """
                INSERT INTO matcher_waiting_matches (filter_id, profile_id, matched_at, passed_over)
                VALUES (1, $1, $2, $3)
                """, [.int8(profile), .timestamptz(ScenarioWorld.day1), .bool(passedOver)])
        }
        if from909ddd3 { try connection.execute("UPDATE matcher_waiting_matches SET passed_over_at = NULL") }
        let before = try connection.query("SELECT now()").rows[0].timestamp(0)
        try MigrationRunner(connection: connection).apply(migrations)
        #expect(try version() == Int32(MigrationRunner.schemaVersion))
        let times = try connection.query(
            "SELECT profile_id, passed_over_at FROM matcher_waiting_matches ORDER BY profile_id"
        ).rows.map { (try $0.int64(0), try $0.optionalTimestamp(1)) }
        #expect(times.count == 2)
        #expect(times.first?.1.map { $0 >= before } == true, "\(times)")
        #expect(times.last?.1 == nil)
        // The migration's UPDATE leaves HOT chains the new index breaks, so PostgreSQL lets a transaction use it
        // only once every transaction older than the index has ended (`pg_index.indcheckxmin`): other tests'
        // open transactions may hold that off for a while. Asked again until then.
        try connection.execute("SET enable_seqscan = off")
        var plan = ""
        let deadline = Date().addingTimeInterval(120)
        repeat {
            plan = try connection.query(
                "EXPLAIN " + RetentionSQL.forgetPassedOverEntriesBatch,
                [.timestamptz(ScenarioWorld.day1), .int4(1_000)]
            ).rows.map { try $0.string(0) }.joined(separator: "\n")
            if plan.contains("matcher_waiting_matches_passed_over_at") { break }
            Thread.sleep(forTimeInterval: 0.2)
        } while Date() < deadline
        #expect(plan.contains("matcher_waiting_matches_passed_over_at"), "\(plan)")

        func version() throws -> Int32 {
            try connection.query("SELECT max(version) FROM matcher_schema_migrations").rows[0].int32(0)
        }
    }

    /// sql/0016 as commit 909ddd3 had it, byte for byte (replaced by 389e42d's text and migration 0017).
    static let migration16At909ddd3 = """
        -- A match a digest passed over (it no longer qualified at the digest's clock) is read again by every
        -- later digest of its filter, in case it qualifies again. Until this migration it stayed listed until the
        -- retention (180 days by default), so a filter's passed-over matches piled up for half a year and each digest
        -- day read them all, with their profiles: a cost that followed the service's age, not the day's work. Now
        -- it may come back for Retention.comebackDays (30) after the decision that passed it over (passed_over_at,
        -- that unit's clock); then the retention sweep takes its entry off the list (its pair stays recorded until
        -- the retention, so it does not match again), through the partial index below: only passed-over entries,
        -- oldest decision first, so a sweep never reads the entries that still wait. (The index reads passed_over,
        -- so marking an entry passed over is no longer an in-place update; a few thousand entries a day.)
        --
        -- Entries passed over before this migration have no decision time: they take the migration's, so each gets
        -- its whole comeback from the upgrade on.
        ALTER TABLE matcher_waiting_matches ADD COLUMN IF NOT EXISTS passed_over_at timestamptz;
        UPDATE matcher_waiting_matches SET passed_over_at = now() WHERE passed_over AND passed_over_at IS NULL;
        CREATE INDEX IF NOT EXISTS matcher_waiting_matches_passed_over
            ON matcher_waiting_matches (passed_over_at) WHERE passed_over;

        """

    /// Session 30 corrected migration 0019's comment after 7778be3 had written it (d281c6b): a database migrated
    /// with the first text migrates on, not told the migration "was edited" (`equivalentChecksums`; review of
    /// session 31).
    @Test func migration19AsFirstWrittenIsNotAnEditedMigration() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        #expect(Migration(version: 19, name: "x", sql: Self.migration19At7778be3).checksum == "d7af339a71ef7f")
        try MigrationRunner(connection: connection).apply(
            migrations.filter { $0.version <= 19 }.map { migration in
                migration.version == 19
                    ? Migration(version: 19, name: migration.name, sql: Self.migration19At7778be3) : migration
            })
        try MigrationRunner(connection: connection).apply(migrations)
        // Taken for the current text from then on.
        let recorded = try connection.query(
            "SELECT checksum FROM matcher_schema_migrations WHERE version = 19"
        ).rows.map { try $0.string(0) }
        #expect(recorded == migrations.filter { $0.version == 19 }.map(\.checksum))
    }

    /// sql/0019 as commit 7778be3 had it, byte for byte.
    static let migration19At7778be3 = """
        -- Matches recorded while their filter's notify is off. runs.md: a filter with notify on and unnotified matches gets
        -- a digest when it is due, so the matches a filter recorded while its owner had notify off are counted by its
        -- first digest after notify is turned on (those still within the retention, and still candidates then).
        -- They are not listed as waiting while notify is off: matcher_waiting_matches holds what a digest may count, and
        -- listing every notify-off filter's pairs for the whole retention would double their writes and their forgetting.
        -- Instead a unit that records such matches notes here the earliest clock it recorded them at; the first run that
        -- finds the filter notifying lists its unnotified, non-silent matches recorded from then on (and within the
        -- retention) as waiting, and clears the note, in one statement. One row per filter, forgotten with the filter.
        ALTER TABLE matcher_filter_state ADD COLUMN IF NOT EXISTS unlisted_from timestamptz;
        -- The runs read the noted filters only (a few per cent of the table at most).
        CREATE INDEX IF NOT EXISTS matcher_filter_state_unlisted ON matcher_filter_state (filter_id)
            WHERE unlisted_from IS NOT NULL;
        -- Matches recorded before this migration while their filter's notify was off are noted from the start of time
        -- (the retention bounds what is listed). A filter that had notify on, passed a match over and then turned
        -- notify off may so get such a match listed once more; the note cannot tell them apart.
        INSERT INTO matcher_filter_state (filter_id, last_notified_at, unlisted_from)
        SELECT f.id, (SELECT max(n.created_at) FROM notifications n WHERE n.filter_id = f.id), '-infinity'
        FROM saved_filters f
        WHERE f.deleted_at IS NULL AND coalesce(f.notify::text, 'true') NOT IN ('true', 't')
          AND EXISTS (SELECT 1 FROM filter_matches m
                      WHERE m.filter_id = f.id AND m.notification_id IS NULL AND NOT m.silent)
        ORDER BY f.id
        ON CONFLICT (filter_id) DO UPDATE SET unlisted_from = '-infinity';

        """

    /// Every migration's text as released (`Migration.checksum`). A released migration is not edited: a database
    /// migrated with the old text refuses the new one ("was edited after it was applied"). Where an edit cannot
    /// change what the migration did (a comment), the old checksum goes into `MigrationRunner.equivalentChecksums`
    /// and the new one here; a new migration adds its own. (Session 31: 0019's comment, corrected in d281c6b,
    /// had no such entry until a review found it.)
    static let releasedChecksums: [Int: String] = [
        1: "70bd6a7bd3bf37ef", 2: "191eb7c772a525e4", 3: "1a1c68f1a80263b9", 4: "af4a32cc322a89a",
        5: "bc9753e4d725606d", 6: "eb35ffc2ada153ae", 7: "a32b0f644d99e2a3", 8: "d732194c31007a5d",
        9: "bb7e65c0cdd3c5c8", 10: "ac213ae55d7c152e", 11: "44a5c74fe994627a", 12: "51563f69ac53e13e",
        13: "aff17f0eac2385c8", 14: "fc89c11fa67c3d6c", 15: "51416c42e7b78dc2", 16: "8d1492c6072dcecc",
        17: "d07784fcf7847f3b", 18: "d398572779e71ec6", 19: "8f61a04d3875546", 20: "efe2b4e535d97f4d",
    ]

    @Test func noMigrationIsEditedUnnoticed() throws {
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        #expect(migrations.map(\.version) == Self.releasedChecksums.keys.sorted())
        for migration in migrations {
            #expect(
                migration.checksum == Self.releasedChecksums[migration.version],
                """
                migration \(migration.version)'s text changed (\(migration.checksum)): a database migrated with the \
                released text would refuse it; add a new migration, or, for a change that cannot alter what it did, \
                the old checksum to MigrationRunner.equivalentChecksums and the new one here
                """)
        }
    }

    @Test func anEditedMigrationIsRefused() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        try MigrationRunner(connection: connection).apply(migrations)
        let first = try #require(migrations.first)
        let edited =
            [Migration(version: first.version, name: first.name, sql: first.sql + "\n-- edited")]
            + migrations.dropFirst()
        let refused = #expect(throws: MigrationError.self) { try MigrationRunner(connection: connection).apply(edited) }
        #expect(refused?.description.contains("was edited after it was applied") == true)
    }

    /// Found by review in session 29: an older binary's `migrate` on a newer schema installed its older change
    /// capture over the newer one and marked the newest version all the same, so the newer runs went on with
    /// changes unrecorded. It is refused, and nothing changes.
    @Test func anOlderBinarysMigrateOnANewerSchemaIsRefused() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        try MigrationRunner(connection: connection).apply(migrations)
        let capture = """
            SELECT string_agg(p.proname || ':' || md5(p.prosrc), ',' ORDER BY p.proname) FROM pg_proc p
            WHERE p.proname LIKE 'matcher%'
            """
        let before = try connection.query(capture).rows[0].optionalString(0)
        let older = migrations.filter { $0.version <= 15 }
        let refused = #expect(throws: MigrationError.self) { try MigrationRunner(connection: connection).apply(older) }
        #expect(
            refused?.description
                == "this database's worker schema is at version \(MigrationRunner.schemaVersion), newer than this "
                + "matcher's migrations (up to 15): run matcher migrate with the newer binary; nothing was changed")
        #expect(refused?.failureKind == .configuration)
        #expect(try connection.query(capture).rows[0].optionalString(0) == before)
        try MigrationRunner.verifyCurrent(connection)
    }

    /// Review of session 32: a folder missing one file (a partial install) applied the later ones over the gap,
    /// and the version mark passed it. `load` refuses, naming the file, before anything is applied.
    @Test func aFolderMissingAMigrationIsRefused() throws {
        let folder = try Self.copyOfMigrations(keeping: { $0 != 7 })
        defer { try? FileManager.default.removeItem(at: folder) }
        let error = #expect(throws: MigrationError.self) { try MigrationRunner.load(from: folder) }
        #expect(error?.description.hasPrefix("migration 0007 is missing from ") == true, "\(String(describing: error))")
        #expect(try MigrationRunner.load(from: MigratedDatabase.sqlDirectory).count == MigrationRunner.schemaVersion)
    }

    /// A temporary folder holding the migrations of `sql/` whose versions `keeping` accepts, and a file named `extra`.
    static func copyOfMigrations(keeping: (Int) -> Bool, extra: String? = nil) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: MigratedDatabase.sqlDirectory.path)
        where name.hasSuffix(".sql") && Int(name.prefix(4)).map(keeping) == true {
            try FileManager.default.copyItem(
                at: MigratedDatabase.sqlDirectory.appendingPathComponent(name), to: folder.appendingPathComponent(name))
        }
        if let extra {
            try "SELECT 1;\n".write(to: folder.appendingPathComponent(extra), atomically: true, encoding: .utf8)
        }
        return folder
    }

    /// A new database migrated to version 17, with all of `sql/`'s migrations and the version it is at.
    private static func databaseAt17() throws -> (
        database: TestDatabase, connection: PostgresConnection, migrations: [Migration], version: () throws -> Int32
    ) {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        try MigrationRunner(connection: connection).apply(migrations.filter { $0.version <= 17 })
        return (
            database, connection, migrations,
            { try connection.query("SELECT max(version) FROM matcher_schema_migrations").rows[0].int32(0) }
        )
    }

    /// Review of session 33: `migrate` with an older release's folder (the binary replaced alone, or
    /// MATCHER_SQL_DIR still naming the last release's) said "up to date", and every run then refused for want of
    /// the newer schema, day after day. It is refused, naming the folder, as is a folder newer than the binary;
    /// the version stays where it was.
    @Test func aFolderOlderOrNewerThanTheBinaryIsRefusedByMigrate() throws {
        let (database, connection, _, version) = try Self.databaseAt17()
        defer { connection.close() }
        let older = try Self.copyOfMigrations(keeping: { $0 <= 17 })
        let next = String(format: "%04d", MigrationRunner.schemaVersion + 1)
        let newer = try Self.copyOfMigrations(
            keeping: { $0 <= MigrationRunner.schemaVersion }, extra: "\(next)_next_release.sql")
        defer {
            try? FileManager.default.removeItem(at: older)
            try? FileManager.default.removeItem(at: newer)
        }
        let refusedOlder = try MatcherProcess.run(["migrate", "--sql-dir", older.path], database: database.conninfo)
        #expect(refusedOlder.status == 78, "\(refusedOlder.stderr)")
        #expect(refusedOlder.stderr.contains("the migrations in \(older.path) end at 0017"), "\(refusedOlder.stderr)")
        #expect(refusedOlder.stderr.contains("this matcher needs 00\(MigrationRunner.schemaVersion)"))
        let refusedNewer = try MatcherProcess.run(["migrate", "--sql-dir", newer.path], database: database.conninfo)
        #expect(refusedNewer.status == 78, "\(refusedNewer.stderr)")
        #expect(refusedNewer.stderr.contains("go up to \(next), newer than this matcher"), "\(refusedNewer.stderr)")
        #expect(try version() == 17)
        let applied = try MatcherProcess.run(
            ["migrate", "--sql-dir", MigratedDatabase.sqlDirectory.path], database: database.conninfo)
        #expect(applied.status == 0, "\(applied.stderr)")
        #expect(applied.stdout.contains("from \(MigratedDatabase.sqlDirectory.path)"), "\(applied.stdout)")
        #expect(try version() == Int32(MigrationRunner.schemaVersion))
    }

    /// Review of session 33: a migrate with migrations to apply while a run or backfill writes (an older binary's
    /// units between two migrations) is refused (exit 75), nothing changed; while it applies, and after it stops part
    /// way, the mark says "migrating" and runs refuse; done, the mark names the oldest binaries that may run.
    @Test func migrateWaitsForRunsAndMarksWhatBinariesMayRunBeside() throws {
        let (database, connection, migrations, version) = try Self.databaseAt17()
        defer { connection.close() }
        func mark() throws -> String? {
            try connection.query("SELECT obj_description('matcher_runs'::regclass, 'pg_class')").rows[0]
                .optionalString(0)
        }
        let holder = PostgresMatchingStore(connection: try database.connect()) { try database.connect() }
        defer { holder.connection.close() }
        let lock = try #require(try holder.tryLock(kind: .run, shard: .all))
        let refused = #expect(throws: MigrationError.self) {
            try MigrationRunner(connection: connection).apply(migrations)
        }
        #expect(refused?.failureKind == .locked)
        #expect(refused?.description.contains("hold their lock") == true, "\(String(describing: refused))")
        #expect(try version() == 17 && mark() == "matcher schema 17 min 17")
        lock.release()

        // Stopped before any migration was applied (migration 18 fails): the schema and its mark are as they were.
        let broken18 = migrations.map {
            $0.version == 18 ? Migration(version: 18, name: $0.name, sql: "SELECT 1/0") : $0
        }
        #expect(throws: (any Error).self) { try MigrationRunner(connection: connection).apply(broken18) }
        #expect(try version() == 17 && mark() == "matcher schema 17 min 17")
        // Stopped part way (migration 18 applied, 19 fails): runs refuse, saying so.
        let broken = migrations.map { $0.version == 19 ? Migration(version: 19, name: $0.name, sql: "SELECT 1/0") : $0 }
        #expect(throws: (any Error).self) { try MigrationRunner(connection: connection).apply(broken) }
        #expect(try version() == 18 && mark() == "matcher schema migrating")
        let stopped = #expect(throws: MigrationError.self) { try MigrationRunner.verifyCurrent(connection) }
        #expect(stopped?.description.contains("stopped part way") == true, "\(String(describing: stopped))")

        try MigrationRunner(connection: connection).apply(migrations)
        #expect(try mark() == "matcher schema \(MigrationRunner.schemaVersion) min 19")
        try MigrationRunner.verifyCurrent(connection)
        // A newer schema whose binaries this one may run beside, and one it may not.
        try connection.execute("COMMENT ON TABLE matcher_runs IS 'matcher schema 20 min 19'")
        try MigrationRunner.verifyCurrent(connection)
        try connection.execute("COMMENT ON TABLE matcher_runs IS 'matcher schema 21 min 21'")
        let tooOld = #expect(throws: MigrationError.self) { try MigrationRunner.verifyCurrent(connection) }
        #expect(tooOld?.description.contains("install the newer matcher") == true, "\(String(describing: tooOld))")
    }
    /// Review of session 35: a `matcher migrate` that gave up with nothing applied (exit 75 after `--lock-timeout`,
    /// another session holding a table) left the mark at "matcher schema migrating", so every run of the binary
    /// already installed then refused (exit 78, "retrying will not help") for a migrate that changed nothing. The
    /// mark it replaced is put back: the upgrade from 19 (the command line), and one past this build's schema
    /// (a 0021 of a later release, waiting on `profiles`), after which this build's run still works.
    @Test func aMigrateThatGivesUpWithNothingAppliedLeavesThePreviousMark() throws {
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        let database = try TestDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        func mark() throws -> String? {
            try connection.query("SELECT obj_description('matcher_runs'::regclass, 'pg_class')").rows[0]
                .optionalString(0)
        }
        try MigrationRunner(connection: connection).apply(migrations.filter { $0.version <= 19 })
        #expect(try mark() == "matcher schema 19 min 19")
        // Another session reading matcher_runs, which migration 20 alters, in a transaction that stays open.
        let holder = try database.connect()
        defer { holder.close() }
        try holder.execute("BEGIN; LOCK TABLE matcher_runs IN ACCESS SHARE MODE")
        let gaveUp = try MatcherProcess.run(
            ["migrate", "--lock-timeout", "1"], database: database.conninfo,
            environment: ["MATCHER_SQL_DIR": MigratedDatabase.sqlDirectory.path])
        #expect(gaveUp.status == 75, "\(gaveUp.stderr)")
        #expect(gaveUp.stderr.contains("migration 20"), "\(gaveUp.stderr)")
        #expect(try mark() == "matcher schema 19 min 19")
        // This build's run is told the schema's version, not that a migrate is under way.
        let refused = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo)
        #expect(refused.status == 78, "\(refused.stderr)")
        #expect(refused.stderr.contains("is at version 19"), "\(refused.stderr)")
        try holder.execute("ROLLBACK")

        // At this build's schema, a later release's migration gives up: this build's runs go on.
        let current = try MigratedDatabase.create()
        let migrated = try current.connect()
        defer { migrated.close() }
        let next = Migration(
            version: MigrationRunner.schemaVersion + 1, name: "next_release",
            sql: "ALTER TABLE profiles ADD COLUMN next_release_column integer")
        let reader = try current.connect()
        defer { reader.close() }
        try reader.execute("BEGIN; LOCK TABLE profiles IN ACCESS SHARE MODE")
        let error = try #require(throws: MigrationError.self) {
            try MigrationRunner(connection: migrated, lockTimeoutSeconds: 1).apply(migrations + [next])
        }
        #expect(error.failureKind == .locked, "\(error)")
        try reader.execute("ROLLBACK")
        let after = try migrated.query("SELECT obj_description('matcher_runs'::regclass, 'pg_class')").rows[0]
            .optionalString(0)
        #expect(after == "matcher schema \(MigrationRunner.schemaVersion) min 19")
        let ran = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: current.conninfo)
        #expect(ran.status == 0, "\(ran.stderr)")
    }

    /// Review of session 35: `run` and `backfill` check the mark before they take their run lock, and a
    /// `matcher migrate` that began in between found no run lock and applied its migrations under the run. The
    /// command line's store reads the mark again once it holds the lock, after waiting for a migrators' transaction
    /// in progress (the one that checks the run locks and writes "migrating"): refused with the same line, the lock
    /// let go, nothing written.
    @Test func aMigrateBegunBetweenARunsCheckAndItsLockIsSeenUnderTheLock() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        let store = PostgresMatchingStore(connection: try database.connect(), verifiesSchemaUnderRunLock: true) {
            try database.connect()
        }
        defer { store.connection.close() }
        let now = ScenarioWorld.day1
        let markNow = "matcher schema \(MigrationRunner.schemaVersion) min 19"
        func runs() throws -> Int64 { try connection.query("SELECT count(*) FROM matcher_runs").rows[0].int64(0) }

        // The command's check passes; then a migrate writes its mark; then the run takes its lock.
        try MigrationRunner.verifyCurrent(store.connection)
        try connection.execute("COMMENT ON TABLE matcher_runs IS 'matcher schema migrating'")
        let refusedRun = try #require(throws: MigrationError.self) {
            try RunMatching(MatchingRepositories(store: store)).execute(.init(now: now))
        }
        #expect(refusedRun.description.contains("a matcher migrate of this database is under way"), "\(refusedRun)")
        let refusedBackfill = try #require(throws: MigrationError.self) {
            try Backfill(MatchingRepositories(store: store)).execute(.init(now: now))
        }
        #expect(refusedBackfill.description == refusedRun.description)
        #expect(try runs() == 0)
        // The lock was let go.
        let other = PostgresMatchingStore(connection: try database.connect()) { try database.connect() }
        defer { other.connection.close() }
        let free = try #require(try other.tryLock(kind: .run, shard: .all))
        free.release()

        // The migrate's first transaction, between its look at the run locks and its commit: the run, locked
        // meanwhile, waits for it and reads the mark it commits.
        try connection.execute("COMMENT ON TABLE matcher_runs IS '\(markNow)'")
        let migrator = try database.connect()
        defer { migrator.close() }
        try migrator.execute("BEGIN")
        try migrator.query("SELECT pg_advisory_xact_lock($1, 0)", [.int4(MigrationRunner.lockNamespace)])
        try migrator.execute("COMMENT ON TABLE matcher_runs IS 'matcher schema migrating'")
        let outcome = Locked<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                _ = try RunMatching(MatchingRepositories(store: store)).execute(.init(now: now))
                outcome.update { $0 = "ran" }
            } catch {
                outcome.update { $0 = "\(error)" }
            }
            done.signal()
        }
        var waiting = false
        for _ in 0..<500 where !waiting {
            waiting =
                try connection.query(
                    """
                    SELECT count(*) > 0 FROM pg_locks
                    WHERE locktype = 'advisory' AND NOT granted AND classid = $1::bigint::oid AND objid = 0
                    """, [.int8(Int64(MigrationRunner.lockNamespace))]
                ).rows[0].bool(0)
            if !waiting && done.wait(timeout: .now() + 0.02) == .success {
                done.signal()
                break
            }
        }
        try migrator.execute("COMMIT")
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(waiting, "the run did not wait for the migrators' transaction: \(String(describing: outcome.value))")
        #expect(
            outcome.value?.contains("a matcher migrate of this database is under way") == true,
            "\(String(describing: outcome.value))")
        #expect(try runs() == 0)
    }

    /// Review of session 35: the run's wait for a migrators' transaction is bounded by its own lock timeout (30 s,
    /// then 75, nothing written), but a --statement-timeout under it ended the wait as a statement timeout (exit 1,
    /// "raise --statement-timeout"), and a --network-timeout under it as a lost connection. Both now wait it out
    /// and exit 75 with the same line.
    @Test func aShortStatementOrNetworkTimeoutDoesNotCutTheWaitForAMigrator() throws {
        let database = try MigratedDatabase.create()
        let migrator = try database.connect()
        defer { migrator.close() }
        try migrator.execute("BEGIN")
        try migrator.query("SELECT pg_advisory_xact_lock($1, 0)", [.int4(MigrationRunner.lockNamespace)])
        let commands = [
            ["run", "--now", "2026-03-01T03:00:00Z", "--statement-timeout", "2"],
            ["backfill", "--now", "2026-03-01T03:00:00Z", "--statement-timeout", "0", "--network-timeout", "3"],
        ]
        let outcomes = Locked<[Int: MatcherProcess.Outcome]>([:])
        DispatchQueue.concurrentPerform(iterations: commands.count) { index in
            let outcome = try? MatcherProcess.run(commands[index], database: database.conninfo, timeout: 120)
            outcomes.update { $0[index] = outcome }
        }
        try migrator.execute("ROLLBACK")
        for (index, arguments) in commands.enumerated() {
            let outcome = try #require(outcomes.value[index], "\(arguments[0]) did not run")
            #expect(outcome.status == 75, "\(arguments[0]): \(outcome.stderr)")
            #expect(
                outcome.stderr.contains(
                    "has held the migrators' lock for more than 30 s after this process took its run "
                        + "lock; nothing was written"), "\(arguments[0]): \(outcome.stderr)")
        }
        let runs = try migrator.query("SELECT count(*) FROM matcher_runs").rows[0].int64(0)
        #expect(runs == 0)
    }

    /// Review of session 35: with a search path that does not reach the worker's schema (`PGOPTIONS='-c
    /// search_path=other'`), run, backfill and explain said "has no version mark …: run `matcher migrate`" and status
    /// "the schema is missing or old"; following that advice with the same options made a second, empty installation
    /// in `other`, which every later run read with no error. They now name the schema that holds the installation
    /// and what to fix; migrate refuses to make a second installation unless told to (`--new-installation`).
    @Test func aSearchPathWithoutTheWorkersSchemaIsNamedAndMigrateMakesNoSecondOne() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try connection.execute("CREATE SCHEMA other")
        let elsewhere = ["PGOPTIONS": "-c search_path=other"]
        for arguments in [
            ["run", "--now", "2026-03-01T03:00:00Z"], ["backfill", "--now", "2026-03-01T03:00:00Z"],
            ["explain", "--filter", "1", "--profile", "2", "--now", "2026-03-01T03:00:00Z"], ["status"],
        ] {
            let refused = try MatcherProcess.run(arguments, database: database.conninfo, environment: elsewhere)
            #expect(refused.status == 78, "\(arguments[0]): \(refused.stderr)")
            #expect(
                refused.stderr.contains(
                    "search path (search_path=other) reaches no matcher_runs, and schema public holds matcher_runs "
                        + "(not on the search path): fix the search path"), "\(arguments[0]): \(refused.stderr)")
            #expect(
                refused.stderr.contains("run `matcher migrate` only to make a new installation in other"),
                "\(arguments[0]): \(refused.stderr)")
            #expect(!refused.stderr.contains("no version mark"), "\(arguments[0]): \(refused.stderr)")
        }
        func inOther() throws -> Int64 {
            try connection.query(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'other'"
            ).rows[0].int64(0)
        }
        let refusedMigrate = try MatcherProcess.run(["migrate"], database: database.conninfo, environment: elsewhere)
        #expect(refusedMigrate.status == 78, "\(refusedMigrate.stderr)")
        #expect(refusedMigrate.stderr.contains("schema public holds matcher_runs"), "\(refusedMigrate.stderr)")
        #expect(refusedMigrate.stderr.contains("--new-installation"), "\(refusedMigrate.stderr)")
        #expect(try inOther() == 0)
        // Asked for, a second installation (a schema per environment) is made.
        let second = try MatcherProcess.run(
            ["migrate", "--new-installation"], database: database.conninfo, environment: elsewhere)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try connection.query("SELECT to_regclass('other.matcher_runs') IS NOT NULL").rows[0].bool(0))
        let ran = try MatcherProcess.run(
            ["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo, environment: elsewhere)
        #expect(ran.status == 0, "\(ran.stderr)")

        // No installation yet, the app's tables in a schema off the path: not copied empty into `other`.
        let fresh = try TestDatabase.create()
        let setup = try fresh.connect()
        defer { setup.close() }
        try setup.execute("CREATE SCHEMA app; CREATE TABLE app.profiles (id bigint PRIMARY KEY); CREATE SCHEMA other")
        let refusedFresh = try MatcherProcess.run(["migrate"], database: fresh.conninfo, environment: elsewhere)
        #expect(refusedFresh.status == 78, "\(refusedFresh.stderr)")
        #expect(
            refusedFresh.stderr.contains(
                "schema app holds the app's profiles (no matcher_runs) (not on the search path)"),
            "\(refusedFresh.stderr)")
        #expect(try setup.query("SELECT to_regclass('other.profiles') IS NULL").rows[0].bool(0))
    }

    /// Review of session 35: a first `matcher migrate` of a database whose app tables are in `public` (on the path)
    /// was refused (78) because another schema held a table named `profiles` (`archive.profiles`, a copy), with
    /// advice to set `-csearch_path=archive`, which would have pointed the worker at the copy; run and status said
    /// the same before it. A `profiles` that is not the one the path resolves is not the app's: only an
    /// installation (`matcher_runs`) elsewhere counts then.
    @Test func aStrayProfilesOffThePathDoesNotRefuseAFirstMigrate() throws {
        let database = try TestDatabase.create()
        let setup = try database.connect()
        defer { setup.close() }
        let appTables = try String(
            contentsOf: MigratedDatabase.sqlDirectory.appendingPathComponent("0001_app_tables.sql"), encoding: .utf8)
        try setup.execute(appTables)
        try setup.execute("CREATE SCHEMA archive; CREATE TABLE archive.profiles (id bigint PRIMARY KEY)")
        let unmigrated = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo)
        #expect(unmigrated.status == 78, "\(unmigrated.stderr)")
        #expect(unmigrated.stderr.contains("no version mark"), "\(unmigrated.stderr)")
        #expect(!unmigrated.stderr.contains("archive"), "\(unmigrated.stderr)")
        let migrated = try MatcherProcess.run(["migrate"], database: database.conninfo)
        #expect(migrated.status == 0, "\(migrated.stderr)")
        #expect(try setup.query("SELECT to_regclass('public.matcher_runs') IS NOT NULL").rows[0].bool(0))
        let ran = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo)
        #expect(ran.status == 0, "\(ran.stderr)")
        // With no profiles on the path, the stray one still counts (the app's tables may be there).
        let lost = try MatcherProcess.run(
            ["status"], database: database.conninfo, environment: ["PGOPTIONS": "-c search_path=nowhere"])
        #expect(lost.status == 78, "\(lost.stderr)")
        #expect(lost.stderr.contains("archive holds the app's profiles (no matcher_runs)"), "\(lost.stderr)")
    }

    /// What the line suggests is what to type: a search_path replaces the whole path (the schemas it reaches now are
    /// kept after the missing one: `-csearch_path=archive` alone would leave out the app's tables in `public`), and
    /// a mixed-case name is quoted as SQL writes it, in the path and in the GRANT.
    @Test func theSuggestedSearchPathKeepsWhatThePathReachesAndQuotesNames() throws {
        let database = try TestDatabase.create()
        let setup = try database.connect()
        defer { setup.close() }
        try setup.execute("CREATE SCHEMA \"App\"")
        let inApp = ["PGOPTIONS": "-c search_path=\"App\""]
        let migrated = try MatcherProcess.run(["migrate"], database: database.conninfo, environment: inApp)
        #expect(migrated.status == 0, "\(migrated.stderr)")
        let refused = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo)
        #expect(refused.status == 78, "\(refused.stderr)")
        #expect(
            refused.stderr.contains(
                "-csearch_path=\"App\",public in the connection string's options or in PGOPTIONS; "
                    + "it replaces the whole path"), "\(refused.stderr)")
        let followed = try MatcherProcess.run(
            ["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo,
            environment: ["PGOPTIONS": "-csearch_path=\"App\",public"])
        #expect(followed.status == 0, "\(followed.stderr)")

        let revoked = MigrationRunner.OutOfReach(
            schemas: [.init(name: "App", quoted: "\"App\"", installation: true, usable: false)],
            searchPath: "\"App\"", current: "", role: "Worker", quotedRole: "\"Worker\"", reached: "")
        let grant = MigrationRunner.describe(revoked)
        #expect(grant.contains("GRANT USAGE ON SCHEMA \"App\" TO \"Worker\";"), "\(grant)")
        #expect(grant.contains("-v schema=App does"), "\(grant)")
    }

    /// The same with the schema on the path but the worker's role without USAGE on it (PostgreSQL leaves such a schema
    /// out of the path): the line says to grant it.
    @Test func aWorkerWithoutUsageOnTheSchemaIsToldToGrantIt() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        let role = "usage_worker_\(database.name.suffix(12))"
        try connection.execute("CREATE ROLE \"\(role)\" LOGIN")
        defer { ChangeCaptureSecurityTests.dropDatabaseAndRole(database, role) }
        try OperatorScenarioTests.applyWorkerRole(database, role: role)
        try connection.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC, \"\(role)\"")
        let worker = try PostgresConnection.conninfo(database.conninfo, overriding: ["user": role])
        let refused = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: worker)
        #expect(refused.status == 78, "\(refused.stderr)")
        #expect(
            refused.stderr.contains("schema public holds matcher_runs (role \(role) has no USAGE on it)"),
            "\(refused.stderr)")
        #expect(refused.stderr.contains("GRANT USAGE ON SCHEMA public TO \(role)"), "\(refused.stderr)")
        let status = try MatcherProcess.run(["status"], database: worker)
        #expect(status.status == 78, "\(status.stderr)")
        #expect(status.stderr.contains("has no USAGE on it"), "\(status.stderr)")
        try connection.execute("GRANT USAGE ON SCHEMA public TO \"\(role)\"")
        let ran = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: worker)
        #expect(ran.status == 0, "\(ran.stderr)")
    }
}
