import Foundation
import Matching
import PostgresClient

/// One numbered file of `sql/`: `0001_app_tables.sql` is version 1.
public struct Migration: Sendable, Hashable {
    public let version: Int
    public let name: String
    public let sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// FNV-1a of the text, to notice a migration edited after it was applied.
    public var checksum: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in sql.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16)
    }
}

/// Why `matcher migrate` (or a check of the schema) cannot go on. A configuration failure (exit 78)
/// unless said otherwise: retrying will not help until someone changes the schema or the files.
public struct MigrationError: Error, Sendable, CustomStringConvertible, ClassifiedError {
    public let description: String
    public let failureKind: FailureKind
    public init(description: String, failureKind: FailureKind = .configuration) {
        self.description = description
        self.failureKind = failureKind
    }
}

/// Applies the migrations of `sql/` in order, each once, in its own transaction, recording applied
/// versions in `matcher_schema_migrations`. Safe to repeat and to run concurrently.
///
/// A migration's statements run without a statement timeout (an index build takes as long as its table's size
/// requires) and without the client's call deadline, but each waits at most `lockTimeoutSeconds` for a lock
/// another session holds: a table lock request that waits also makes every later request on that table wait
/// behind it, so a migration queued behind one long transaction would stall the app's reads and logins.
/// It gives up instead, whole (`failureKind` `.locked`, exit 75), and `matcher migrate` can be run again.
public struct MigrationRunner {
    private let connection: PostgresConnection
    private let lockTimeoutSeconds: Int
    private let newInstallation: Bool

    /// - Parameters:
    ///   - lockTimeoutSeconds: how long a migration's statement may wait for a table lock; 0 waits for as long as
    ///     it takes.
    ///   - newInstallation: create the worker's tables where the search path reaches none even though another
    ///     schema of the database holds an installation (`matcher migrate --new-installation`); refused otherwise.
    public init(
        connection: PostgresConnection, lockTimeoutSeconds: Int = MigrationRunner.defaultLockTimeoutSeconds,
        newInstallation: Bool = false
    ) {
        self.connection = connection
        self.lockTimeoutSeconds = min(max(0, lockTimeoutSeconds), PostgresConnection.maximumTimeoutSeconds)
        self.newInstallation = newInstallation
    }

    /// `matcher migrate --lock-timeout`'s default.
    public static let defaultLockTimeoutSeconds = 10

