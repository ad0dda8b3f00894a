import Foundation
import Matching
import MatchingPostgres
import PostgresClient
import PostgresTestSupport
import Testing

/// `matcher migrate` on the app's existing database (issue 14): it adds only the worker's objects,
/// touches no app row, and refuses (a configuration error, exit 78) when a column the worker reads is
/// missing or of a type it cannot read.
@Suite struct AppSchemaMigrationTests {
    /// The app's own `profiles`: every item column nullable, wider integer types here and there, and
    /// columns of its own.
    static func appProfilesDDL(replacing overrides: [String: String?] = [:]) -> String {
        var columns = [
            "id bigint PRIMARY KEY", "nickname text NOT NULL DEFAULT ''", "email text", "status integer",
            "plan smallint", "last_login_at timestamptz", "created_at timestamptz DEFAULT now()",
            "updated_at timestamptz DEFAULT now()", "bio text",
        ]
        for item in MasterItem.all where !["last_login_at", "created_at"].contains(item.column) {
            let type: String =
                switch item.storage {
                case .smallint: item.key == "residence" ? "integer" : "smallint"
                case .nullableSmallint: "integer"
                case .nullableDate: "date"
                case .smallintArray: "smallint[]"
                case .integerArray: "bigint[]"
                case .boolean: "boolean"
                case .timestamptz: "timestamptz"
                }
            if let override = overrides[item.column] {
                if let override { columns.append("\(item.column) \(override)") }
            } else {
                columns.append("\(item.column) \(type)")
            }
        }
        for (column, override) in overrides where ["last_login_at", "created_at", "status", "plan"].contains(column) {
            columns.removeAll { $0.hasPrefix(column + " ") }
            if let override { columns.append("\(column) \(override)") }
        }
        return "CREATE TABLE profiles (" + columns.joined(separator: ", ") + ")"
    }

    static func createAppTables(_ c: PostgresConnection, profiles: String) throws {
        try c.execute(profiles)
        try c.execute(
            """
            CREATE TABLE saved_filters (id bigint PRIMARY KEY, owner_id bigint, name varchar(200), conditions jsonb,
                notify boolean, notify_every interval, created_at timestamptz, updated_at timestamptz,
                deleted_at timestamptz, color text);
            CREATE TABLE blocks (blocker_id bigint NOT NULL, blocked_id bigint NOT NULL, reason text,
                PRIMARY KEY (blocker_id, blocked_id));
            INSERT INTO profiles (id, status, plan, nickname, languages) VALUES (1, 1, 0, 'a', '{1,NULL}'), (2, NULL, NULL, 'b', NULL);
            INSERT INTO saved_filters (id, owner_id, conditions) VALUES (10, 1, '{"gender": {"anyOf": [2]}}');
            INSERT INTO blocks VALUES (1, 2, 'spam');
            """)
    }

    static func appRows(_ c: PostgresConnection) throws -> [String] {
        try c.query(
            """
            SELECT (SELECT string_agg(p::text, '|' ORDER BY id) FROM profiles p)
                || (SELECT string_agg(f::text, '|' ORDER BY id) FROM saved_filters f)
                || (SELECT string_agg(b::text, '|') FROM blocks b)
            """
        ).rows.map { try $0.string(0) }
    }

    static func columns(_ c: PostgresConnection, _ table: String) throws -> [String] {
        try c.query(
            """
            SELECT column_name || ' ' || data_type || ' ' || is_nullable FROM information_schema.columns
            WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position
            """, [.text(table)]
        ).rows.map { try $0.string(0) }
    }

    @Test func anExistingAppSchemaGetsOnlyTheWorkersObjects() throws {
        let database = try TestDatabase.create()
        let c = try database.connect()
        try Self.createAppTables(c, profiles: Self.appProfilesDDL())
        let rowsBefore = try Self.appRows(c)
        let shapes = try ["profiles", "saved_filters", "blocks"].map { try Self.columns(c, $0) }

        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        let applied = try MigrationRunner(connection: c).apply(migrations)
        #expect(applied.count == migrations.count)
        #expect(try Self.appRows(c) == rowsBefore)
        #expect(try ["profiles", "saved_filters", "blocks"].map { try Self.columns(c, $0) } == shapes)
        let tables = Set(
            try c.query("SELECT tablename::text FROM pg_tables WHERE schemaname = 'public'").rows.map {
                try $0.string(0)
            })
        #expect(tables.isSuperset(of: ["filter_matches", "notifications", "matcher_runs", "matcher_quarantine"]))
        #expect(try MigrationRunner(connection: c).apply(migrations).isEmpty)

        // The worker reads that schema: a run over it succeeds (NULL status, NULL array element and all).
        let store = PostgresMatchingStore(connection: c) { try database.connect() }
        let summary = try RunMatching(MatchingRepositories(store: store))
            .execute(.init(now: ScenarioWorld.day1))
        #expect(summary.counters.candidates == 2)
        #expect(summary.counters.oddValues >= 2)
        #expect(summary.counters.filtersEvaluated == 1)
    }

