import ArgumentParser
import Chronology
import Foundation
import LoadWorld
import MatchingPostgres
import PostgresClient

/// Matching over months: N simulated days of a realistic mix on one database, one `matcher run` a day, and
/// per day the run's time, peak RSS, candidates, new matches, and `filter_matches` rows and size. A day's
/// cost must follow the day's work: flat once retention applies, however long the service has run.
///
/// A day: logins by `--logins` of the profiles (an UPDATE of `last_login_at` only: no candidate), then
/// `matcher seed --changes` with `--changes` of the profiles (15 % sign-ups; 85 % existing members, of whom 45 %
/// in the growing mix and 90 % in the steady one change one or two items' values, a plan change on top; plus
/// hides, deletes, reactivations, filter edits and new blocks on top). The issue's day (logins 30 %, edits
/// about 5 %, sign-ups about 1 %) is `--mix steady --changes 0.067`; the header prints what a day makes, and
/// the last column (`edited`) the profiles whose items the day's changes really changed, as the seeder
/// counted them against the values they replaced.
/// Then a checkpoint (production checkpoints every few minutes, so a daily run always follows one), the run,
/// timed with the WAL it wrote and its full-page images, the push sender (the day's digests are sent), and the
/// night: a VACUUM of the worker's tables, autovacuum's turn between two daily runs, timed apart. With
/// `--runs-per-day K` (24: an hourly timer) the day's changes are split between K runs, each after its own
/// checkpoint and followed by the push sender, and the day's line sums them.
struct SoakBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract:
            "N days of a realistic mix, one run a day (or more): per-day time, memory, candidates, matches and table size."
    )

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Profiles in the seeded world.") var profiles = 200_000
    @Option(help: "Saved filters in the seeded world.") var filters = 20_000
    @Option(help: "Days to simulate.") var days = 30
    @Option(help: "Share of profiles logging in each day.") var logins = 0.30
    @Option(help: "Share of profiles changed each day (sign-ups and edits; see the abstract).") var changes = 0.06
    @Option(help: "--retention-days for every run.") var retentionDays = 7
    @Option(
        help:
            "The days' mix: growing (few members leave; members, filters and a day's matches grow by about a fifth in 30 days) or steady (as many members and filters go as come: day 30 does day 3's work)."
    )
    var mix: DailyChangeMix.Name = .growing
    @Option(
        name: .customLong("keep-day"),
        help:
            "Keep a copy of the world as it stands just before this day's run, as database matcher_bench_soak_day_N, for `replay` (repeatable)."
    )
    var keepDays: [Int] = []
    @Option(
        help:
            "Every this many days, after the day's run, `matcher reindex` as its weekly timer starts it (rebuilds the primary key from twice its packed size); 0: never."
    )
    var reindexEvery = 0
    @Option(help: "The reindex's --min-ratio (its default: 2, as the weekly timer runs it).")
    var reindexMinRatio: Double?
    @Option(
        help:
            "Runs a day, evenly spaced from 03:00 UTC (24: an hourly timer); the day's changes are split between them and its line sums them (peak: the largest)."
    )
    var runsPerDay = 1
    @Option(
        help:
            "After migrating, ALTER TABLE filter_matches SET (fillfactor = N): the room a page keeps for the marks of its waiting matches (the migrations' 90 by default)."
    )
    var fillfactor: Int?
    @Option(
        help:
            "When the filters' digests fall: first-run (the first run is every filter's first digest, so a weekly filter's fall on days 1, 8, 15, ...; the soaks before this option) or spread (a service in its steady state: each filter's last digest before day 1 is spread over its notify_every, so every day has its share of multi-day digests from day 1 on)."
    )
    var digestPhases: DigestPhases = .firstRun

    enum DigestPhases: String, ExpressibleByArgument, CaseIterable {
        case firstRun = "first-run", spread
    }

    static let start = "2026-03-01T03:00:00Z"
    static let database = "matcher_bench_soak"

    /// The database `--keep-day N` leaves.
    static func kept(day: Int) -> String { "\(database)_day_\(day)" }

    /// `CREATE DATABASE ... TEMPLATE`'s copy strategy: PostgreSQL 15 copies through the WAL by default, and a
    /// kept 1.3 GB day took longer to copy than to run; FILE_COPY copies the files after a checkpoint, as
    /// before 15.
    static func copyStrategy(_ connection: PostgresConnection) throws -> String {
        try connection.query("SELECT current_setting('server_version_num')::int >= 150000").rows[0].bool(0)
            ? " STRATEGY file_copy" : ""
    }

    /// Day N's clock: 03:00 UTC, N - 1 days after `start`.
    static func clock(day: Int) -> Timestamp? { Timestamp(iso8601: start)?.adding(days: day - 1) }

    func validate() throws {
        guard runsPerDay >= 1 else { throw ValidationError("--runs-per-day must be at least 1") }
        if let reindexMinRatio {
            guard reindexMinRatio.isFinite, reindexMinRatio >= 1 else {
                throw ValidationError("--reindex-min-ratio must be at least 1")
            }
            guard reindexEvery > 0 else { throw ValidationError("--reindex-min-ratio needs --reindex-every") }
        }
        if let fillfactor, !(10...100).contains(fillfactor) {
            throw ValidationError("--fillfactor must be between 10 and 100")
        }
    }

    func run() throws {
        let admin = try database.conninfo()
        let matcher = MigrationRunner.currentExecutable.deletingLastPathComponent().appendingPathComponent("matcher")
            .path
        let name = Self.database
        let connection = try PostgresConnection(admin)
        defer { connection.close() }
        try connection.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        try connection.execute("CREATE DATABASE \(name)")
        for day in keepDays { try connection.execute("DROP DATABASE IF EXISTS \(Self.kept(day: day)) WITH (FORCE)") }
        let info = try PostgresConnection.conninfo(admin, overriding: ["dbname": name])
        let environment = ["DATABASE_URL": info]
        var db = try PostgresConnection(info)
        defer { db.close() }
        func percent(_ share: Double) -> String { String(format: "%.1f %%", share * 100) }
        func matcherStep(_ what: String, _ arguments: [String]) throws -> Shell.ChildResult {
            try Self.matcherStep(matcher, what, arguments, environment: environment)
        }
        say(
            "soak: \(profiles) profiles x \(filters) filters, \(days) days, logins \(logins), changes \(changes), "
                + "mix \(mix.rawValue) (sign-ups \(percent(changes * mix.mix.insertShare)), updates editing items "
                + "\(percent(changes * mix.mix.itemEditShare)) of the profiles, each changing an item's value: "
                + "column edited), retention \(retentionDays) days"
                + (digestPhases == .spread ? ", digest phases spread" : ""))
        say(try ServerSettings.line(db))
        _ = try matcherStep("migrate", ["migrate"])
        if let fillfactor {
            try db.execute("ALTER TABLE filter_matches SET (fillfactor = \(fillfactor))")
        }
        _ = try matcherStep(
            "seed",
            [
                "seed", "--profiles", "\(profiles)", "--filters", "\(filters)", "--seed", "1",
                "--now", Self.start, "--replace",
            ])
        if digestPhases == .spread, let first = Self.clock(day: 1) {
            // Filter f of a k-day interval had its last digest p days before day 1 (p from 1 to k, by a hash of
            // its id): its digests fall on days k - p + 1, then every k days.
            try db.query(
                """
                INSERT INTO matcher_filter_state (filter_id, last_notified_at)
                SELECT f.id, $1::timestamptz - make_interval(days => 1 + ((hashint8(f.id) & 2147483647)
                           % greatest(1, round(extract(epoch FROM f.notify_every) / 86400)::int))::int)
                FROM saved_filters f
                ON CONFLICT (filter_id) DO UPDATE SET last_notified_at = excluded.last_notified_at
                """, [.timestamptz(first)])
        }
        say(
            "day  run_s  read_s  eval_s  write_s  forget_s  peak_MiB  candidates  new_matches  forgotten  rows        size_MiB"
                + "  notifications  runs  wal_MiB  fpi_k  vacuum_s  cpu_s  server_cpu_s  pkey_MiB  waiting  passed_over"
                + "  edited"
        )
        var editedDays: [Int] = []
        let server = ServerCPU(db)
        // A copy of the world as it stands just before the day's (first) run. A database with a session open
        // cannot be a template: the soak's own one closes meanwhile.
        func keep(_ day: Int) throws {
            db.close()
            try connection.execute(
                "CREATE DATABASE \(Self.kept(day: day)) TEMPLATE \(name)\(try Self.copyStrategy(connection))")
            db = try PostgresConnection(info)
        }
        for day in 1...max(1, days) {
            guard let today = Self.clock(day: day) else { return }
            if day > 1 {
                try db.query(
                    """
                    UPDATE profiles SET last_login_at = $1
                    WHERE status = 1 AND (hashint8(id + $2) & 1023) < $3
                    """,
                    [
                        .timestamptz(today), .int8(Int64(day)),
                        .int4(Int32(logins * 1024)),
                    ])
            }
            var total = DayTotals()
            // The profiles whose items the day's changes changed, as `matcher seed --changes` counted them.
            var edited = 0
            for slot in 0..<runsPerDay {
                let clock = today.adding(microseconds: Int64(slot) * Timestamp.microsecondsPerDay / Int64(runsPerDay))
                if day > 1 {
                    // One run a day keeps the seeds (and so the worlds) of the soaks before this option.
                    let seed = runsPerDay == 1 ? day : day * 100 + slot
                    let seeded = try matcherStep(
                        "changes",
                        [
                            "seed", "--changes", "\(Int(Double(profiles) * changes) / runsPerDay)",
                            "--seed", "\(seed)", "--now", clock.iso8601, "--mix", mix.rawValue, "--format", "json",
                        ])
                    edited += Self.report(seeded.stdout).count("profiles_edited")
                }
                if slot == 0, keepDays.contains(day) { try keep(day) }
                let measured = try Self.measureRun(
                    matcher, day: day, clock: clock, retentionDays: retentionDays, db: db, server: server,
                    environment: environment)
                total.add(measured)
                // The push sender: the run's digests are sent (the worker forgets sent ones past the retention).
                try db.query("UPDATE notifications SET sent_at = $1 WHERE sent_at IS NULL", [.timestamptz(clock)])
            }
            let (result, report, wal, serverCPU) = (total, total, total.wal, total.serverCPU)
            if reindexEvery > 0, day % reindexEvery == 0 {
                let reindex = try matcherStep(
                    "reindex day \(day)",
                    ["reindex", "--format", "json"] + (reindexMinRatio.map { ["--min-ratio", "\($0)"] } ?? []))
                say(
                    String(
                        format: "     day %d: matcher reindex %.2f s: %@", day, reindex.seconds,
                        Self.title(reindex.stdout)))
            }
            // The night between two daily runs: autovacuum's turn, which a soak that runs the days back to back
            // would not give it (a table that is never vacuumed cannot reuse the space its expired rows left).
            // Done here, outside the run's timing, and timed on its own.
            let night = try Shell.time {
                try db.execute("VACUUM (ANALYZE) filter_matches, matcher_waiting_matches, notifications")
            }
            let rows = try db.query(
                """
                SELECT (SELECT count(*) FROM filter_matches), pg_total_relation_size('filter_matches'),
                       (SELECT count(*) FROM notifications), (SELECT count(*) FROM matcher_runs),
                       pg_relation_size($1::regclass),
                       (SELECT count(*) FROM matcher_waiting_matches),
                       (SELECT count(*) FROM matcher_waiting_matches WHERE passed_over)
                """, [.text(PrimaryKeyUpkeep.index)]
            ).rows[0]
            say(
                String(
                    format:
                        "%3d  %5.2f  %6.2f  %6.2f  %7.2f  %8.2f  %@  %10d  %11d  %9d  %10d  %8.1f  %13d  %4d  %7.0f  %5.0f  %8.2f  %5.2f",
                    day, result.seconds, report.phase("read"), report.phase("evaluate"), report.phase("write"),
                    report.phase("forget"), Shell.padded(result.peakMiB, 8), report.count("candidates"),
                    report.count("matches_written"), report.count("matches_forgotten"),
                    try rows.int64(0), Double(try rows.int64(1)) / 1_048_576, try rows.int64(2), try rows.int64(3),
                    wal.bytes / 1_048_576, wal.fullPageImages / 1000, night, result.cpuSeconds)
                    + "  " + (serverCPU.map { String(format: "%12.2f", $0) } ?? "           -")
                    + String(format: "  %8.1f", Double(try rows.int64(4)) / 1_048_576)
                    + String(format: "  %7d  %11d", try rows.int64(5), try rows.int64(6))
                    + String(format: "  %6d", edited))
            if day > 1 { editedDays.append(edited) }
        }
        if !editedDays.isEmpty {
            let mean = Double(editedDays.reduce(0, +)) / Double(editedDays.count)
            say(
                String(
                    format: "edited: %.0f profiles a day on days 2-%d (mean), %.2f %% of the %d profiles seeded",
                    mean, days, mean / Double(max(1, profiles)) * 100, profiles))
        }
        for line in Shell.harnessPeakLines() { say(line) }
    }

    /// A JSON report's title.
    static func title(_ json: String) -> String {
        let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        return object?["title"] as? String ?? json
    }

    static func matcherStep(
        _ matcher: String, _ what: String, _ arguments: [String], environment: [String: String]
    ) throws -> Shell.ChildResult {
        let result = try Shell.timedChild(matcher, arguments, environment: environment)
        guard result.status == 0 else { throw ValidationError("\(what) failed: \(result.stderr.suffix(2000))") }
        return result
    }

    /// One daily run, measured.
    struct MeasuredRun {
        let child: Shell.ChildResult
        let report: Report
        let wal: WALTotals
        let serverCPU: Double?
    }

    /// Day `day`'s run on `db`'s database, after a checkpoint: a daily run in production follows one (they
    /// come every few minutes), so it pays a full-page image for every page it is the first to touch.
    static func measureRun(
        _ matcher: String, day: Int, clock at: Timestamp? = nil, retentionDays: Int, db: PostgresConnection,
        server: ServerCPU?, environment: [String: String]
    ) throws -> MeasuredRun {
        guard let clock = (at ?? clock(day: day))?.iso8601 else { throw ValidationError("no clock for day \(day)") }
        try? db.execute("CHECKPOINT")
        let walBefore = try? walTotals(db)
        let serverBefore = server?.seconds()
        let result = try matcherStep(
            matcher, "run day \(day)",
            [
                "run", "--now", clock, "--retention-days", "\(retentionDays)",
                "--format", "json", "--log-format", "json",
            ], environment: environment)
        let serverCPU = server?.seconds().flatMap { after in serverBefore.map { after - $0 } }
        let wal = (try? walTotals(db)).flatMap { after in walBefore.map { after - $0 } } ?? .zero
        return MeasuredRun(child: result, report: report(result.stdout), wal: wal, serverCPU: serverCPU)
    }

    /// A day's runs, summed (peak RSS: the largest), read as one run's child result and report.
    struct DayTotals {
        private(set) var seconds = 0.0
        private(set) var cpuSeconds = 0.0
        private(set) var maxRSSKiB = 0
        /// The harness's peak when the run of `maxRSSKiB` started.
        private(set) var harnessMaxRSSKiB = 0
        private(set) var wal = WALTotals.zero
        private(set) var serverCPU: Double? = 0
        private var values: [String: Double] = [:]

        mutating func add(_ run: MeasuredRun) {
            seconds += run.child.seconds
            cpuSeconds += run.child.cpuSeconds
            if run.child.maxRSSKiB > maxRSSKiB {
                maxRSSKiB = run.child.maxRSSKiB
                harnessMaxRSSKiB = run.child.harnessMaxRSSKiB
            }
            wal = wal + run.wal
            serverCPU = serverCPU.flatMap { total in run.serverCPU.map { total + $0 } }
            values.merge(run.report.values, uniquingKeysWith: +)
        }

        /// The day's peak in MiB, marked as `Shell.peakMiB` marks it.
        var peakMiB: String { Shell.peakMiB(maxRSSKiB, harness: harnessMaxRSSKiB) }
        func phase(_ name: String) -> Double { Report(values: values).phase(name) }
        func count(_ name: String) -> Int { Report(values: values).count(name) }
    }

    /// The server's WAL written so far (pg_stat_wal, PostgreSQL 14+; the whole server, which only the run
    /// writes to while it runs).
    struct WALTotals {
        static let zero = WALTotals(bytes: 0, fullPageImages: 0)
        let bytes: Double
        let fullPageImages: Double
        static func - (a: WALTotals, b: WALTotals) -> WALTotals {
            WALTotals(bytes: a.bytes - b.bytes, fullPageImages: a.fullPageImages - b.fullPageImages)
        }
        static func + (a: WALTotals, b: WALTotals) -> WALTotals {
            WALTotals(bytes: a.bytes + b.bytes, fullPageImages: a.fullPageImages + b.fullPageImages)
        }
    }

    static func walTotals(_ db: PostgresConnection) throws -> WALTotals {
        let row = try db.query("SELECT wal_bytes::float8, wal_fpi::float8 FROM pg_stat_wal").rows[0]
        return WALTotals(bytes: try row.double(0), fullPageImages: try row.double(1))
    }

    /// The run's JSON report: counts and phase seconds by their keys, wherever they sit.
    struct Report {
        let values: [String: Double]
        func phase(_ name: String) -> Double { values["\(name)_s"] ?? values[name] ?? 0 }
        func count(_ name: String) -> Int { Int(values[name] ?? 0) }
    }

    static func report(_ json: String) -> Report {
        var values: [String: Double] = [:]
        func walk(_ value: Any, _ key: String?) {
            if let object = value as? [String: Any] {
                for (k, v) in object { walk(v, k) }
            } else if let array = value as? [Any] {
                for element in array { walk(element, key) }
            } else if let number = value as? NSNumber, let key {
                values[key] = number.doubleValue
            } else if let text = value as? String, let key,
                let number = Double(text.replacingOccurrences(of: " s", with: ""))
            {
                values[key] = values[key] ?? number
            }
        }
        if let data = json.data(using: .utf8), let object = try? JSONSerialization.jsonObject(with: data) {
            walk(object, nil)
        }
        return Report(values: values)
    }
}

extension DailyChangeMix.Name: ExpressibleByArgument {}
