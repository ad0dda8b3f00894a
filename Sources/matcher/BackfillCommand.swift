import ArgumentParser
import Chronology
import Foundation
import Logging
import Matching
import MatchingPostgres

struct Backfill: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Evaluate chosen filters against chosen profiles; writes matches, and notifications only with --notify.")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var options: RunOptions
    @OptionGroup var output: OutputOptions

    @Option(
        help: "Only profiles whose updated_at is at or after this time (ISO 8601 with its zone offset).",
        transform: { try instant("--changed-since", $0) })
    var changedSince: Timestamp?
    @Option(
        help:
            "Only profiles whose updated_at is before this time (ISO 8601 with its zone offset; default: the backfill's clock).",
        transform: { try instant("--changed-before", $0) })
    var changedBefore: Timestamp?
    @Option(name: .customLong("filter"), parsing: .upToNextOption, help: "Only these filter ids (repeatable).")
    var filterIds: [Int64] = []
    @Option(
        name: .customLong("owner"), parsing: .upToNextOption, help: "Only the filters of these owners (repeatable).")
    var ownerIds: [Int64] = []
    @Flag(help: "Also write notifications (default: no, so that a backfill never floods users).")
    var notify = false

    func validate() throws {
        if !filterIds.isEmpty && !ownerIds.isEmpty {
            throw ValidationError("choose filters by --filter or by --owner, not both")
        }
        if let changedSince, let changedBefore, changedSince >= changedBefore {
            throw ValidationError(
                "--changed-since \(changedSince.iso8601) is not before --changed-before \(changedBefore.iso8601): "
                    + "the window holds no change")
        }
    }

    func run() throws {
        Log.bootstrap(output.logFormat, level: output.logLevel)
        let logger = Logger(label: "matcher.backfill")
        let metricsPath = options.dryRun ? nil : output.metricsFile  // none for a dry run, as `Run`'s
        let metrics = metricsPath.map { MetricsFile(path: $0, kind: .backfill, shard: options.shard) }
        try runReportingFailures(logger, "backfill", metrics: metrics) {
            let store = try Database(database, applicationName: "matcher backfill \(options.shard)").store(
                writeConnections: options.storeConnections, verifiesSchemaUnderRunLock: true)
            try MigrationRunner.verifyCurrent(store.connection)
            try AppSchema.verifyBeforeReading(store.connection)
            try options.checkClock(store)
            let trap = SignalTrap.stoppingAtUnitBoundaries(of: store)
            let profiles: ProfileSelection
            if changedSince != nil || changedBefore != nil {
                // Without --changed-before, up to the backfill's clock: the one it resumes with, if interrupted.
                // Without --changed-since, from the first change (a start of -2^62 microseconds was before
                // PostgreSQL's earliest timestamp, and the read failed).
                profiles = .changed(from: changedSince, to: changedBefore)
            } else {
                profiles = .all
            }
            let filters: FilterSelection =
                !filterIds.isEmpty ? .ids(filterIds) : !ownerIds.isEmpty ? .owners(ownerIds) : .all
            let useCase = Matching.Backfill(
                MatchingRepositories(store: store), engine: options.engine.engine,
                output: LoggingRunOutput(logger: logger), options: options.pass(stop: trap.stop))
            let summary = try useCase.execute(
                .init(
                    profiles: profiles, filters: filters, writesNotifications: notify, now: options.now,
                    timeZone: options.zone, shard: options.shard, maxPerFilter: options.maxPerFilter,
                    dryRun: options.dryRun, retentionDays: options.retentionDays,
                    timeZoneChange: options.timeZoneChange))
            printReport(.runSummary(summary), output.format)
            return summary
        }
    }
}
