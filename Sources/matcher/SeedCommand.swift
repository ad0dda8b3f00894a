import ArgumentParser
import Chronology
import Foundation
import LoadWorld
import Logging
import Matching
import MatchingPostgres
import PostgresClient

struct Seed: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a deterministic load-test world, a day of changes to it, or the OkCupid data set.",
        discussion: """
            A world:  matcher seed --profiles 1000000 --filters 100000 --seed 7 --now 2026-03-01T03:00:00Z
            A day:    matcher seed --changes 30000 --seed 7 --now 2026-03-02T03:00:00Z
            OkCupid:  matcher seed --okcupid okcupid-profiles.csv.gz --now 2026-03-01T03:00:00Z

            The same seed, --now and sizes write the same rows, byte for byte. A world is written only into a \
            database without profiles or filters, unless --append (after the existing ids) or --replace (TRUNCATE \
            the app's and the worker's tables first). --changes applies ordinary INSERT and UPDATE statements, as \
            the app would, so that the next run's change capture sees them.
            """)

    @OptionGroup var database: DatabaseOptions

    @Option(help: "Profiles of a new world.") var profiles: Int?
    @Option(help: "Saved filters of a new world or of the OkCupid import (default: a tenth of the profiles).")
    var filters: Int?
    @Option(
        help:
            "Apply one day of changes to the existing world: this many profile updates and inserts, with hides, deletes, reactivations, filter edits, deletes and creations, and blocks in proportion."
    )
    var changes: Int?
    @Option(
        help:
            "The day's mix with --changes: growing (few members leave; the world grows by about 0.9 % a day at --changes of 6 % of the profiles) or steady (as many members and filters go as come)."
    )
    var mix: DailyChangeMix.Name = .growing
    @Option(help: "Import this OkCupid CSV (.csv or .csv.gz) as profiles, with filters around its members.")
    var okcupid: String?
    @Option(help: "Import only the first N OkCupid records.") var limit: Int?
    @Option(help: "The seed: the same seed gives the same rows.") var seed: UInt64 = 1
    @Option(
        help:
            "The world's present, ISO 8601 with its zone offset (default: the database's clock, to the second). Pass it to reproduce a world.",
        transform: { try instant("--now", $0) })
    var now: Timestamp?
    @Flag(help: "Add to the existing profiles and filters (new ids above theirs).") var append = false
    @Flag(
        help:
            "Empty profiles, saved_filters, blocks, filter_matches, notifications and the matcher_* bookkeeping first.")
    var replace = false
    @Option(help: "Summary format: text or json.") var format: ReportFormat = .text
    @Option(help: "Log format on standard error: logfmt or json.") var logFormat: LogFormat = .logfmt
    @Option(help: "Least severe log level written: trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    func validate() throws {
        let modes = [profiles != nil, changes != nil, okcupid != nil].filter { $0 }.count
        guard modes == 1 else {
            throw ValidationError(
                "choose one of --profiles N (a world), --changes K (a day of changes) or --okcupid PATH")
        }
        if append && replace { throw ValidationError("--append and --replace exclude each other") }
        if changes != nil && (append || replace || filters != nil) {
            throw ValidationError(
                "--changes changes the existing world: --append, --replace and --filters do not apply")
        }
        if let profiles, profiles < 0 { throw ValidationError("--profiles must be 0 or more") }
        if let filters, filters < 0 { throw ValidationError("--filters must be 0 or more") }
        if let changes, changes < 0 { throw ValidationError("--changes must be 0 or more") }
        if mix != .growing && changes == nil { throw ValidationError("--mix applies to --changes") }
        if limit != nil && okcupid == nil { throw ValidationError("--limit applies to --okcupid") }
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
    }

    func run() throws {
        Log.bootstrap(logFormat, level: logLevel)
        let logger = Logger(label: "matcher.seed")
        do {
            let connection = try Database(database, applicationName: "matcher seed").connect()
            defer { connection.close() }
            let clock = try now ?? connection.query("SELECT date_trunc('second', now())").rows[0].timestamp(0)
            let existing: ExistingRows = replace ? .replace : append ? .append : .refuse
            let summary: SeedSummary
            if let changes {
                summary = try DailyChangeApplier(connection: connection).apply(
                    count: changes, seed: seed, now: clock, mix: mix.mix
                ).summary
            } else if let okcupid {
                let records = try OkCupidRecord.read(path: okcupid, limit: limit)
                logger.info("okcupid records read", metadata: ["records": "\(records.count)", "path": "\(okcupid)"])
                summary = try OkCupidSeeder(connection: connection).seed(
                    records: records, filters: filters ?? records.count / 10, seed: seed, now: clock, existing: existing
                )
            } else {
                let profiles = profiles ?? 0
                let seeder = WorldSeeder(connection: connection) { line in logger.info("\(line)") }
                summary = try seeder.seedWorld(
                    profiles: profiles, filters: filters ?? profiles / 10, seed: seed, now: clock, existing: existing)
            }
            logger.info(
                "seed finished",
                metadata: [
                    "mode": "\(summary.title)", "seed": "\(summary.seed)", "now": "\(summary.now.iso8601)",
                    "seconds": "\(String(format: "%.3f", summary.seconds))",
                ])
            print(ReportRenderer.render(Self.report(summary), as: format))
        } catch let error as ExitCode {
            throw error
        } catch {
            // The exit statuses of cli.md, as every command has them: unreachable 69, configuration 78, else 1.
            let status = ExitStatus.code(for: failureKind(of: error))
            let message = redactingSecrets("\(error)")
            logger.debug("failed", metadata: ["error": "\(message)", "exit": .stringConvertible(Int(status))])
            var advice = " — nothing was written (the seed is one transaction)"
            if let pg = error as? PostgresError {
                if pg.kind == .connection {
                    advice = " — check --database-url / DATABASE_URL / PG* settings and that the server is up"
                } else if pg.sqlState == "42P01" || pg.sqlState == "42703" {
                    advice = " — the schema is missing or old: run `matcher migrate`"
                }
            }
            FileHandle.standardError.write(
                Data(
                    (Log.errorPriority + "matcher: seed failed: \(ReportRenderer.printable(message))\(advice) "
                        + "(exit \(status))\n").utf8))
            throw ExitCode(status)
        }
    }

    static func report(_ summary: SeedSummary) -> Report {
        Report(
            title: "matcher seed: \(summary.title)",
            sections: [
                .fields(
                    "seed", "Seed",
                    [
                        ReportField("seed", "Seed", .text(String(summary.seed))),
                        ReportField("now", "Now", .text(summary.now.iso8601)),
                    ]),
                .fields("rows", "Rows", summary.rows.map { ReportField($0.key, $0.label, .integer($0.count)) }),
                .fields(
                    "details", "Details", summary.details.map { ReportField($0.key, $0.label, .integer($0.count)) }),
                .fields("time", "Time", [ReportField("total", "Total", .seconds(summary.seconds))]),
            ])
    }
}

extension DailyChangeMix.Name: ExpressibleByArgument {}
