import Chronology
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Testing

/// The app's tables as real applications have them (review of session 33): partitioned, inherited, in another
/// schema. The worker either reads them whole and records every change, or refuses, naming the table.
@Suite struct AppTableShapeTests {
    /// `profiles` made a declaratively partitioned table (ids below 1000 and the rest), as an app may.
    private func partitionProfiles(_ connection: PostgresConnection) throws {
        try connection.execute(
            """
            ALTER TABLE profiles RENAME TO profiles_plain;
            CREATE TABLE profiles (LIKE profiles_plain INCLUDING DEFAULTS) PARTITION BY RANGE (id);
            ALTER TABLE profiles ADD PRIMARY KEY (id);
            CREATE TABLE profiles_low PARTITION OF profiles FOR VALUES FROM (MINVALUE) TO (1000);
            CREATE TABLE profiles_high PARTITION OF profiles FOR VALUES FROM (1000) TO (MAXVALUE);
            """)
    }

    /// An app's retype of `column` the usual way around `ALTER COLUMN … TYPE`: a new column, copied, and the names
    /// swapped, in one transaction.
    private func retypeBySwapping(_ column: String, _ connection: PostgresConnection) throws {
        try connection.execute(
            """
            BEGIN;
            ALTER TABLE profiles ADD COLUMN \(column)_new integer;
            UPDATE profiles SET \(column)_new = \(column);
            ALTER TABLE profiles RENAME COLUMN \(column) TO \(column)_old;
            ALTER TABLE profiles RENAME COLUMN \(column)_new TO \(column);
            COMMIT;
            """)
    }

    private func refusal(_ body: () throws -> Void) -> String {
        do {
            try body()
            return ""
        } catch let error as MigrationError {
            return error.description
        } catch {
            return "unexpected: \(error)"
        }
    }

