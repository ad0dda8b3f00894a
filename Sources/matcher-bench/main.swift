import ArgumentParser
import Foundation

/// Benchmarks that print numbers. Each subcommand lives in its own file.
struct MatcherBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "matcher-bench",
        abstract: "Benchmarks of the matcher's building blocks.",
        subcommands: [
            CopyBenchmark.self, EngineBenchmark.self, VersusSQLBenchmark.self, IncrementalBenchmark.self,
            SoakBenchmark.self, ReplayBenchmark.self, ResultsBenchmark.self,
        ])
}

/// Where a benchmark's database is: `--database-url`, else `DATABASE_URL`, else the private
/// PostgreSQL of this checkout (`scripts/pg start`, as the integration tests use).
struct DatabaseOptions: ParsableArguments {
    @Option(name: .customLong("database-url"), help: "A libpq connection string or postgresql:// URI.")
    var databaseURL: String?

    func conninfo() throws -> String {
        if let databaseURL, !databaseURL.isEmpty { return databaseURL }
        if let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty { return url }
        return try Self.startPrivateServer()
    }

    /// Runs `<repo>/scripts/pg start` and returns the connection string it prints last. Through `Shell` (posix_spawn
    /// and wait4), not Foundation's `Process`: when the script had to start the server, `waitUntilExit` never
    /// saw the script end (it stayed a zombie, the benchmark hung).
    static func startPrivateServer() throws -> String {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let script = root.appendingPathComponent("scripts/pg").path
        let result = try Shell.timedChild(script, ["start"], environment: [:])
        let lines = result.stdout.split(whereSeparator: \.isNewline)
        guard result.status == 0, let conninfo = lines.last, !conninfo.isEmpty else {
            throw ValidationError(
                "\(script) start failed (status \(result.status)): \(result.stderr); pass --database-url")
        }
        return String(conninfo)
    }
}

MatcherBench.main()
