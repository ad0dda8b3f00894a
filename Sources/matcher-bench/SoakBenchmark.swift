import ArgumentParser
import Chronology
import Foundation
import MatchingPostgres
import PostgresClient

/// Matching over months: N simulated days of a realistic mix on one database, one `matcher run` a day, and
/// per day the run's time, peak RSS, candidates, new matches, and `filter_matches` rows and size. A day's
/// cost must follow the day's work: flat once retention applies, however long the service has run.
///
/// A day: logins by `--logins` of the profiles (an UPDATE of `last_login_at` only: no candidate), then
/// `matcher seed --changes` with `--changes` of the profiles (15 % sign-ups; 85 % existing members, 45 % of
/// them editing one or two items; plus hides, deletes, reactivations, filter edits and new blocks on top).
/// Then a checkpoint (production checkpoints every few minutes, so a daily run always follows one), the run,
/// timed with the WAL it wrote and its full-page images, the push sender (the day's digests are sent), and the
/// night: a VACUUM of the worker's tables, autovacuum's turn between two daily runs, timed apart.
struct SoakBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "N days of a realistic mix, one run a day: per-day time, memory, candidates, matches and table size.")

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Profiles in the seeded world.") var profiles = 200_000
    @Option(help: "Saved filters in the seeded world.") var filters = 20_000
    @Option(help: "Days to simulate.") var days = 30
    @Option(help: "Share of profiles logging in each day.") var logins = 0.30
    @Option(help: "Share of profiles changed each day (sign-ups and edits; see the abstract).") var changes = 0.06
    @Option(help: "--retention-days for every run.") var retentionDays = 7

    static let start = "2026-03-01T03:00:00Z"

    func run() throws {
        let admin = try database.conninfo()
        let matcher = MigrationRunner.currentExecutable.deletingLastPathComponent().appendingPathComponent("matcher")
            .path
        let name = "matcher_bench_soak"
        let connection = try PostgresConnection(admin)
        try connection.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        try connection.execute("CREATE DATABASE \(name)")
        connection.close()
        let info = try PostgresConnection.conninfo(admin, overriding: ["dbname": name])
        let environment = ["DATABASE_URL": info]
        let db = try PostgresConnection(info)
        defer { db.close() }
        func matcherStep(_ what: String, _ arguments: [String]) throws -> Shell.ChildResult {
            let result = try Shell.timedChild(matcher, arguments, environment: environment)
            guard result.status == 0 else { throw ValidationError("\(what) failed: \(result.stderr.suffix(2000))") }
            return result
        }
        say(
            "soak: \(profiles) profiles x \(filters) filters, \(days) days, logins \(logins), changes \(changes), "
                + "retention \(retentionDays) days")
        _ = try matcherStep("migrate", ["migrate"])
        _ = try matcherStep(
            "seed",
            [
                "seed", "--profiles", "\(profiles)", "--filters", "\(filters)", "--seed", "1",
                "--now", Self.start, "--replace",
            ])
        say(
            "day  run_s  read_s  eval_s  write_s  forget_s  peak_MiB  candidates  new_matches  forgotten  rows        size_MiB"
                + "  notifications  runs  wal_MiB  fpi_k  vacuum_s  cpu_s  server_cpu_s"
        )
        let server = ServerCPU(db)
        guard let first = Timestamp(iso8601: Self.start) else { return }
        for day in 1...max(1, days) {
            let clock = first.adding(days: day - 1).iso8601
            if day > 1 {
                try db.query(
                    """
                    UPDATE profiles SET last_login_at = $1
                    WHERE status = 1 AND (hashint8(id + $2) & 1023) < $3
                    """,
                    [
                        .timestamptz(first.adding(days: day - 1)), .int8(Int64(day)),
                        .int4(Int32(logins * 1024)),
                    ])
                _ = try matcherStep(
                    "changes",
                    [
                        "seed", "--changes", "\(Int(Double(profiles) * changes))",
                        "--seed", "\(day)", "--now", clock,
                    ])
            }
            // A daily run in production follows a checkpoint (they come every few minutes), so it pays a
            // full-page image for every page it is the first to touch: so does each soak day, measured.
            try? db.execute("CHECKPOINT")
            let walBefore = try? Self.walTotals(db)
            let serverBefore = server?.seconds()
            let result = try matcherStep(
                "run day \(day)",
                [
                    "run", "--now", clock, "--retention-days", "\(retentionDays)",
                    "--format", "json", "--log-format", "json",
                ])
            let serverCPU = server?.seconds().flatMap { after in serverBefore.map { after - $0 } }
            let wal = (try? Self.walTotals(db)).flatMap { after in walBefore.map { after - $0 } } ?? .zero
            let report = Self.report(result.stdout)
            // The push sender: the day's digests are sent (the worker forgets sent ones past the retention).
            try db.query(
                "UPDATE notifications SET sent_at = $1 WHERE sent_at IS NULL",
                [.timestamptz(first.adding(days: day - 1))])
            // The night between two daily runs: autovacuum's turn, which a soak that runs the days back to back
            // would not give it (a table that is never vacuumed cannot reuse the space its expired rows left).
            // Done here, outside the run's timing, and timed on its own.
            let night = try Shell.time {
                try db.execute("VACUUM (ANALYZE) filter_matches, matcher_waiting_matches, notifications")
            }
            let rows = try db.query(
                """
                SELECT (SELECT count(*) FROM filter_matches), pg_total_relation_size('filter_matches'),
                       (SELECT count(*) FROM notifications), (SELECT count(*) FROM matcher_runs)
                """
            ).rows[0]
            say(
                String(
                    format:
                        "%3d  %5.2f  %6.2f  %6.2f  %7.2f  %8.2f  %8d  %10d  %11d  %9d  %10d  %8.1f  %13d  %4d  %7.0f  %5.0f  %8.2f  %5.2f",
                    day, result.seconds, report.phase("read"), report.phase("evaluate"), report.phase("write"),
                    report.phase("forget"), result.maxRSSKiB / 1024, report.count("candidates"),
                    report.count("matches_written"), report.count("matches_forgotten"),
                    try rows.int64(0), Double(try rows.int64(1)) / 1_048_576, try rows.int64(2), try rows.int64(3),
                    wal.bytes / 1_048_576, wal.fullPageImages / 1000, night, result.cpuSeconds)
                    + "  " + (serverCPU.map { String(format: "%12.2f", $0) } ?? "           -"))
        }
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
