import ArgumentParser
import Chronology
import Foundation
import Logging
import Matching
import MatchingPostgres
import PostgresClient

/// Where the database is: `--database-url`, `DATABASE_URL`, or libpq's own defaults and `PG*` variables.
struct DatabaseOptions: ParsableArguments {
    @Option(
        name: .customLong("database-url"),
        help: "A libpq connection string or postgresql:// URI (default: $DATABASE_URL, else libpq's PG* defaults).")
    var databaseURL: String?

    @Option(
        help: """
            Seconds to wait for a connection before failing (0: wait indefinitely; default: $PGCONNECT_TIMEOUT, \
            else 10; a connect_timeout in the connection string wins over both).
            """)
    var connectTimeout: Int?

    @Option(help: "Seconds any one SQL statement may run before the server cancels it (0: no limit).")
    var statementTimeout: Int = 300

    @Option(
        help: ArgumentHelp(
            "Seconds one database call may wait with no data moving before the run gives up on the server (0: never).",
            discussion:
                "Default: the statement timeout + 30 s. Catches what keepalives cannot: a path that stays up but never answers."
        ))
    var networkTimeout: Int?

    /// The server takes its timeouts in milliseconds as a 32-bit integer, and the session's idle-in-transaction
    /// limit is the network timeout + 30 s: beyond these bounds a run would fail at its first connection with a
    /// message about the database URL, or overflow.
    static let maximumTimeout = PostgresConnection.maximumTimeoutSeconds
    static let maximumNetworkTimeout = maximumTimeout - 60

    /// `PGCONNECT_TIMEOUT`, which libpq takes when `--connect-timeout` is not given, is held to the flag's bounds:
    /// libpq would wait indefinitely for a negative one, and refuse `10s` with a message about the URL. Checked
    /// when the command connects (`Database`), as configuration (78): it comes from the environment, not the
    /// command line.
    static func checkConnectTimeoutVariable(_ environment: [String: String]) throws {
        guard let text = environment["PGCONNECT_TIMEOUT"], !text.isEmpty else { return }
        guard let seconds = Int(text), (0...maximumTimeout).contains(seconds) else {
            throw DatabaseSettingError(
                description:
                    "PGCONNECT_TIMEOUT \(text): seconds from 0 to \(maximumTimeout) (or give --connect-timeout)")
        }
    }

    func validate() throws {
        for (flag, value, maximum) in [
            ("--connect-timeout", connectTimeout ?? 0, Self.maximumTimeout),
            ("--statement-timeout", statementTimeout, Self.maximumTimeout),
            ("--network-timeout", networkTimeout ?? 0, Self.maximumNetworkTimeout),
        ] where !(0...maximum).contains(value) {
            throw ValidationError("\(flag) \(value): seconds from 0 to \(maximum)")
        }
        if networkTimeout == nil, statementTimeout > Self.maximumNetworkTimeout {
            throw ValidationError(
                "--statement-timeout \(statementTimeout): above \(Self.maximumNetworkTimeout) s, also give "
                    + "--network-timeout (its default is the statement timeout + 30 s)")
        }
    }

    /// The client-side call deadline in seconds, or nil for none.
    var effectiveNetworkTimeout: Int? {
        if let networkTimeout { return networkTimeout > 0 ? networkTimeout : nil }
        return statementTimeout > 0 ? statementTimeout + 30 : nil
    }
}

/// The one way a command line reads an instant (`--now`, `--to`, `--changed-since`, …): ISO 8601 with its
/// zone offset; a time without one is refused (exit 64) rather than read as UTC. So is one outside the years
/// 0001-9999 in UTC (review of session 29): it is handed to PostgreSQL as ISO text, which has no year 0, and a
/// progress mark at such a time (`progress reset --to`) could not be read back, so every later run of the shard
/// failed.
func instant(_ flag: String, _ text: String) throws -> Timestamp {
    guard let t = Timestamp(instant: text) else {
        throw ValidationError(
            "\(flag) \(text): not an ISO 8601 time with a zone offset, such as "
                + "2026-03-01T03:00:00Z or 2026-03-01T12:00:00+09:00 (a time without an offset is refused)")
    }
    let year = t.calendarDate(in: TimeZone(secondsFromGMT: 0) ?? .current).year
    guard (1...9999).contains(year) else {
        throw ValidationError("\(flag) \(text): is in the year \(year) in UTC; only years 0001-9999 are accepted")
    }
    return t
}

/// The flags every run-like command takes (cli.md).
struct RunOptions: ParsableArguments {
    @Option(
        help: "The run's clock, ISO 8601 with its zone offset (default: the database's clock when the run starts).",
        transform: { try instant("--now", $0) })
    var now: Timestamp?