    /// The retention sweep deletes `notifications` and `filter_matches` rows by row position, unique only within one
    /// table: on a partitioned `notifications` it deleted an unsent row of another partition. Refused before a run
    /// reads; `profiles` with inheritance children (whose rows its triggers do not see) too.
    @Test func tablesTheWorkerCannotKeepCorrectAreRefusedBeforeARunReads() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        #expect(refusal { try AppSchema.verifyBeforeReading(connection) } == "")
        try connection.execute(
            """
            ALTER TABLE notifications RENAME TO notifications_plain;
            CREATE TABLE notifications (LIKE notifications_plain) PARTITION BY RANGE (created_at);
            CREATE TABLE notifications_all PARTITION OF notifications FOR VALUES FROM (MINVALUE) TO (MAXVALUE);
            CREATE TABLE profiles_more () INHERITS (profiles);
            """)
        let refused = refusal { try AppSchema.verifyBeforeReading(connection) }
        #expect(refused.contains("public.notifications is partitioned"), "\(refused)")
        #expect(refused.contains("public.profiles has inheritance children"), "\(refused)")
        let outcome = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo)
        #expect(outcome.status == 78, "\(outcome.stderr)")
        #expect(outcome.stderr.contains("notifications is partitioned"), "\(outcome.stderr)")
    }

    /// The app's tables in schema `app`, the migrating role's search path starting with `wrk`: migration 0001
    /// created empty tables of the same names in `wrk`, which every run then read (no match, no error).
    @Test func migrateRefusesWhenTheAppsTablesAreInAnotherSchemaThanItWouldCreate() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try connection.execute(
            """
            CREATE SCHEMA app; CREATE SCHEMA wrk;
            CREATE TABLE app.profiles (id bigint PRIMARY KEY);
            SET search_path = wrk, app
            """)
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        let refused = refusal { try MigrationRunner(connection: connection).apply(migrations) }
        #expect(refused.contains("profiles is in schema app, but the worker's tables are created in wrk"), "\(refused)")
        let created = try connection.query("SELECT to_regclass('wrk.profiles') IS NOT NULL").rows[0].bool(0)
        #expect(!created)
        // An installation an older migrate already gave empty copies: runs read `wrk.profiles`; refused, named.
        try connection.execute("CREATE TABLE wrk.profiles (LIKE app.profiles)")
        let copies = refusal { try AppSchema.verifyBeforeReading(connection) }
        #expect(copies.contains("profiles is in schemas wrk, app of the search path"), "\(copies)")
    }

    /// The capture's functions are dollar-quoted with the schema's name inside (review of session 34): a schema
    /// renamed to hold `$body$` ended a body early, and `matcher migrate` ran what followed as the migrating role
    /// (here: emptied `blocks`). Refused before anything runs, naming the schema.
    @Test func aSchemaNameThatCouldEndTheCapturesQuotingIsRefused() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try connection.execute("CREATE SCHEMA s1; SET search_path = s1")
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        try MigrationRunner(connection: connection).apply(migrations)
        try connection.execute("INSERT INTO blocks VALUES (1, 2), (3, 4)")
        let hostile = "$body$SET check_function_bodies=0;TRUNCATE blocks;SELECT $body$"
        try connection.execute(
            "ALTER SCHEMA s1 RENAME TO \"\(hostile)\"; SET search_path = \"\(hostile)\"")
        let refused = refusal { try MigrationRunner(connection: connection).apply(migrations) }
        #expect(refused.contains("holds `$body$` in its name"), "\(refused)")
        let blocks = try connection.query("SELECT count(*) FROM blocks").rows[0].int64(0)
        #expect(blocks == 2)
        // A `$` that forms no tag of the capture's cannot end a body: such a schema migrates (and upgrades).
        let other = try TestDatabase.create()
        let plain = try other.connect()
        defer { plain.close() }
        try plain.execute(#"CREATE SCHEMA "app$prod"; SET search_path = "app$prod""#)
        #expect(refusal { try MigrationRunner(connection: plain).apply(migrations) } == "")
    }

    /// The schema's name is written as a string constant in the capture's owner block: with the operator's
    /// `options` turning `standard_conforming_strings` off after the worker's own setting, a backslash in it
    /// ended the constant early (42601 on the old code). Written as `E'...'`, it reads the same either way.
    @Test func aBackslashInTheSchemasNameIsQuotedUnderEitherStringSetting() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try connection.execute(
            #"CREATE SCHEMA "s2\'x"; SET search_path = "s2\'x"; SET standard_conforming_strings = off"#)
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        #expect(refusal { try MigrationRunner(connection: connection).apply(migrations) } == "")
        let functions = try connection.query(
            """
            SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = $1 AND p.proname LIKE 'matcher_record_%'
            """, [.text(#"s2\'x"#)]
        ).rows[0].int64(0)
        #expect(functions == 3)
    }

    /// `saved_filters` and `blocks` are only read by queries: a view of either is read, not refused.
    @Test func aViewOfBlocksIsRead() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try connection.execute(
            """
            ALTER TABLE blocks RENAME TO blocks_stored;
            CREATE VIEW blocks AS SELECT blocker_id, blocked_id FROM blocks_stored;
            """)
        #expect(refusal { try AppSchema.verifyBeforeReading(connection) } == "")
    }

    /// Partitioned `profiles` and the capture that compares every update (the app's trigger may set a watched
    /// value): the clones on partitions record no column dependency for their `WHEN` clause, which the column check
    /// read as watching nothing and refused every run (the last review of session 36). Runs go; a swap on the
    /// parent is still refused.
    @Test func aPartitionedTableWithTheEveryUpdateCaptureIsNotRefused() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try partitionProfiles(connection)
        try connection.execute(
            """
            CREATE FUNCTION app_touch() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN NEW.has_introduction := true; RETURN NEW; END $$;
            CREATE TRIGGER app_touch BEFORE UPDATE ON profiles FOR EACH ROW EXECUTE FUNCTION app_touch();
            """)
        try ChangeCapture.install(on: connection)
        #expect(refusal { try ChangeCapture.verifyCapturing(connection) } == "")
        #expect(try ChangeCapture.install(on: connection) == nil)
        try retypeBySwapping("smoking", connection)
        let refused = refusal { try ChangeCapture.verifyCapturing(connection) }
        #expect(refused.contains("matcher_profiles_changed (watches smoking_old, not smoking)"), "\(refused)")
        #expect(try ChangeCapture.install(on: connection) != nil)
        #expect(refusal { try ChangeCapture.verifyCapturing(connection) } == "")
    }

    /// An app that retypes a watched column by adding a new one and swapping the names (`ALTER COLUMN … TYPE` is
    /// refused on a trigger's column) left `UPDATE OF` watching the old column under its new name: every run
    /// succeeded without the new column's changes (review of session 36). Runs refuse; `migrate` mends it.
    @Test func aWatchedColumnSwappedForANewOneIsRefusedAndMended() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try AppTableWriter(connection: connection).upsertProfiles([World.profile(5)], updatedAt: ScenarioWorld.day1)
        #expect(refusal { try ChangeCapture.verifyCapturing(connection) } == "")
        try retypeBySwapping("smoking", connection)
        let refused = refusal { try ChangeCapture.verifyCapturing(connection) }
        #expect(
            refused.contains(
                "matcher_profiles_changed (watches smoking_old, not smoking): a watched column was renamed"),
            "\(refused)")
        let mended = try ChangeCapture.install(on: connection)
        #expect(mended?.contains("watching other columns") == true, "\(String(describing: mended))")
        #expect(refusal { try ChangeCapture.verifyCapturing(connection) } == "")
        try connection.execute("DELETE FROM matcher_profile_changes")
        try connection.execute("UPDATE profiles SET smoking = 3 WHERE id = 5")
        let recorded = try connection.query("SELECT profile_id FROM matcher_profile_changes").rows.map {
            try $0.int64(0)
        }
        #expect(recorded == [5])

        // The capture that compares every update (the app's BEFORE UPDATE trigger may set a watched value) has no
        // column list, and its WHEN comparison went astray the same way (review of session 36's diff).
        try connection.execute(
            """
            CREATE FUNCTION app_touch() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN NEW.has_introduction := true; RETURN NEW; END $$;
            CREATE TRIGGER app_touch BEFORE UPDATE ON profiles FOR EACH ROW EXECUTE FUNCTION app_touch();
            """)
        #expect(try ChangeCapture.install(on: connection) != nil)
        try retypeBySwapping("drinking", connection)
        let everyUpdate = refusal { try ChangeCapture.verifyCapturing(connection) }
        #expect(everyUpdate.contains("(watches drinking_old, not drinking)"), "\(everyUpdate)")
        #expect(try ChangeCapture.install(on: connection) != nil)
        #expect(refusal { try ChangeCapture.verifyCapturing(connection) } == "")
        try connection.execute("DELETE FROM matcher_profile_changes")
        try connection.execute("UPDATE profiles SET drinking = 2 WHERE id = 5")
        let recordedAgain = try connection.query("SELECT profile_id FROM matcher_profile_changes").rows.map {
            try $0.int64(0)
        }
        #expect(recordedAgain == [5])
    }

    /// A declaratively partitioned `profiles`: the capture's row triggers are cloned onto each partition, where one
    /// can be disabled alone. A run refuses while one is; `migrate` mends it, and the partition's edits are recorded.
    @Test func aPartitionWhoseCaptureTriggerIsDisabledIsRefusedAndMended() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try partitionProfiles(connection)
        try ChangeCapture.install(on: connection)
        #expect(refusal { try ChangeCapture.verifyCapturing(connection) } == "")
        #expect(refusal { try AppSchema.verifyBeforeReading(connection) } == "")
        try connection.execute("ALTER TABLE profiles_high DISABLE TRIGGER matcher_profiles_inserted")
        let refused = refusal { try ChangeCapture.verifyCapturing(connection) }
        #expect(refused.contains("matcher_profiles_inserted on profiles_high"), "\(refused)")
        let mended = try ChangeCapture.install(on: connection)
        #expect(
            mended == "disabled trigger(s) matcher_profiles_inserted on profiles_high", "\(String(describing: mended))")
        #expect(refusal { try ChangeCapture.verifyCapturing(connection) } == "")
        try connection.execute("DELETE FROM matcher_profile_changes")
        try AppTableWriter(connection: connection).upsertProfiles(
            [World.profile(5), World.profile(5_000)], updatedAt: ScenarioWorld.day1)
        let recorded = try connection.query("SELECT profile_id FROM matcher_profile_changes ORDER BY 1").rows.map {
            try $0.int64(0)
        }
        #expect(recorded == [5, 5_000])
        // A BEFORE UPDATE trigger of one partition's own sets values `UPDATE OF` does not see, as one on the parent.
        #expect(try ChangeCapture.mismatch(on: connection) == nil)
        // One that sets no watched value (read from its source) needs nothing.
        try connection.execute(
            """
            CREATE FUNCTION app_keep() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
            CREATE TRIGGER app_keep BEFORE UPDATE ON profiles_high FOR EACH ROW EXECUTE FUNCTION app_keep();
            """)
        #expect(try ChangeCapture.mismatch(on: connection) == nil)
        try connection.execute(
            """
            CREATE FUNCTION app_touch() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN NEW.verified := true; RETURN NEW; END $$;
            CREATE TRIGGER app_touch BEFORE UPDATE ON profiles_high FOR EACH ROW EXECUTE FUNCTION app_touch();
            """)
        let warning = try ChangeCapture.mismatch(on: connection)
        #expect(warning?.contains("app_touch (it names NEW.verified)") == true, "\(String(describing: warning))")
        #expect(warning?.contains("app_keep") == false, "\(String(describing: warning))")
    }

    /// Blocks in an inheritance child of `blocks` were left out of the run's read (`COPY blocks TO` reads the parent
    /// alone), so a blocked pair was recorded; read through a query, the child's rows count.
    @Test func blocksInAnInheritanceChildAreRead() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        _ = try ScenarioWorld.ownerAndTwoWomen(connection)
        try connection.execute(
            "CREATE TABLE blocks_archive () INHERITS (blocks); INSERT INTO blocks_archive (blocker_id, blocked_id) VALUES (11, 1)"
        )
        let store = PostgresMatchingStore(connection: connection) { try database.connect() }
        _ = try RunMatching(MatchingRepositories(store: store)).execute(.init(now: ScenarioWorld.day1))
        let pairs = try connection.query("SELECT profile_id FROM filter_matches ORDER BY 1").rows.map {
            try $0.int64(0)
        }
        #expect(pairs == [10])
    }
}
