import ArgumentParser
import Foundation
import Logging
import MatchingPostgres
import PostgresClient

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply the migrations in sql/ to the configured database, in order, once each; safe to repeat.")

    @OptionGroup var database: DatabaseOptions
    @Option(help: "The folder of NNNN_name.sql migrations (default: $MATCHER_SQL_DIR, share/matcher/sql, or ./sql).")
    var sqlDir: String?
    @Option(
        help: ArgumentHelp(
            "Seconds a migration may wait for a table lock another session holds before it gives up whole (exit 75).",
            discussion:
                "A lock request that waits makes every later request on its table wait behind it: a migration "
                + "queued behind a long transaction would stall the app. 0 waits for as long as it takes. "
                + "Migrations have no statement timeout: an index build takes as long as its table's size requires."))
    var lockTimeout: Int = MigrationRunner.defaultLockTimeoutSeconds
    @Flag(
        help: ArgumentHelp(
            "Create the worker's tables where the search path reaches none although another schema holds them.",
            discussion:
                "Without it, migrate refuses (exit 78) when the search path reaches no matcher_runs while another "
                + "schema of the database holds one (or the app's profiles): a wrong search_path or a revoked USAGE "
                + "would otherwise get a second, empty installation that runs read with no error. Pass it to "
                + "install a schema per environment on purpose (deploy/README.md, \"The schema\")."))
    var newInstallation = false
    @Option(help: "Log format on standard error: logfmt or json.")
    var logFormat: LogFormat = .logfmt
    @Option(help: "Least severe log level written: trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    func validate() throws {
        let maximum = PostgresConnection.maximumTimeoutSeconds
        guard (0...maximum).contains(lockTimeout) else {
            throw ValidationError("--lock-timeout must be 0 to \(maximum) seconds (PostgreSQL's lock_timeout in ms)")
        }
    }

    func run() throws {
        Log.bootstrap(logFormat, level: logLevel)
        let logger = Logger(label: "matcher.migrate")
        try runReportingFailures(logger, "migrate") {
            guard let directory = sqlDir.map({ URL(fileURLWithPath: $0) }) ?? MigrationRunner.defaultDirectory() else {
                throw MigrationError(description: "no sql/ folder found; pass --sql-dir or set MATCHER_SQL_DIR")
            }
            let migrations = try MigrationRunner.load(from: directory)
            try MigrationRunner.verifyFolder(migrations, in: directory)
            let connection = try Database(database, applicationName: "matcher migrate").connect()
            defer { connection.close() }
            let outcome = try MigrationRunner(
                connection: connection, lockTimeoutSeconds: lockTimeout, newInstallation: newInstallation
            ).applyReporting(migrations)
            let applied = outcome.applied
            for migration in applied {
                logger.info(
                    "migration applied", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
            }
            if let problem = try ChangeCapture.ownerProblem(on: connection) {
                logger.warning("change capture not owned by its role", metadata: ["problem": "\(problem)"])
            }
            // A mended capture is said as such: "up to date" alone read as "nothing changed" after a repair.
            if let reason = outcome.captureReinstalled {
                logger.notice("change capture installed", metadata: ["reason": "\(reason)"])
            }
            let latest = migrations.last.map { String($0.version) } ?? "-"
            let names = applied.map { String(format: "%04d", $0.version) + "_" + $0.name }
            let capture = outcome.captureReinstalled.map { "; change capture installed again: \($0)" } ?? ""
            print(
                applied.isEmpty
                    ? "matcher migrate: up to date (version \(latest), from \(directory.path))\(capture)"
                    : "matcher migrate: applied \(names.joined(separator: ", ")) from \(directory.path) "
                        + "(now at version \(latest))")
            return nil
        }
    }
}
