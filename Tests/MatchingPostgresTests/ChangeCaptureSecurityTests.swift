import Chronology
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Testing

/// The change capture runs with its owner's rights (SECURITY DEFINER). A session of the app's role (no
/// superuser, allowed temporary objects) must not be able to make it run code or write tables of its own.
@Suite(.serialized) struct ChangeCaptureSecurityTests {
    @Test func aTemporaryObjectCannotHijackTheCaptureFunction() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        let app = "matcher_test_app_\(database.name.suffix(12))"
        try connection.execute(
            """
            CREATE ROLE "\(app)" NOLOGIN NOSUPERUSER;
            GRANT TEMPORARY ON DATABASE "\(database.name)" TO "\(app)";
            GRANT USAGE ON SCHEMA public TO "\(app)";
            GRANT SELECT, INSERT, UPDATE ON profiles TO "\(app)";
            """)
        defer { try? connection.execute("DROP OWNED BY \"\(app)\"; DROP ROLE \"\(app)\"") }
        try AppTableWriter(connection: connection).upsertProfiles([World.profile(1)], updatedAt: ScenarioWorld.day1)
        let before = try connection.query("SELECT changed_by::text FROM matcher_profile_changes WHERE profile_id = 1")
            .rows[0].string(0)

        // As the app: plant a look-alike of the capture's table in pg_temp (first in an unpinned search_path; the
        // pinned one lists it last, so an unqualified name in the function would find it), then write a profile.
        // Functions and operators are never looked up in pg_temp unless named with it, so a relation is what a
        // temporary object could capture; the pinned path itself is checked below.
        try connection.execute(
            """
            SET ROLE "\(app)";
            CREATE TEMP TABLE matcher_profile_changes (profile_id bigint PRIMARY KEY, changed_by xid8, changed_at timestamptz);
            SET search_path = pg_temp, public;
            UPDATE public.profiles SET smoking = 5 WHERE id = 1;
            INSERT INTO public.profiles (id, status) VALUES (2, 1);
            """)
        let planted = try connection.query("SELECT count(*) FROM pg_temp.matcher_profile_changes").rows[0].int64(0)
        try connection.execute("RESET ROLE; RESET search_path")
        #expect(planted == 0)
        // The real table recorded both changes, as the capture's owner.
        let after = try connection.query(
            """
            SELECT profile_id, changed_by::text FROM public.matcher_profile_changes WHERE profile_id IN (1, 2) ORDER BY 1
            """
        ).rows.map { (try $0.int64(0), try $0.string(1)) }
        #expect(after.map(\.0) == [1, 2])
        #expect(after.first?.1 != before)
        // The functions: definer, owned by a role that is no superuser, search path pinned, no EXECUTE for PUBLIC.
        let functions = try connection.query(
            """
            SELECT p.proname, p.prosecdef, r.rolsuper, r.rolname, array_to_string(p.proconfig, ','),
                   has_function_privilege('public', p.oid, 'EXECUTE')
            FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
            WHERE p.proname IN ('matcher_record_changed_profile', 'matcher_record_inserted_profiles',
                                'matcher_record_deleted_profiles') ORDER BY 1
            """
        ).rows
        #expect(functions.count == 3)
        for row in functions {
            #expect(try row.bool(1))
            #expect(try !row.bool(2))
            #expect(try row.string(3) == ChangeCapture.ownerRole)
            #expect(try row.string(4) == "search_path=pg_catalog, pg_temp")
            #expect(try !row.bool(5))
        }
    }

    /// A login role that is no superuser and may use `matcher_capture` (created too, once per cluster), as an
    /// administrator sets up a migrating role (deploy/README.md), then `then`.
    static func createMigrator(_ role: String, on admin: PostgresConnection, then: String) throws {
        try admin.execute(
            """
            DO $$ BEGIN
                CREATE ROLE \(ChangeCapture.ownerRole) NOLOGIN NOSUPERUSER NOINHERIT;
            EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
            END $$;
            CREATE ROLE "\(role)" LOGIN NOSUPERUSER;
            GRANT \(ChangeCapture.ownerRole) TO "\(role)";
            \(then);
            """)
    }

    /// Drops the test's database, then its role, from a connection to another database (roles are the whole
    /// cluster's: one left behind would keep `matcher_capture`'s membership in every later test database).
    static func dropDatabaseAndRole(_ database: TestDatabase, _ role: String) {
        do {
            let cluster = try PostgresConnection(TestDatabase.adminConninfo)
            defer { cluster.close() }
            try cluster.execute("DROP DATABASE IF EXISTS \"\(database.name)\" WITH (FORCE)")
            try cluster.execute("DROP ROLE IF EXISTS \"\(role)\"")
        } catch {
            Issue.record("cleanup of role \(role): \(error)")
        }
    }

    /// A migrator that is no superuser (the database's owner, granted `matcher_capture` as the README says) hands
    /// the capture's functions to that role: a new owner needs CREATE on the schema, which it is lent for the
    /// change (review of session 23: migration 5 failed with "permission denied for schema public").
    @Test func aMigratorThatIsNoSuperuserHandsTheCaptureToItsRole() throws {
        let database = try TestDatabase.create()
        let admin = try database.connect()
        defer { admin.close() }
        let owner = "matcher_test_owner_\(database.name.suffix(12))"
        try Self.createMigrator(owner, on: admin, then: "ALTER DATABASE \"\(database.name)\" OWNER TO \"\(owner)\"")
        defer { Self.dropDatabaseAndRole(database, "\(owner)") }
        let connection = try PostgresConnection(database.conninfo, overriding: ["user": owner])
        defer { connection.close() }
        let isSuperuser = try connection.query("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").rows[0]
            .bool(0)
        #expect(!isSuperuser)
        try MigrationRunner(connection: connection).apply(try MigrationRunner.load(from: MigratedDatabase.sqlDirectory))
        let owners = try connection.query(
            """
            SELECT DISTINCT r.rolname::text FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner
            WHERE p.proname IN ('matcher_record_changed_profile', 'matcher_record_inserted_profiles',
                                'matcher_record_deleted_profiles')
            """
        ).rows.map { try $0.string(0) }
        #expect(owners == [ChangeCapture.ownerRole])
        #expect(try ChangeCapture.ownerProblem(on: connection) == nil)
        let lent = try connection.query(
            "SELECT has_schema_privilege($1, 'public', 'CREATE')", [.text(ChangeCapture.ownerRole)]
        ).rows[0].bool(0)
        #expect(!lent, "CREATE on the schema is given back")
    }

    /// A migrator that can use the role but cannot lend it CREATE on the schema (granted CREATE itself, without
    /// the grant option) keeps the functions, is told so, and a later `matcher migrate` does not reinstall the
    /// capture again and again (each reinstall takes an exclusive lock on profiles).
    @Test func aMigratorThatCannotHandTheCaptureOverSaysSoOnce() throws {
        let database = try TestDatabase.create()
        let admin = try database.connect()
        defer { admin.close() }
        let migrator = "matcher_test_migrator_\(database.name.suffix(12))"
        try Self.createMigrator(migrator, on: admin, then: "GRANT CREATE ON SCHEMA public TO \"\(migrator)\"")
        defer { Self.dropDatabaseAndRole(database, "\(migrator)") }
        let connection = try PostgresConnection(database.conninfo, overriding: ["user": migrator])
        defer { connection.close() }
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        try MigrationRunner(connection: connection).apply(migrations)
        let problem = try #require(try ChangeCapture.ownerProblem(on: connection))
        #expect(problem.contains("owned by \(migrator)") && problem.contains("CREATE on the schema"), "\(problem)")
        let trigger = {
            try admin.query("SELECT oid::bigint FROM pg_trigger WHERE tgname = 'matcher_profiles_changed'").rows[0]
                .int64(0)
        }
        let before = try trigger()
        try MigrationRunner(connection: connection).apply(migrations)
        #expect(try trigger() == before, "not reinstalled")
    }

    /// An interrupted first run is completed with every profile, those that predate the change capture included.
    @Test func resumingAnInterruptedFirstRunKeepsProfilesThatPredateTheCapture() throws {
        var scenario = ScenarioWorld(seed: 31)
        let world = scenario.day1(profiles: 150, filters: 30)
        func prepared(_ label: String) throws -> (PostgresConnection, PostgresMatchingStore) {
            let database = try MigratedDatabase.create(label)
            let connection = try database.connect()
            try AppTableWriter(connection: connection).upsertProfiles(world.profiles, updatedAt: ScenarioWorld.day1)
            try AppTableWriter(connection: connection).upsertFilters(world.filters)
            // Profiles the app wrote before the worker's migrations: no change recorded for them.
            try connection.execute("DELETE FROM matcher_profile_changes WHERE profile_id % 3 = 0")
            return (connection, PostgresMatchingStore(connection: connection) { try database.connect() })
        }
        let (clean, cleanStore) = try prepared("first_run_clean")
        _ = try RunMatching(MatchingRepositories(store: cleanStore), options: PassOptions(unitFilterLimit: 4)).execute(
            .init(now: ScenarioWorld.day1))

        let (connection, store) = try prepared("first_run_interrupted")
        #expect(throws: FailingMatches.InjectedFailure.self) {
            try RunMatching(
                MatchingRepositories(store: store).replacing(matches: FailingMatches(store, commitsBeforeFailure: 2)),
                options: PassOptions(unitFilterLimit: 4)
            )
            .execute(.init(now: ScenarioWorld.day1))
        }
        let resumed = try RunMatching(MatchingRepositories(store: store), options: PassOptions(unitFilterLimit: 4))
            .execute(.init(now: ScenarioWorld.day2))
        #expect(resumed.resumedRunId != nil)
        let rows = try Rows.of(connection).matches
        #expect(rows == (try Rows.of(clean).matches))
        let predating = try connection.query(
            """
            SELECT count(*) FROM filter_matches WHERE profile_id % 3 = 0 AND matched_at = $1
            """, [.timestamptz(ScenarioWorld.day1)]
        ).rows[0].int64(0)
        #expect(predating > 0)
    }
}

