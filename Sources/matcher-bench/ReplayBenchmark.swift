import ArgumentParser
import Foundation
import MatchingPostgres
import PostgresClient

/// Days a soak kept (`soak --keep-day N`) run again, alternating, on fresh copies: an early day and a late
/// one compared on the same VM at the same hour. A soak runs its days one after the other over ten minutes or
/// more, and this VM's speed drifts by a third in that time, so a late day's lone time says as much about the
/// hour as about the history its tables hold. Each round copies every kept day's world
/// (`CREATE DATABASE ... TEMPLATE`), then runs each day's run as the soak did (checkpoint first), in turn;
/// the order of the days alternates from one round to the next.
struct ReplayBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Kept soak days run again, alternating on fresh copies: medians per day and their ratio.")

    @OptionGroup var database: DatabaseOptions
    @Option(
        name: .customLong("day"),
        help: "A day kept by `soak --keep-day` (repeatable; the first is the baseline of the ratios).")
    var days: [Int] = []
    @Option(help: "Rounds: each runs every day once.") var rounds = 3
    @Option(help: "--retention-days of the runs (the soak's).") var retentionDays = 7
    @Option(
        name: .customLong("set"),
        help:
            "A server setting for the copies, NAME=VALUE (ALTER DATABASE ... SET; repeatable), e.g. wal_compression=lz4."
    )
    var settings: [String] = []
    @Flag(
        help: """
            Before each run, read every table and index of the copy into shared buffers (pg_prewarm), as on a \
            server whose buffers hold the worker's tables; without it each run starts on a copy whose buffers \
            are cold. Needs shared_buffers larger than the copy to mean anything.
            """)
    var prewarm = false
    @Flag(
        help: """
            Before each run, rebuild filter_matches' primary key on the copy as `matcher reindex` does \
            (REINDEX INDEX CONCURRENTLY): a day on a packed key against the same day on the key the soak's days \
            left.
            """)
    var reindex = false

    func validate() throws {
        guard days.count >= 1 else { throw ValidationError("name at least one --day") }
        guard rounds >= 1 else { throw ValidationError("--rounds must be 1 or more") }
        for setting in settings {
            let parts = setting.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].allSatisfy({ $0.isLetter || $0 == "_" || $0 == "." }) else {
                throw ValidationError("--set takes NAME=VALUE, got '\(setting)'")
            }
        }
    }

    func run() throws {
        let admin = try database.conninfo()
        let matcher = MigrationRunner.currentExecutable.deletingLastPathComponent().appendingPathComponent("matcher")
            .path
        let connection = try PostgresConnection(admin)
        defer { connection.close() }
        for day in days {
            let exists = try connection.query(
                "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", [.text(SoakBenchmark.kept(day: day))]
            ).rows[0].bool(0)
            guard exists else {
                throw ValidationError("no \(SoakBenchmark.kept(day: day)): run `soak --keep-day \(day)` first")
            }
        }
        let copy = "matcher_bench_replay"
        let strategy = try SoakBenchmark.copyStrategy(connection)
        let info = try PostgresConnection.conninfo(admin, overriding: ["dbname": copy])
        say(
            "replay: days \(days.map(String.init).joined(separator: ", ")), \(rounds) rounds, retention "
                + "\(retentionDays) days" + (settings.isEmpty ? "" : ", " + settings.joined(separator: ", "))
                + (prewarm ? ", prewarmed" : "") + (reindex ? ", primary key rebuilt before each run" : ""))
        say(try ServerSettings.line(connection) + (settings.isEmpty ? "" : " (the copies: --set above)"))
        say("round  day  run_s  read_s  eval_s  write_s  forget_s  peak_MiB  cpu_s  server_cpu_s  wal_MiB  fpi_k")
        var runs: [Int: [Double]] = [:]
        var cpus: [Int: [Double]] = [:]
        var serverCPUs: [Int: [Double]] = [:]
        for round in 1...rounds {
            let order = round % 2 == 1 ? days : days.reversed()
            for day in order {
                try connection.execute("DROP DATABASE IF EXISTS \(copy) WITH (FORCE)")
                try connection.execute("CREATE DATABASE \(copy) TEMPLATE \(SoakBenchmark.kept(day: day))\(strategy)")
                for setting in settings {
                    let parts = setting.split(separator: "=", maxSplits: 1).map(String.init)
                    // A utility statement takes no parameters: the server quotes the name and value itself.
                    let statement = try connection.query(
                        "SELECT format('ALTER DATABASE %I SET %I = %L', $1::text, $2::text, $3::text)",
                        [.text(copy), .text(parts[0]), .text(parts[1])]
                    ).rows[0].string(0)
                    try connection.execute(statement)
                }
                let db = try PostgresConnection(info)
                defer { db.close() }
                if prewarm {
                    try db.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
                    _ = try db.query(
                        """
                        SELECT sum(pg_prewarm(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')
                        """)
                }
                if reindex {
                    let rebuilt = try PrimaryKeyUpkeep(connection: db).rebuild(minimumRatio: 1)
                    say(
                        String(
                            format: "  day %d: primary key rebuilt in %.2f s, %.1f -> %.1f MiB (packed %.1f MiB)", day,
                            rebuilt.seconds, Double(rebuilt.before.bytes) / 1_048_576,
                            Double(rebuilt.after?.bytes ?? 0) / 1_048_576,
                            Double(rebuilt.before.packedBytes) / 1_048_576))
                }
                let measured = try SoakBenchmark.measureRun(
                    matcher, day: day, retentionDays: retentionDays, db: db, server: ServerCPU(db),
                    environment: ["DATABASE_URL": info])
                let report = measured.report
                runs[day, default: []].append(measured.child.seconds)
                cpus[day, default: []].append(measured.child.cpuSeconds)
                if let server = measured.serverCPU { serverCPUs[day, default: []].append(server) }
                say(
                    String(
                        format: "%5d  %3d  %5.2f  %6.2f  %6.2f  %7.2f  %8.2f  %@  %5.2f",
                        round, day, measured.child.seconds, report.phase("read"), report.phase("evaluate"),
                        report.phase("write"), report.phase("forget"),
                        Shell.padded(
                            Shell.peakMiB(measured.child.maxRSSKiB, harness: measured.child.harnessMaxRSSKiB), 8),
                        measured.child.cpuSeconds)
                        + "  " + (measured.serverCPU.map { String(format: "%12.2f", $0) } ?? "           -")
                        + String(
                            format: "  %7.0f  %5.0f", measured.wal.bytes / 1_048_576,
                            measured.wal.fullPageImages / 1000))
            }
        }
        try connection.execute("DROP DATABASE IF EXISTS \(copy) WITH (FORCE)")
        let baseline = days[0]
        for day in days {
            let line =
                "day \(day) medians: run \(Self.format(runs[day])) s, worker CPU \(Self.format(cpus[day])) s, "
                + "server CPU \(Self.format(serverCPUs[day])) s"
            let ratio =
                day == baseline
                ? ""
                : String(format: "; run %.2fx day %d", median(runs[day] ?? []) / median(runs[baseline] ?? []), baseline)
            say(line + ratio)
        }
        for line in Shell.harnessPeakLines() { say(line) }
    }

    static func format(_ values: [Double]?) -> String { String(format: "%.2f", median(values ?? [])) }
}
