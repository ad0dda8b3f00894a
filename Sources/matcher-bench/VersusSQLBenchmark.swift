import ArgumentParser
import Foundation
import MatchingPostgres
import PostgresClient

/// Issue 8 (b): the first run end to end on the shared/bench world, beside the same job written as plain
/// SQL (`sqlpeer.sql`) on a second database with the same world, in one invocation: both times, the
/// ratio, and whether the written rows are identical.
struct VersusSQLBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "versus-sql",
        abstract: "First run of `matcher run` vs sqlpeer.sql on twin databases: times, ratio, identical rows.")

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Profiles in the synth.sql world.") var profiles = 100_000
    @Option(help: "Saved filters in the synth.sql world.") var filters = 10_000
    @Option(help: "The run's clock.") var clock = "2026-03-01T03:00:00Z"
    @Option(
        help: """
            Rounds: each times the worker and the peer back to back, the worker first in odd rounds and the peer \
            in even ones (the world is reset before each), and compares their rows; the medians and the median of \
            the rounds' ratios are reported.
            """)
    var repeats = 3
    @Option(help: "Folder with synth.sql and sqlpeer.sql (default: ../shared/bench beside the repository).")
    var benchDir: String?
    @Flag(help: "Skip the plain-SQL peer (minutes at 100k x 10k).") var skipPeer = false

    func run() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let bench = URL(
            fileURLWithPath: benchDir ?? root.deletingLastPathComponent().appendingPathComponent("shared/bench").path)
        let admin = try database.conninfo()
        let psql = try Shell.psql()
        let matcher = URL(fileURLWithPath: MigrationRunner.currentExecutable.deletingLastPathComponent().path)
            .appendingPathComponent("matcher").path
        guard FileManager.default.isExecutableFile(atPath: matcher) else {
            throw ValidationError("\(matcher) not found: build it with `swift build -c release --product matcher`")
        }
        print("versus-sql: \(profiles) profiles x \(filters) filters, clock \(clock), worker \(matcher)")
        print(try ServerSettings.line(admin))

        var conninfos: [String: String] = [:]
        for name in ["matcher_bench_worker", "matcher_bench_peer"] where !(skipPeer && name.hasSuffix("peer")) {
            let connection = try PostgresConnection(admin)
            try connection.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            try connection.execute("CREATE DATABASE \(name)")
            connection.close()
            let conninfo = try PostgresConnection.conninfo(admin, overriding: ["dbname": name])
            let target = try PostgresConnection(conninfo)
            try MigrationRunner(connection: target).apply(
                try MigrationRunner.load(from: root.appendingPathComponent("sql")))
            target.close()
            let load = try Shell.time {
                try Shell.run(
                    psql,
                    [
                        conninfo, "-q", "-v", "ON_ERROR_STOP=1", "-v", "profiles=\(profiles)",
                        "-v", "filters=\(filters)", "-f", bench.appendingPathComponent("synth.sql").path,
                    ])
            }
            print("  loaded \(name) in \(Shell.seconds(load))")
            // A settled world for both sides: hint bits set and statistics taken, so that neither side's first
            // timing pays for the load (the first worker round was 1.5-2.4 s slower than the next ones).
            let settle = try PostgresConnection(conninfo)
            try settle.execute("VACUUM (FREEZE, ANALYZE)")
            settle.close()
            conninfos[name] = conninfo
        }
        let worker = conninfos["matcher_bench_worker"]!

        // Rounds: the worker and the peer back to back, the worker first in odd rounds (1, 3, ...) and the peer
        // in even ones, so that a machine whose speed drifts (a shared VM) moves both sides of a round's ratio
        // alike. With an odd --repeats the worker goes first once more than the peer (2 of 3 rounds by default).
        // After each round both sides' rows are compared: the first mismatch ends the benchmark.
        var times: [Double] = []
        var peerTimes: [Double] = []
        var ratios: [Double] = []
        var peakRSS = 0, peakHarness = 0
        var lastReport = ""
        var lastRows: Checksums?
        let peer = conninfos["matcher_bench_peer"]
        for round in 0..<max(1, repeats) {
            var workerSeconds = 0.0
            var peerSeconds: Double?
            func timeWorker() throws {
                try reset(worker, settling: peer)
                let server = try? PostgresConnection(worker)
                defer { server?.close() }
                let serverCPU = server.flatMap(ServerCPU.init)
                let serverBefore = serverCPU?.seconds()
                let result = try Shell.timedChild(
                    matcher, ["run", "--now", clock, "--format", "json", "--log-format", "json"],
                    environment: ["DATABASE_URL": worker])
                guard result.status == 0 else { throw ValidationError("matcher run failed: \(result.stderr)") }
                workerSeconds = result.seconds
                if result.maxRSSKiB > peakRSS {
                    peakRSS = result.maxRSSKiB
                    peakHarness = result.harnessMaxRSSKiB
                }
                lastReport = result.stdout
                let serverSeconds = serverCPU?.seconds().flatMap { after in serverBefore.map { after - $0 } }
                print(
                    "  round \(round + 1) worker: \(Shell.seconds(result.seconds)), peak RSS "
                        + "\(Shell.peakMiB(result.maxRSSKiB, harness: result.harnessMaxRSSKiB)) MiB [\(Self.phases(result.stdout))], CPU: worker "
                        + "\(Shell.seconds(result.cpuSeconds)), server \(serverSeconds.map(Shell.seconds) ?? "-")")
            }
            func timePeer(_ peer: String) throws {
                try reset(peer, settling: worker)
                let seconds = try Shell.time {
                    try Shell.run(
                        psql,
                        [
                            peer, "-q", "-v", "ON_ERROR_STOP=1", "-v", "clock=\(clock)",
                            "-f", bench.appendingPathComponent("sqlpeer.sql").path,
                        ])
                }
                peerSeconds = seconds
                print("  round \(round + 1) peer:   \(Shell.seconds(seconds))")
            }
            let peerFirst = round % 2 == 1
            if let peer, peerFirst {
                try timePeer(peer)
                try timeWorker()
            } else {
                try timeWorker()
                if let peer { try timePeer(peer) }
            }
            times.append(workerSeconds)
            if let peer, let peerSeconds {
                peerTimes.append(peerSeconds)
                ratios.append(peerSeconds / workerSeconds)
                print(
                    String(
                        format: "  round %d ratio: %.1fx (%@ first)", round + 1, peerSeconds / workerSeconds,
                        peerFirst ? "peer" : "worker"))
                // Each round's rows, before the next round's reset empties them.
                let a = try checksums(worker), b = try checksums(peer)
                guard a == b else {
                    print("  round \(round + 1): rows DIFFER (worker \(a), peer \(b))")
                    FileHandle.standardError.write(
                        Data(
                            ("versus-sql: round \(round + 1): the worker's rows differ from the peer's (worker \(a); "
                                + "peer \(b))\n").utf8))
                    throw ExitCode.failure
                }
                print("  round \(round + 1): rows identical (\(a.matches) matches, \(a.notifications) notifications)")
                lastRows = a
            }
        }
        let workerMedian = median(times)
        print("  worker phases (last run): \(Self.phases(lastReport))")

        print("")
        print(
            "worker (matcher run, median of \(times.count)): \(Shell.seconds(workerMedian))  peak RSS \(Shell.peakMiB(peakRSS, harness: peakHarness)) MiB"
        )
        if peer != nil {
            print("plain SQL (sqlpeer.sql, median of \(peerTimes.count)): \(Shell.seconds(median(peerTimes)))")
            print(
                String(
                    format: "ratio: the worker is %.1fx faster (median of the rounds' ratios; per round: %@)",
                    median(ratios), ratios.map { String(format: "%.1fx", $0) }.joined(separator: ", ")))
            // Compared after every round above (a mismatch ended the benchmark there).
            print(
                "rows identical: yes, in each of the \(ratios.count) rounds (last: \(lastRows.map { "\($0)" } ?? "-"))")
        } else {
            print("worker rows: \(try checksums(worker))")
        }
        for line in Shell.harnessPeakLines() { print(line) }
    }

    /// The tables a run (the worker's or the peer's) writes.
    static let outputTables = """
        filter_matches, notifications, matcher_runs, matcher_shard_progress, matcher_invalid_filters,
        matcher_filter_state, matcher_waiting_matches, matcher_quarantine, matcher_bulk_matches
        """

    /// Back to the freshly loaded world: the worker's outputs and bookkeeping emptied. The other side's
    /// database (`settling`), whose rows the round still compares, keeps them, but its output tables are
    /// vacuumed and analyzed now, so that its autovacuum (triggered by the rows its run just wrote) does not
    /// fire during this side's timing.
    private func reset(_ conninfo: String, settling other: String?) throws {
        if let other {
            let connection = try PostgresConnection(other)
            defer { connection.close() }
            try connection.execute("VACUUM (ANALYZE) \(Self.outputTables)")
        }
        let connection = try PostgresConnection(conninfo)
        defer { connection.close() }
        try connection.execute("TRUNCATE \(Self.outputTables)")
        try connection.execute("VACUUM (ANALYZE) \(Self.outputTables)")
        // Every timing starts after a checkpoint, so that none pays for the previous one's full-page writes
        // (a role without the right to checkpoint just measures without).
        try? connection.execute("CHECKPOINT")
    }

    /// Both tables' counts and the md5 of their rows.
    struct Checksums: Equatable, CustomStringConvertible {
        let matches: Int64
        let matchesMD5: String
        let notifications: Int64
        let notificationsMD5: String
        var description: String {
            "filter_matches \(matches) md5 \(matchesMD5.prefix(12)), notifications \(notifications) md5 "
                + "\(notificationsMD5.prefix(12))"
        }
    }

    /// Both tables' rows in the contract's columns, ids left out (identities differ): a match by the notification it
    /// points to (its filter and time: one a filter and run), "waiting" when it points to none, or "dangling" when
    /// it points to a notification that does not exist; a notification with its profile ids in order.
    private func checksums(_ conninfo: String) throws -> Checksums {
        let connection = try PostgresConnection(conninfo)
        defer { connection.close() }
        let matches = try connection.query(
            """
            SELECT count(*), md5(coalesce(string_agg(m.filter_id || ':' || m.profile_id || ':' || m.matched_at || ':'
                   || CASE WHEN m.notification_id IS NULL THEN 'waiting' WHEN n.id IS NULL THEN 'dangling'
                           ELSE n.filter_id || '@' || n.created_at END,
                   ',' ORDER BY m.filter_id, m.profile_id), ''))
            FROM filter_matches m LEFT JOIN notifications n ON n.id = m.notification_id
            """
        ).rows[0]
        let notes = try connection.query(
            """
            SELECT count(*), md5(coalesce(string_agg(recipient_id || ':' || filter_id || ':' || match_count || ':'
                   || profile_ids::text || ':' || created_at, ',' ORDER BY filter_id, id), ''))
            FROM notifications
            """
        ).rows[0]
        return Checksums(
            matches: try matches.int64(0), matchesMD5: try matches.string(1), notifications: try notes.int64(0),
            notificationsMD5: try notes.string(1))
    }

    static func phases(_ json: String) -> String {
        guard let data = json.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let time = object["time"] as? [String: Any]
        else { return "?" }
        return ["read", "evaluate", "write", "total"].map { key in
            "\(key) \(String(format: "%.3f", (time[key] as? NSNumber)?.doubleValue ?? .nan)) s"
        }.joined(separator: ", ")
    }
}