    /// The worker's output tables created by another team from runs.md's column list before the first `matcher
    /// migrate` (review of session 34): 0005 failed on the contract's `silent`, and once past it every run exited
    /// 78 on `notifications.run_id`, which the contract does not list, telling the operator to run the migrate that
    /// had just said "up to date".
    @Test func outputTablesCreatedFromTheContractBeforeTheFirstMigrateAreCompleted() throws {
        let database = try TestDatabase.create()
        let c = try database.connect()
        defer { c.close() }
        try c.execute(
            """
            CREATE TABLE filter_matches (filter_id bigint, profile_id bigint, matched_at timestamptz, run_id bigint,
                notification_id bigint, silent boolean NOT NULL DEFAULT false, mutual boolean NOT NULL DEFAULT false,
                PRIMARY KEY (filter_id, profile_id));
            CREATE TABLE notifications (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, recipient_id bigint,
                filter_id bigint, match_count int, mutual_count int, profile_ids bigint[], created_at timestamptz,
                sent_at timestamptz);
            """)
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        #expect(try MigrationRunner(connection: c).apply(migrations).count == migrations.count)
        _ = try ScenarioWorld.ownerAndTwoWomen(c)
        let outcome = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: database.conninfo)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let written = try c.query(
            """
            SELECT (SELECT count(*) FROM filter_matches WHERE run_id IS NOT NULL),
                   (SELECT count(*) FROM notifications WHERE run_id IS NOT NULL AND match_count = 2)
            """
        ).rows[0]
        #expect(try written.int64(0) == 2)
        #expect(try written.int64(1) == 1)
    }

    /// A run's match counters are bigint (migration 0020, review of session 34): a backfill of every filter at
    /// 1M x 100k with a cap above about 21k records more than 2^31 pairs, and the unit that passed it failed
    /// "integer out of range" on every resume.
    @Test func aRunsMatchCountersGoPastTwoBillion() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        _ = try ScenarioWorld.ownerAndTwoWomen(connection)
        let store = PostgresMatchingStore(connection: connection) { try database.connect() }
        _ = try RunMatching(MatchingRepositories(store: store)).execute(.init(now: ScenarioWorld.day1))
        try connection.execute(
            """
            UPDATE matcher_runs SET matches_written = matches_written + 3000000000,
                matches_mutual = matches_mutual + 3000000000, status = 'failed'
            """)
        let run = try #require(try store.interruptedRun(kind: .run, shard: .all))
        #expect(run.counters.matchesWritten == 3_000_000_002)
        #expect(run.counters.matchesMutual == 3_000_000_000)
    }

    @Test func aMissingOrIncompatibleColumnIsRefusedBeforeAnythingChanges() throws {
        let database = try TestDatabase.create()
        let c = try database.connect()
        try Self.createAppTables(
            c,
            profiles: Self.appProfilesDDL(replacing: [
                "languages": "text[]", "hometown": nil, "last_login_at": "timestamp without time zone",
            ]))
        let rowsBefore = try Self.appRows(c)
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        let refused = #expect(throws: MigrationError.self) { try MigrationRunner(connection: c).apply(migrations) }
        let message = refused?.description ?? ""
        #expect(refused?.failureKind == .configuration)
        #expect(message.contains("profiles.languages is text[]; the worker reads it as an integer array"), "\(message)")
        #expect(message.contains("profiles.hometown is missing"), "\(message)")
        #expect(message.contains("profiles.last_login_at is timestamp without time zone"), "\(message)")
        #expect(message.contains("then run matcher migrate again"))
        #expect(try Self.appRows(c) == rowsBefore)
        let bookkeeping = try c.query("SELECT to_regclass('matcher_schema_migrations') IS NULL").rows[0].bool(0)
        #expect(bookkeeping, "nothing is created when the schema is refused")
    }

    @Test func aDatabaseMigratedWithTheOldFirstMigrationIsNotToldItWasEdited() throws {
        let database = try MigratedDatabase.create()
        let c = try database.connect()
        try c.execute("UPDATE matcher_schema_migrations SET checksum = '69e3dc691b2770aa' WHERE version = 1")
        let migrations = try MigrationRunner.load(from: MigratedDatabase.sqlDirectory)
        #expect(try MigrationRunner(connection: c).apply(migrations).isEmpty)
        let recorded = try c.query("SELECT checksum FROM matcher_schema_migrations WHERE version = 1").rows[0].string(0)
        #expect(recorded == migrations[0].checksum)
    }
}