/// The worker's schema need not be `public`: migrations, the change capture and a run work in a schema of
/// the operator's choosing (the connection's search_path), and nothing is created in `public`.
@Suite struct NonPublicSchemaTests {
    @Test func migrationsAndARunWorkInAnotherSchema() throws {
        let database = try TestDatabase.create()
        let setup = try database.connect()
        try setup.execute("CREATE SCHEMA matcher_app")
        let conninfo = database.conninfo
        let open: @Sendable () throws -> PostgresConnection = {
            try PostgresConnection(conninfo, options: ["options": "-c search_path=matcher_app"])
        }
        let connection = try open()
        try MigrationRunner(connection: connection).apply(try MigrationRunner.load(from: MigratedDatabase.sqlDirectory))
        let inPublic = try setup.query(
            """
            SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
            """
        ).rows[0].int64(0)
        #expect(inPublic == 0)
        let body = try setup.query(
            """
            SELECT pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'matcher_app' AND p.proname = 'matcher_record_changed_profile'
            """
        ).rows[0].string(0)
        #expect(body.contains("INSERT INTO \"matcher_app\".matcher_profile_changes"))

        let men = (1...2).map { World.profile(Int64($0), gender: 1) }
        try AppTableWriter(connection: connection).upsertProfiles(
            men + (10...12).map { World.profile(Int64($0)) },
            updatedAt: ScenarioWorld.day1)
        try AppTableWriter(connection: connection).upsertFilters(men.map { World.filter($0.id * 100, owner: $0.id) })
        let store = PostgresMatchingStore(connection: connection) { try open() }
        let run = try RunMatching(MatchingRepositories(store: store))
            .execute(.init(now: ScenarioWorld.day1))
        #expect(run.counters.candidates == 5)
        #expect(run.counters.matchesWritten == 6)
        #expect(run.counters.notificationsWritten == 2)
    }

    /// Found by review in session 23: migration 3 pinned the old capture function's search path to `public` by
    /// name, so in another schema every write to profiles failed (the function no longer found its table)
    /// from its commit until migration 5 replaced it, and for as long as migration 5 could not be applied.
    @Test func theAppCanWriteProfilesBetweenMigrationsThreeAndFive() throws {
        let database = try TestDatabase.create()
        let setup = try database.connect()
        try setup.execute("CREATE SCHEMA matcher_app")
        let connection = try PostgresConnection(
            database.conninfo, options: ["options": "-c search_path=matcher_app"])
        let all = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        try MigrationRunner(connection: connection).apply(all.filter { $0.version <= 4 })
        try connection.execute(
            """
            INSERT INTO profiles (id, gender, birth_date, residence, status, last_login_at, created_at, updated_at)
            VALUES (1, 2, '1995-01-01', 13, 1, now(), now(), now())
            """)
        try connection.execute("UPDATE profiles SET last_login_at = now(), residence = 27 WHERE id = 1")
        let recorded = try connection.query("SELECT count(*) FROM matcher_profile_changes").rows[0].int64(0)
        #expect(recorded == 1)
    }
}