/// Child processes for benchmarks: run, time, peak RSS.
enum Shell {
    static func find(_ tool: String) throws -> String {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(dir)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw ValidationError("\(tool) not found on PATH")
    }

    /// psql on PATH, else the newest /usr/lib/postgresql/N/bin/psql.
    static func psql() throws -> String {
        if let onPath = try? find("psql") { return onPath }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            let candidate = "/usr/lib/postgresql/\(version)/bin/psql"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw ValidationError("psql not found on PATH or in /usr/lib/postgresql/*/bin")
    }

    static func run(_ executable: String, _ arguments: [String]) throws {
        let result = try timedChild(executable, arguments, environment: [:])
        guard result.status == 0 else {
            // Not the arguments: they carry the connection string, which may hold a password.
            throw ValidationError(
                "\(executable) failed (its \(arguments.count) arguments not shown: they hold the connection string): "
                    + result.stderr)
        }
    }

    static func time(_ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        try body()
        let (s, atto) = (ContinuousClock.now - start).components
        return Double(s) + Double(atto) / 1e18
    }

    static func seconds(_ value: Double) -> String { String(format: "%.3f s", value) }

    struct ChildResult {
        let status: Int32
        let seconds: Double
        /// wait4's ru_maxrss: see `harnessMaxRSSKiB`.
        let maxRSSKiB: Int
        /// The harness's own peak RSS (getrusage(RUSAGE_SELF)) when it started the child. glibc's posix_spawn
        /// starts the child with CLONE_VM | CLONE_VFORK, on the harness's memory, and at exec the kernel keeps
        /// that memory's peak as the child's maxrss: a child's figure not above this one may be the harness's.
        let harnessMaxRSSKiB: Int
        /// The child's CPU time, user and system (wait4's rusage).
        let cpuSeconds: Double
        let stdout: String
        let stderr: String
    }

