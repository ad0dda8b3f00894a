import ArgumentParser
import Chronology
import Foundation
import Logging
import Matching
import MatchingPostgres

/// `matcher status` (cli.md): what an operator asks first. Reads only, so the worker's role can run it.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Per shard, the last successful run, its lag and what went wrong since; digests waiting, "
            + "invalid and quarantined rows, retention, the notification pause.",
        discussion: "--format json has stable snake_case keys for scripts. Exit 0 whatever the service's state.")

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Output format: text or json.") var format: ReportFormat = .text

    func run() throws {
        try withConnection(database, "status") { connection, _ in
            // The worker's tables in a schema this session cannot see: said so, where the read's "relation
            // matcher_shard_progress does not exist" advised a `matcher migrate` that made a second installation.
            if try connection.query("SELECT to_regclass('matcher_runs') IS NULL").rows[0].bool(0) {
                try MigrationRunner.refuseUnreachableInstallation(connection, then: "nothing was read")
            }
            let status = try PostgresStatusRepository(connection: connection).serviceStatus()
            switch format {
            case .json: print(status.json)
            case .text: printReport(.serviceStatus(status), .text)
            }
        }
    }
}

/// `matcher runs abandon`: the bad day's way out of a run that cannot be completed.
struct Runs: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Operator actions on recorded runs.", subcommands: [Abandon.self])

    struct Abandon: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Mark an interrupted run abandoned: it is never resumed; what it committed stays.",
            discussion: """
                The next run of the shard then starts afresh from the shard's last successful progress instead of \
                completing the interrupted run first. Use it when the interrupted run keeps failing (see `matcher \
                status`). Refused (exit 75) while a process holds the shard's run lock.
                """)

        @OptionGroup var database: DatabaseOptions
        @Option(name: .customLong("run"), help: "The run's id (matcher_runs.id, shown by `matcher status`).")
        var runId: Int64?
        @Option(
            help: "The shard whose interrupted incremental run to abandon, as K/N.",
            transform: shardArgument)
        var shard: Shard?
        @Option(help: "Output format: text or json.") var format: ReportFormat = .text

        func validate() throws {
            guard (runId == nil) != (shard == nil) else { throw ValidationError("give either --run ID or --shard K/N") }
        }

        func run() throws {
            Log.bootstrap(.logfmt)
            let logger = Logger(label: "matcher.runs")
            let target: AbandonRun.Target = shard.map { .shard($0) } ?? .run(runId ?? 0)
            try runReportingFailures(logger, "runs abandon") {
                let store = try Database(database, applicationName: "matcher runs abandon").store()
                defer { store.connection.close() }
                let outcome = try AbandonRun(MatchingRepositories(store: store)).execute(target)
                if let outcome, !outcome.alreadyAbandoned {
                    logger.notice(
                        "run abandoned",
                        metadata: [
                            "run_id": "\(outcome.run.id)", "shard": "\(outcome.run.shard)",
                            "was": "\(outcome.run.status.rawValue)",
                        ])
                }
                printReport(.abandoned(outcome, target: target), format)
                return nil
            }
        }
    }
}

/// `matcher progress reset`: after a restore or a failover.
struct Progress: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Operator actions on change-capture progress.", subcommands: [Reset.self])

    struct Reset: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Reset a shard's progress to a time: profile changes recorded at or after it count as new.",
            discussion: """
                After a restore or a failover, recorded progress can be ahead of the database (a run refuses with \
                exit 78 and says so). Give the time at which the last successful run in the restored data read \
                the profiles (`matcher status --format json`: the shard's progress.taken_at), less the longest \
                transaction the app runs: not the time of the backup, whose changes since that run no run has \
                taken. Earlier re-evaluates more profiles: a pair still recorded is not recorded again, but one \
                older than --retention-days was forgotten and may be recorded and notified again, so go back no \
                further than needed (a time before the retention is warned about). Change rows that a dump \
                brought from another cluster are settled. Refused (exit 75) while a run of the shard holds its \
                lock; the shard's interrupted run, if any, is abandoned.
                """)

        @OptionGroup var database: DatabaseOptions
        @Option(
            help: "The shard to reset, as K/N (the one the refusing run named).",
            transform: shardArgument)
        var shard: Shard
        @Option(
            help: "ISO 8601 with its zone offset, such as 2026-03-01T00:00:00Z or 2026-03-01T09:00:00+09:00.",
            transform: { try instant("--to", $0) })
        var to: Timestamp
        @Option(help: "Output format: text or json.") var format: ReportFormat = .text

        func run() throws {
            Log.bootstrap(.logfmt)
            let logger = Logger(label: "matcher.progress")
            try runReportingFailures(logger, "progress reset") {
                let store = try Database(database, applicationName: "matcher progress reset").store()
                defer { store.connection.close() }
                let outcome = try ResetProgress(MatchingRepositories(store: store)).execute(shard: shard, to: to)
                // Before the retention, pairs the changes made were forgotten: they may be recorded and notified
                // again (review of session 34). Said, not refused: a restore may need it.
                let days = try store.latestRetentionDays() ?? Retention.defaultDays
                // At the next daily run's clock, which reads the changes: a day after now.
                let cutoff = try store.currentTime().adding(days: 1 - days)
                if to < cutoff {
                    let message =
                        "progress reset before the retention: changes older than \(days) days will be read again, "
                        + "and their pairs, forgotten since, may be recorded and notified again"
                    logger.warning(
                        "\(message)",
                        metadata: ["shard": "\(shard)", "to": "\(to.iso8601)", "retention_cutoff": "\(cutoff.iso8601)"])
                }
                logger.notice(
                    "progress reset",
                    metadata: [
                        "shard": "\(shard)", "to": "\(to.iso8601)",
                        "abandoned_run_id": "\(outcome.abandonedRunId.map(String.init) ?? "-")",
                        "changes_settled": "\(outcome.changesSettled)",
                    ])
                printReport(.progressReset(outcome), format)
                return nil
            }
        }
    }
}

/// `K/N` for a `--shard` flag (a usage error, exit 64, when malformed).
func shardArgument(_ text: String) throws -> Shard {
    do { return try Shard(parsing: text) } catch { throw ValidationError(error.description) }
}
