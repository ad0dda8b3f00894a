import ArgumentParser
import Chronology
import Foundation
import Logging
import Matching
import MatchingPostgres

struct Explain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "For each condition of a filter: the profile's value, the condition, pass or fail; and the eligibility checks."
    )

    @OptionGroup var database: DatabaseOptions
    // `.unconditional`: the next word is the id even when it starts with "-", so that a negative id (ids are
    // bigint) gets explain's answer, not "Missing value for '--profile <profile>'" (review of the explain output).
    @Option(name: .customLong("filter"), parsing: .unconditional, help: "The saved filter id.") var filterId: Int64
    @Option(name: .customLong("profile"), parsing: .unconditional, help: "The profile id.") var profileId: Int64
    @Option(
        help: "The clock, ISO 8601 with its zone offset (default: the database's clock).",
        transform: { try instant("--now", $0) })
    var now: Timestamp?
    @Option(
        help:
            "The time zone of the run's date (ages; default: the zone the runs of the filter's owner use, else Asia/Tokyo)."
    )
    var timeZone: String?
    @Option(help: "Report format: text or json.") var format: ReportFormat = .text

    func run() throws {
        Log.bootstrap(.logfmt)
        let logger = Logger(label: "matcher.explain")
        try runReportingFailures(logger, "explain") {
            let zone = try timeZone.map { name in
                guard let zone = TimeZone(identifier: name) else {
                    throw ValidationError("--time-zone \(name): unknown zone")
                }
                return zone
            }
            let store = try Database(database, applicationName: "matcher explain").store()
            // The worker schema's version first, as run and backfill check it: an empty or old database is "run
            // matcher migrate", not advice to add columns or a raw 42703 (review of the explain output).
            try MigrationRunner.verifyCurrent(store.connection)
            try AppSchema.verifyBeforeReading(store.connection)
            let result = try ExplainMatch(MatchingRepositories(store: store))
                .execute(.init(filterId: filterId, profileId: profileId, now: now, timeZone: zone))
            printReport(.explanation(result), format)
            return nil
        }
    }

}