    /// Runs a child to completion; its peak RSS comes from wait4's rusage.
    static func timedChild(
        _ executable: String, _ arguments: [String], environment: [String: String]
    ) throws -> ChildResult {
        let outPath = NSTemporaryDirectory() + "bench-\(UUID().uuidString).out"
        let errPath = NSTemporaryDirectory() + "bench-\(UUID().uuidString).err"
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        var actions: posix_spawn_file_actions_t = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let harness = harnessMaxRSSKiB()
        let start = ContinuousClock.now
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard spawned == 0 else {
            throw ValidationError("cannot start \(executable): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        let (s, atto) = (ContinuousClock.now - start).components
        let exited = (status & 0x7f) == 0
        return ChildResult(
            status: exited ? (status >> 8) & 0xff : 128 + (status & 0x7f),
            seconds: Double(s) + Double(atto) / 1e18, maxRSSKiB: Int(usage.ru_maxrss), harnessMaxRSSKiB: harness,
            cpuSeconds: Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
                + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6,
            stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }

    /// The harness's own peak RSS so far, KiB.
    static func harnessMaxRSSKiB() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Int(usage.ru_maxrss)
    }

    /// A child's peak RSS in MiB, with `*` after it when it is not above the harness's own peak at the child's
    /// start (`ChildResult.harnessMaxRSSKiB`): then it cannot be told from the harness's.
    static func peakMiB(_ maxRSSKiB: Int, harness harnessKiB: Int) -> String {
        "\(maxRSSKiB / 1024)" + (maxRSSKiB > harnessKiB ? "" : "*")
    }

    /// `text` right-aligned in `width` columns (a table's column keeps its width with a `*` mark).
    static func padded(_ text: String, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - text.count)) + text
    }

    /// The lines every benchmark that prints a child's peak RSS ends with: the harness's own peak, and what `*` means.
    static func harnessPeakLines() -> [String] {
        [
            "harness peak \(harnessMaxRSSKiB() / 1024) MiB: a child's peak below it cannot be told apart "
                + "(posix_spawn runs the child on the harness's memory until exec, whose peak the kernel keeps as the child's)",
            "*: a child's peak RSS not above the harness's own peak when the child started (it may be the harness's)",
        ]
    }
}
