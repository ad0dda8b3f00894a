import ArgumentParser
import Foundation
import Logging
import Matching
import MatchingPostgres

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "One incremental run: profiles changed since the shard's last successful run, against its filters.")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var options: RunOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        Log.bootstrap(output.logFormat, level: output.logLevel)
        let logger = Logger(label: "matcher.run")
        // A dry run writes nothing (cli.md): not the metrics file either, where its success would stand for the
        // real runs' and silence the alerts on them.
        let metricsPath = options.dryRun ? nil : output.metricsFile
        let metrics = metricsPath.map { MetricsFile(path: $0, kind: .run, shard: options.shard) }
        let pause = PauseProbe()
        pause.shard = options.shard
        try runReportingFailures(logger, "run", metrics: metrics, gauges: { pause.gauges(logger) }) {
            let store = try Database(database, applicationName: "matcher run \(options.shard)").store(
                writeConnections: options.storeConnections, verifiesSchemaUnderRunLock: true)
            pause.connection = store.connection
            try MigrationRunner.verifyCurrent(store.connection)
            try AppSchema.verifyBeforeReading(store.connection)
            try ChangeCapture.verifyCapturing(store.connection)
            try options.checkClock(store)
            if let problem = try ChangeCapture.mismatch(on: store.connection) {
                logger.warning(
                    "the change capture does not fit the app's triggers", metadata: ["problem": "\(problem)"])
            }
            // A dump restored into a server whose transactions are behind the dump's, but not behind the runs'
            // progress (no run refuses): until the server's transactions pass them, every run takes these
            // profiles again. The reset settles them.
            let ahead = try store.changesAhead()
            if ahead > 0 {
                logger.warning(
                    """
                    profile changes from another server's transactions (a restored dump?): every run takes them \
                    again until this server's transactions pass them; settle them with matcher progress reset \
                    --shard K/N --to <time the data was current> (docs/runbook.md)
                    """,
                    metadata: ["changes": "\(ahead)\(ahead >= 100_000 ? " or more" : "")"])
            }
            let trap = SignalTrap.stoppingAtUnitBoundaries(of: store)
            let useCase = RunMatching(
                MatchingRepositories(store: store), engine: options.engine.engine,
                output: LoggingRunOutput(logger: logger), options: options.pass(stop: trap.stop))
            let summary = try useCase.execute(
                .init(
                    now: options.now, timeZone: options.zone, shard: options.shard,
                    maxPerFilter: options.maxPerFilter, dryRun: options.dryRun, retentionDays: options.retentionDays,
                    timeZoneChange: options.timeZoneChange))
            printReport(.runSummary(summary), output.format)
            return summary
        }
    }
}