    @Option(
        help: "Run only the filters of owners with owner_id mod N = K, as K/N.",
        transform: { text in
            do { return try Shard(parsing: text) } catch let error as ShardError {
                throw ValidationError(error.description)
            }
        })
    var shard: Shard = .all

    @Option(help: "At most this many new pairs per filter and run.")
    var maxPerFilter: Int = 100

    @Flag(help: "Evaluate and report; write nothing.")
    var dryRun = false

    @Option(help: "The time zone of the run's date (ages) and of notify_every's days and months.")
    var timeZone: String = "Asia/Tokyo"

    @Flag(help: "Accept a time zone other than the one the shard's previous runs used.")
    var timeZoneChange = false

    @Flag(
        help: """
            Accept a --now more than an hour after the database's clock (a test world): without it such a run \
            is refused, since it would hold back its filters' digests and forget pairs early.
            """)
    var allowFutureNow = false

    @Option(
        help: """
            Days a recorded pair is kept; older pairs are forgotten (never one waiting for its digest). Every \
            kept pair makes each day's write a little dearer (README, "How a run works": storage). Default: \
            the latest run's or backfill's, 180 for a new service: one started by hand without the flag keeps \
            it; one given the flag sets it for every later run (a warning says so when it differs).
            """)
    var retentionDays: Int?

    @Option(help: "Filters per unit of work (each unit commits its matches, notifications and progress together).")
    var unitFilters: Int = 2_000

    @Option(help: "At most this many new matches per unit of work.")
    var unitMatches: Int = 50_000

    @Option(
        help: """
            Connections that write units of work; at most one a core writes rows at once, the others wait for \
            their commit; units still commit in filter-id order (1: one at a time). A dry run uses one.
            """)
    var writeConnections: Int = PostgresMatchingStore.defaultWriteConnections

    /// The connections the store opens: one for a dry run, which writes nothing and must never take a
    /// connection slot a real run beside it needs (cli.md; found by review in session 32).
    var storeConnections: Int { dryRun ? 1 : writeConnections }

    @Option(help: "Match engine: bitset (columnar, all cores) or reference (the plain evaluator it is tested against).")
    var engine: EngineChoice = .bitset

    func validate() throws {
        guard unitMatches >= 1 else { throw ValidationError("--unit-matches must be at least 1") }
        guard unitFilters >= 1 else { throw ValidationError("--unit-filters must be at least 1") }
        guard (1...16).contains(writeConnections) else {
            throw ValidationError("--write-connections must be between 1 and 16")
        }
        // Not 0 (found by review in session 32): a run that records nothing still moves its shard's progress past
        // the day's changes, which no later run then reads.
        guard maxPerFilter >= 1 else { throw ValidationError("--max-per-filter must be at least 1") }
        if let retentionDays, !(1...Retention.maximumDays).contains(retentionDays) {
            throw ValidationError("--retention-days must be between 1 and \(Retention.maximumDays)")
        }
        guard TimeZone(identifier: timeZone) != nil else {
            throw ValidationError("--time-zone \(timeZone): unknown zone")
        }
    }

    var zone: TimeZone { TimeZone(identifier: timeZone) ?? .tokyo }

    /// Refuses a `--now` more than an hour after the database's clock unless `--allow-future-now` (`ClockAhead`);
    /// a dry run writes nothing and may look ahead.
    func checkClock(_ store: any ProfileRepository) throws {
        guard !dryRun, !allowFutureNow else { return }
        try ClockAhead.check(now, against: store)
    }

    /// How the pass works through its units: `--unit-filters`, `--unit-matches`, stopping on `stop`.
    func pass(stop: StopRequest) -> PassOptions {
        PassOptions(stop: stop, unitFilterLimit: unitFilters, unitMatchLimit: unitMatches)
    }
}

/// How the command reports.
struct OutputOptions: ParsableArguments {
    @Option(help: "Report format: text or json.")
    var format: ReportFormat = .text

    @Option(help: "Log format on standard error: logfmt or json.")
    var logFormat: LogFormat = .logfmt

    @Option(help: "Least severe log level written: trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    @Option(help: "Write Prometheus text-format metrics to this file (atomically) after the run.")
    var metricsFile: String?
}

extension ReportFormat: ExpressibleByArgument {}

enum EngineChoice: String, ExpressibleByArgument, CaseIterable {
    case bitset
    case reference

    var engine: any MatchEngine {
        switch self {
        case .bitset: return BitsetMatchEngine()
        case .reference: return ReferenceMatchEngine()
        }
    }
}
