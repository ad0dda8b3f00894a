import ArgumentParser
import Foundation

/// Benchmarks that print numbers. Each subcommand lives in its own file.
struct MatcherBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "matcher-bench",
        abstract: "Benchmarks of the matcher's building blocks.",
        subcommands: [
            CopyBenchmark.self, EngineBenchmark.self, VersusSQLBenchmark.self, IncrementalBenchmark.self,
            SoakBenchmark.self,
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

    /// Runs `<repo>/scripts/pg start` and returns the connection string it prints last.
    static func startPrivateServer() throws -> String {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let script = root.appendingPathComponent("scripts/pg")
        let process = Process()
        process.executableURL = script
        process.arguments = ["start"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let stdout = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let lines = String(decoding: stdout, as: UTF8.self).split(whereSeparator: \.isNewline)
        guard process.terminationStatus == 0, let conninfo = lines.last, !conninfo.isEmpty else {
            throw ValidationError(
                "\(script.path) start failed (status \(process.terminationStatus)); pass --database-url")
        }
        return String(conninfo)
    }
}

MatcherBench.main()