    /// Reads `NNNN_name.sql` files from `directory`, ordered by number.
    public static func load(from directory: URL) throws -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MigrationError(
                description: "cannot read migrations in \(directory.path): \(error.localizedDescription)")
        }
        var migrations: [Migration] = []
        for name in names where name.hasSuffix(".sql") {
            let stem = name.dropLast(4)
            guard let underscore = stem.firstIndex(of: "_"), let version = Int(stem[..<underscore]) else { continue }
            let sql = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            migrations.append(
                Migration(version: version, name: String(stem[stem.index(after: underscore)...]), sql: sql))
        }
        migrations.sort { $0.version < $1.version }
        for (a, b) in zip(migrations, migrations.dropFirst()) where a.version == b.version {
            throw MigrationError(description: "two migrations numbered \(a.version) in \(directory.path)")
        }
        guard !migrations.isEmpty else {
            throw MigrationError(description: "no migrations (NNNN_name.sql) in \(directory.path)")
        }
        // Numbered from 1 without a gap: a file missing from an installation would otherwise be skipped, the
        // version mark would pass it, and the file, installed later, would be applied out of order (review of
        // session 32).
        if let gap = migrations.enumerated().first(where: { $0.element.version != $0.offset + 1 }) {
            throw MigrationError(
                description: "migration \(String(format: "%04d", gap.offset + 1)) is missing from \(directory.path) "
                    + "(found \(String(format: "%04d", gap.element.version)) next): install every file of the "
                    + "release's sql/ folder; nothing was changed")
        }
        return migrations
    }

    /// Refuses a folder whose newest migration is not the one this build needs (`schemaVersion`): an older
    /// folder (the binary replaced alone, `MATCHER_SQL_DIR` naming the last release's, the search falling back
    /// to another `sql/`) left `migrate` saying "up to date" while every run refused for want of the newer
    /// schema; a newer one would install a capture and tables this build does not know (review of session 33).
    public static func verifyFolder(_ migrations: [Migration], in directory: URL) throws {
        let newest = migrations.last?.version ?? 0
        guard newest != schemaVersion else { return }
        let found = String(format: "%04d", newest), needed = String(format: "%04d", schemaVersion)
        throw MigrationError(
            description: newest < schemaVersion
                ? "the migrations in \(directory.path) end at \(found), and this matcher needs \(needed): "
                    + "install this release's sql/ folder (or name it with --sql-dir or MATCHER_SQL_DIR); "
                    + "nothing was changed"
                : "the migrations in \(directory.path) go up to \(found), newer than this matcher (\(needed)): "
                    + "run the migrate of the binary released with that folder; nothing was changed")
    }

    /// Finds the project's `sql/` folder: `MATCHER_SQL_DIR`, then `share/matcher/sql` beside the
    /// executable's prefix, then the nearest `sql/` above the executable or the working directory.
    public static func defaultDirectory(executable: URL = MigrationRunner.currentExecutable) -> URL? {
        let fm = FileManager.default
        func isMigrations(_ url: URL) -> Bool {
            fm.fileExists(atPath: url.appendingPathComponent("0001_app_tables.sql").path)
        }
        if let env = ProcessInfo.processInfo.environment["MATCHER_SQL_DIR"], !env.isEmpty {
            return URL(fileURLWithPath: env)
        }
        let binDir = executable.resolvingSymlinksInPath().deletingLastPathComponent()
        let shared = binDir.deletingLastPathComponent().appendingPathComponent("share/matcher/sql")
        if isMigrations(shared) { return shared }
        for start in [binDir, URL(fileURLWithPath: fm.currentDirectoryPath)] {
            var dir = start
            for _ in 0..<8 {
                let candidate = dir.appendingPathComponent("sql")
                if isMigrations(candidate) { return candidate }
                let parent = dir.deletingLastPathComponent()
                if parent.path == dir.path { break }
                dir = parent
            }
        }
        return nil
    }

    /// What one `matcher migrate` did.
    public struct Outcome: Sendable {
        /// The migrations applied now (empty when the files were all applied before).
        public let applied: [Migration]
        /// Why the change capture was installed again, nil when the one in place was kept: an "up to date" that
        /// mended a disabled or missing trigger said nothing of it (review of session 36).
        public let captureReinstalled: String?
    }

    /// Applies what is missing; returns the migrations applied now (empty when up to date).
    @discardableResult
    public func apply(_ migrations: [Migration]) throws -> [Migration] {
        try applyReporting(migrations).applied
    }

    /// `apply`, saying also whether it installed the change capture again, and why.
    public func applyReporting(_ migrations: [Migration]) throws -> Outcome {
        // An installation this session cannot see first: migrating here would make a second, empty one.
        if !newInstallation {
            try refuseSecondInstallation()
        }
        // The app's existing tables next: refuse before changing anything if the worker cannot read them.
        try AppSchema.verify(connection, requireTables: false)
        let callTimeout = connection.callTimeout
        connection.callTimeout = nil
        defer { connection.callTimeout = callTimeout }
        // Every write of the runner holds the migrators' lock: two `matcher migrate` started at once would
        // otherwise both create the bookkeeping table, or both replace the capture's functions, and one fail.
        // The mark and version it replaces by "migrating", if it does.
        let previousMark = try connection.transaction { tx -> (comment: String?, version: Int32?)? in
            try Self.takeMigratorsLock(tx)
            try tx.execute(
                """
                CREATE TABLE IF NOT EXISTS matcher_schema_migrations (
                    version integer PRIMARY KEY,
                    name text NOT NULL,
                    checksum text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
                )
                """)
            // An older binary's `migrate` on a newer schema would install its older change capture (another
            // catalogue, other rules) over the newer one and still mark the newest version, so the newer runs
            // would go on with changes unrecorded (review of session 29). Rolling back is not supported: refused.
            let newest = try tx.query("SELECT max(version) FROM matcher_schema_migrations").rows[0].optionalInt32(0)
            let known = migrations.map(\.version).max() ?? 0
            if let newest, Int(newest) > known {
                throw MigrationError(
                    description:
                        "this database's worker schema is at version \(newest), newer than this matcher's migrations "
                        + "(up to \(known)): run matcher migrate with the newer binary; nothing was changed")
            }
            // Before anything is applied: the capture, which migration 5 installs, cannot be written in such a schema.
            try ChangeCapture.refuseUnsafeSchema(
                try tx.query("SELECT current_schema()").rows[0].optionalString(0) ?? "")
            // Something to apply: not while a run or backfill writes (review of session 33: an older binary's units
            // between two migrations, 0005 listing waiting matches that the old units then notified without the
            // list, put a match in a second digest and left the old units' new matches unlisted for good). And the
            // mark says "migrating" until the last one is applied, so that binaries that read it (from migration
            // 14 on) refuse a database migrated part way.
            if Int(newest ?? 0) < known {
                let (runKey, _) = PostgresMatchingStore.lockKeys(kind: .run, shard: .all)
                let (backfillKey, _) = PostgresMatchingStore.lockKeys(kind: .backfill, shard: .all)
                let holding = try tx.query(
                    """
                    SELECT count(*) FROM pg_locks l
                    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                      AND l.classid IN ($1::bigint::oid, $2::bigint::oid)
                    """, [.int8(Int64(runKey)), .int8(Int64(backfillKey))]
                ).rows[0].int64(0)
                if holding > 0 {
                    throw MigrationError(
                        description:
                            "\(holding) run(s) or backfill(s) of this database hold their lock: stop the timers "
                            + "(systemctl stop 'matcher*.timer', or suspend the CronJob), wait for the running ones to "
                            + "end, then run matcher migrate again; nothing was changed",
                        failureKind: .locked)
                }
                let mark = try tx.query(
                    "SELECT to_regclass('matcher_runs') IS NOT NULL, obj_description(to_regclass('matcher_runs'), 'pg_class')"
                ).rows[0]
                if try mark.bool(0) {
                    try tx.execute("COMMENT ON TABLE matcher_runs IS '\(Self.migratingMark)'")
                    return (comment: try mark.optionalString(1), version: newest)
                }
            }
            return nil
        }
        var applied: [Migration] = []
        let captureReinstalled: String?
        do {
            captureReinstalled = try applyMigrations(migrations, applied: &applied)
        } catch {
            // Nothing of this invocation applied (a lock waited for in vain, the first migration failing): the
            // schema is as it was, and so is its mark. Left "migrating", every run of the binary that ran before
            // refused with exit 78, "retrying will not help", for a migrate that changed nothing (review of
            // session 35).
            if applied.isEmpty, let previousMark {
                restoreMark(previousMark.comment, ifStillAt: previousMark.version)
            }
            throw error
        }
        return Outcome(applied: applied, captureReinstalled: captureReinstalled)
    }

    /// The migrations, the capture and the version mark: `apply`'s work once the migrating mark is written.
    /// `applied` holds the migrations applied so far when it throws. Returns why the capture was installed again.
    private func applyMigrations(_ migrations: [Migration], applied: inout [Migration]) throws -> String? {
        for migration in migrations {
            let didApply = try connection.transaction { tx -> Bool in
                // One migrator at a time; whoever waits sees the other's work and skips it.
                try Self.takeMigratorsLock(tx)
                let existing = try tx.query(
                    "SELECT checksum FROM matcher_schema_migrations WHERE version = $1",
                    [.int4(Int32(migration.version))])
                if let row = existing.rows.first {
                    let recorded = try row.string(0)
                    if recorded != migration.checksum,
                        MigrationRunner.equivalentChecksums[migration.version]?.contains(recorded) == true
                    {
                        // The same migration, made safe to rerun (see equivalentChecksums).
                        try tx.query(
                            "UPDATE matcher_schema_migrations SET checksum = $2 WHERE version = $1",
                            [.int4(Int32(migration.version)), .text(migration.checksum)])
                        return false
                    }
                    guard recorded == migration.checksum else {
                        throw MigrationError(
                            description:
                                "migration \(migration.version) (\(migration.name)) was edited after it was applied; "
                                + "add a new migration instead")
                    }
                    return false
                }
                do {
                    try tx.execute("SET LOCAL lock_timeout = \(lockTimeoutSeconds * 1000)")
                    try tx.execute(migration.sql)
                    if migration.version == ChangeCapture.sinceMigration {
                        // It dropped the old capture: the new one in the same transaction, so that no change the
                        // app commits while later migrations build their indexes goes unrecorded.
                        try ChangeCapture.install(inTransaction: tx, existingColumnsOnly: true)
                    }
                } catch let error as PostgresError where error.sqlState == "55P03" {
                    throw MigrationError(
                        description:
                            "migration \(migration.version) (\(migration.name)) waited more than "
                            + "\(lockTimeoutSeconds) s for a lock another session holds on a table it changes (the "
                            + "app's, or a run's); nothing of it was applied, the migrations before it are: run "
                            + "matcher migrate again when the database is quieter (stop the matcher timers first), "
                            + "or pass a longer --lock-timeout",
                        failureKind: .locked)
                } catch {
                    throw MigrationError(
                        description: "migration \(migration.version) (\(migration.name)) failed: \(error)",
                        failureKind: (error as? any ClassifiedError)?.failureKind ?? .other)
                }
                try tx.query(
                    "INSERT INTO matcher_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    [.int4(Int32(migration.version)), .text(migration.name), .text(migration.checksum)])
                return true
            }
            if didApply { applied.append(migration) }
        }
        try AppSchema.verify(connection, requireTables: true)
        // The change capture is derived from the catalogue (from migration 5 on): installed, or
        // reinstalled when the catalogue changed, after the files.
        var captureReinstalled: String?
        if migrations.contains(where: { $0.version >= ChangeCapture.sinceMigration }) {
            captureReinstalled = try connection.transaction { tx in
                try Self.takeMigratorsLock(tx)
                try tx.execute("SET LOCAL lock_timeout = \(lockTimeoutSeconds * 1000)")
                do {
                    return try ChangeCapture.install(inTransaction: tx)
                } catch let error as PostgresError where error.sqlState == "55P03" {
                    throw MigrationError(
                        description:
                            "the change capture on profiles waited more than \(lockTimeoutSeconds) s for a lock "
                            + "another session holds (the app's); nothing of it was applied, the migrations before "
                            + "it are: run matcher migrate again when the database is quieter, or pass a longer "
                            + "--lock-timeout",
                        failureKind: .locked)
                }
            }
        }
        try connection.transaction { tx in
            try Self.takeMigratorsLock(tx)
            try Self.markVersion(tx)
        }
        return captureReinstalled
    }

    /// Puts back the mark `apply` replaced by "migrating", if the schema is still at the version it was then and
    /// the mark still says "migrating" (another migrator may have applied migrations since, or finished them).
    /// If this fails too (the connection lost), the mark stays "migrating", as before; the migrate's own error is
    /// the one reported.
    private func restoreMark(_ comment: String?, ifStillAt version: Int32?) {
        _ = try? connection.transaction { tx in
            try Self.takeMigratorsLock(tx)
            try tx.execute("SET LOCAL lock_timeout = \(lockTimeoutSeconds * 1000)")
            let now = try tx.query(
                """
                SELECT (SELECT max(version) FROM matcher_schema_migrations),
                       obj_description(to_regclass('matcher_runs'), 'pg_class')
                """
            ).rows[0]
            guard try now.optionalInt32(0) == version, try now.optionalString(1) == Self.migratingMark else { return }
            let statement = try tx.query(
                "SELECT format('COMMENT ON TABLE matcher_runs IS %L', $1::text)", [PostgresValue(comment)]
            ).rows[0].string(0)
            try tx.execute(statement)
        }
    }

    /// Refuses to create an installation where the search path reaches none while another schema of the database
    /// holds one (or the app's `profiles`): with the search path that made runs refuse ("no version mark"),
    /// following their advice made a second, empty installation that every later run read, exit 0 (review of
    /// session 35). A database may hold one installation per environment, each in its own schema
    /// (`--new-installation`, docs/decisions.md "Session 35").
    private func refuseSecondInstallation() throws {
        let here = try connection.query(
            "SELECT to_regclass('matcher_runs') IS NOT NULL OR to_regclass('matcher_schema_migrations') IS NOT NULL"
        ).rows[0].bool(0)
        guard !here, let found = try Self.outOfReach(connection) else { return }
        throw MigrationError(
            description: Self.describe(found) + "; migrate would make a new, empty installation in "
                + Self.creatingIn(found.current) + ", and runs with this search path would read it (no match, exit 0); "
                + "to make one there on purpose (a schema per environment), run matcher migrate --new-installation; "
                + "nothing was changed")
    }

    /// Waits for any other migrator's transaction (no statement or lock timeout until then).
    private static func takeMigratorsLock(_ tx: PostgresConnection) throws {
        try tx.execute("SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0")
        try tx.query("SELECT pg_advisory_xact_lock($1, $2)", [.int4(MigrationRunner.lockNamespace), .int4(0)])
    }

    /// The newest migration this build's code needs (a test keeps it equal to the newest file of `sql/`).
    public static let schemaVersion = 20

    /// The oldest schema version whose binaries may run on this build's schema, written into the mark: binaries
    /// of 14-18 recorded a notify-off filter's matches without the note 0019 reads, which lost them when notify
    /// was turned on (review of session 33). Raised with a migration that older binaries cannot run beside.
    static let oldestBinaryForThisSchema = 19

    /// The mark while `matcher migrate` applies migrations (and after one that stopped part way).
    static let migratingMark = "matcher schema migrating"

    /// Writes the database's migration version where the worker's role can read it: the comment of
    /// `matcher_runs` (the worker may not read `matcher_schema_migrations`, sql/roles/worker_role.sql).
    static func markVersion(_ connection: PostgresConnection) throws {
        let row = try connection.query(
            "SELECT coalesce(max(version), 0), to_regclass('matcher_runs') IS NOT NULL FROM matcher_schema_migrations"
        ).rows[0]
        guard try row.bool(1) else { return }
        // "matcher schema N min M": binaries before 19 read only "matcher schema N", and refuse this form.
        let version = Int(try row.int32(0))
        try connection.execute(
            "COMMENT ON TABLE matcher_runs IS 'matcher schema \(version) min \(min(version, oldestBinaryForThisSchema))'"
        )
    }

    /// Refuses, before anything is read or written, a database whose worker schema is older than this build
    /// needs (a new binary installed before `matcher migrate` ran): a run would otherwise fail at its first
    /// statement that names a new column, after committing some units.
    public static func verifyCurrent(_ connection: PostgresConnection) throws {
        let row = try connection.query(
            "SELECT obj_description(to_regclass('matcher_runs'), 'pg_class'), to_regclass('matcher_runs') IS NOT NULL"
        ).rows[0]
        let comment = try row.optionalString(0)
        if !(try row.bool(1)) {
            try refuseUnreachableInstallation(connection, then: "nothing was written")
        }
        if comment == migratingMark {
            throw MigrationError(
                description:
                    "a matcher migrate of this database is under way or stopped part way: run matcher migrate (as the "
                    + "owner) to finish it; nothing was written")
        }
        let words = comment.map { $0.split(separator: " ").map(String.init) } ?? []
        let found = words.count >= 3 && words[0] == "matcher" && words[1] == "schema" ? Int(words[2]) : nil
        let oldest = words.count == 5 && words[3] == "min" ? Int(words[4]) : nil
        guard let found, found >= schemaVersion else {
            let what =
                found.map { "is at version \($0)" }
                ?? "has no version mark (migrated by an older matcher, or not at all)"
            throw MigrationError(
                description:
                    "the database's worker schema \(what), and this matcher needs version \(schemaVersion): run "
                    + "`matcher migrate` (as the owner), then sql/roles/worker_role.sql; nothing was written")
        }
        if let oldest, oldest > schemaVersion {
            throw MigrationError(
                description:
                    "the database's worker schema is at version \(found), which binaries before schema \(oldest) "
                    + "cannot run beside (this matcher is at \(schemaVersion)): install the newer matcher; nothing "
                    + "was written")
        }
    }

    /// `verifyCurrent` again, once a run or backfill holds its run lock (`PostgresMatchingStore`'s
    /// `verifiesSchemaUnderRunLock`). The command checked the mark before it took the lock, and a `matcher migrate`
    /// that began in between found no run lock and applied its migrations under the run (review of session 35).
    /// A migrate decides, under the migrators' lock, that no run holds a lock and writes the "migrating" mark in
    /// the same transaction: the mark is read again here after waiting for that transaction (a shared hold of the
    /// migrators' lock), so either the migrate saw this run's lock and refused, or the run sees its mark. The
    /// wait is short (the migrators' transactions that leave the mark as it was are catalogue work); past
    /// `waitSeconds` the run gives up as locked (exit 75), nothing written.
    public static func verifyCurrentUnderRunLock(_ connection: PostgresConnection, waitSeconds: Int = 30) throws {
        // A mark that says "migrating" already: refused at once, without waiting for the migration's transaction.
        try verifyCurrent(connection)
        let wait = max(1, waitSeconds)
        // The wait is bounded by its lock_timeout alone (review of session 35): a --statement-timeout under it cut
        // the wait short as a statement timeout (exit 1, "raise --statement-timeout"), and a --network-timeout
        // under it as a lost connection (the client's call deadline, while the server sends nothing). The
        // statement timeout goes a little past the wait, and the call deadline past that.
        let callTimeout = connection.callTimeout
        if let callTimeout, callTimeout < .seconds(wait + 15) { connection.callTimeout = .seconds(wait + 15) }
        defer { connection.callTimeout = callTimeout }
        do {
            try connection.transaction(isolation: .readCommitted) { tx in
                try tx.execute(
                    "SET LOCAL lock_timeout = \(wait * 1000); SET LOCAL statement_timeout = \((wait + 5) * 1000)")
                try tx.query("SELECT pg_advisory_xact_lock_shared($1, $2)", [.int4(lockNamespace), .int4(0)])
                // Read committed: this statement's snapshot is taken after the wait, and sees the migrate's mark.
                try verifyCurrent(tx)
            }
        } catch let error as PostgresError
            where error.sqlState == "55P03" || (error.isQueryCanceled && error.message.contains("statement timeout"))
        {
            throw MigrationError(
                description:
                    "a matcher migrate of this database has held the migrators' lock for more than \(wait) s "
                    + "after this process took its run lock; nothing was written",
                failureKind: .locked)
        }
    }

    /// A schema the session's search path does not reach (not on it, or no USAGE for the role, which PostgreSQL
    /// leaves out of the path) holding the worker's `matcher_runs` or the app's `profiles`.
    struct SchemaOutOfReach {
        let name: String
        /// `name` as SQL writes it (the server's `quote_ident`, `format('%I')`'s): `"App"` for a mixed-case name.
        let quoted: String
        /// It holds `matcher_runs` (an installation), not only the app's `profiles`.
        let installation: Bool
        /// The session's role has USAGE on it: then it is simply not on the search path.
        let usable: Bool
    }

    /// Where the session cannot see the worker's tables: the schemas out of its reach that hold them, the
    /// `search_path` setting, the schema a `matcher migrate` would create in ("" when none of the path exists)
    /// and the role.
    struct OutOfReach {
        let schemas: [SchemaOutOfReach]
        let searchPath: String
        let current: String
        let role: String
        /// `role` as SQL writes it.
        let quotedRole: String
        /// The schemas the search path does reach (`current_schemas(false)`), as SQL writes them, joined by commas:
        /// what a new search path keeps after the missing schema (the app's tables may be there).
        let reached: String
    }

    /// What this session's search path misses; nil when no schema out of its reach holds those tables. A schema
    /// holding only a `profiles` counts while the search path reaches none: where the app's `profiles` resolves
    /// through the path, another schema's (`archive.profiles`, a copy) is not the app's, and a first migrate
    /// refused for it, pointing the worker at it, was wrong (review of session 35).
    static func outOfReach(_ connection: PostgresConnection) throws -> OutOfReach? {
        let rows = try connection.query(
            """
            SELECT n.nspname::text, bool_or(c.relname = 'matcher_runs'), has_schema_privilege(n.oid, 'USAGE'),
                   current_setting('search_path'), coalesce(current_schema()::text, ''), current_user::text,
                   quote_ident(n.nspname), quote_ident(current_user),
                   array_to_string(ARRAY(SELECT quote_ident(s) FROM unnest(current_schemas(false)) s), ',')
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relname IN ('matcher_runs', 'profiles') AND c.relkind IN ('r', 'p')
              AND n.nspname <> ALL (current_schemas(true)) AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
            GROUP BY n.oid, n.nspname
            HAVING bool_or(c.relname = 'matcher_runs') OR to_regclass('profiles') IS NULL
            ORDER BY 2 DESC, 1
            """
        ).rows
        guard let first = rows.first else { return nil }
        return OutOfReach(
            schemas: try rows.map {
                SchemaOutOfReach(
                    name: try $0.string(0), quoted: try $0.string(6), installation: try $0.bool(1),
                    usable: try $0.bool(2))
            },
            searchPath: try first.string(3), current: try first.string(4), role: try first.string(5),
            quotedRole: try first.string(7),
            reached: try first.string(8))
    }

    /// What the session cannot see and how to reach it: "schema app holds matcher_runs (not on the search path): …".
    static func describe(_ found: OutOfReach) -> String {
        let schemas = found.schemas
        let held = schemas.map { schema in
            "\(schema.name) holds \(schema.installation ? "matcher_runs" : "the app's profiles (no matcher_runs)") ("
                + (schema.usable ? "not on the search path" : "role \(found.role) has no USAGE on it") + ")"
        }
        let name = schemas.count == 1 ? schemas[0].name : "<schema>"
        let quoted = schemas.count == 1 ? schemas[0].quoted : "<schema>"
        var fixes: [String] = []
        if schemas.contains(where: \.usable) {
            // A search_path setting replaces the whole path: the schemas it reaches now (the app's tables may be
            // there) are kept after the missing one (review of session 35: `-csearch_path=archive` alone pointed
            // the worker away from the app's tables).
            let path = found.reached.isEmpty ? quoted : quoted + "," + found.reached
            fixes.append(
                "fix the search path (the role's search_path, or -csearch_path=\(path) in the connection string's "
                    + "options or in PGOPTIONS; it replaces the whole path, so keep every schema the worker reads)")
        }
        if schemas.contains(where: { !$0.usable }) {
            fixes.append(
                "grant USAGE on the schema (GRANT USAGE ON SCHEMA \(quoted) TO \(found.quotedRole); "
                    + "sql/roles/worker_role.sql -v schema=\(name) does) and keep it on the search path")
        }
        return "this session's search path (search_path=\(found.searchPath)) reaches no matcher_runs, and "
            + (schemas.count == 1 ? "schema " : "schemas ") + held.joined(separator: "; ") + ": "
            + fixes.joined(separator: ", or ")
    }

    /// The schema new tables would be created in, as an operator reads it.
    static func creatingIn(_ current: String) -> String {
        current.isEmpty ? "the first schema of the search path (none of it exists or is usable now)" : current
    }

    /// Refuses (exit 78) a session whose search path reaches no `matcher_runs` while another schema of the
    /// database holds one, or the app's `profiles` (review of session 35): with `PGOPTIONS='-c search_path=other'`
    /// or USAGE on the schema revoked, `run` said "no version mark …: run `matcher migrate`", and `status` "the
    /// schema is missing or old", and following that advice made a second, empty installation in `other`, which
    /// every later run read: no match, exit 0. Call it where `matcher_runs` was not found; `then` ends the line.
    public static func refuseUnreachableInstallation(_ connection: PostgresConnection, then: String) throws {
        guard let found = try outOfReach(connection) else { return }
        throw MigrationError(
            description: describe(found) + "; run `matcher migrate` only to make a new installation in "
                + creatingIn(found.current) + "; " + then)
    }

    /// Earlier texts of a migration that had the same effect on the databases they were applied to, so
    /// that a database migrated with them is not told the migration "was edited": 0001 before its
    /// statements became `IF NOT EXISTS` (issue 14).
    static let equivalentChecksums: [Int: Set<String>] = [
        1: ["69e3dc691b2770aa"],
        // 0003 pinned the search path to `public` by name; it now names the migration's schema.
        3: ["e87c82ae6884c76a"],
        // 0005 before its columns on the output tables became `IF NOT EXISTS` (session 34): tables created by the
        // contract before the first migrate already have them; on every other database the statements added them.
        5: ["4b1282dfa8473821"],
        // 0016 as 909ddd3 wrote it (the decision's time and its index, now 0017's work): 0017 brings a database
        // migrated with it to the same end state (the column is there already; its index goes by name).
        16: ["9289947144f982e4"],
        // 0019 as 7778be3 wrote it: the same statements, its comment since corrected (d281c6b).
        19: ["d7af339a71ef7f"],
    ]

    /// This process's executable: /proc/self/exe where there is one (argv[0] may be a bare name found on PATH).
    public static var currentExecutable: URL {
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            return URL(fileURLWithPath: path)
        }
        return URL(fileURLWithPath: CommandLine.arguments[0])
    }

    /// The migrators' advisory lock is (`lockNamespace`, 0), held by every transaction of `apply`.
    public static let lockNamespace: Int32 = 0x4D_41_54_00  // "MAT\0"
}
