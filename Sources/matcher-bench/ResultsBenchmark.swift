import ArgumentParser
import Foundation
import Matching
import PostgresClient

/// How fast a large query result is decoded and read: the worker reads some lists as query results (a digest
/// day's waiting matches: millions of rows at 1M x 100k), not as COPY.
struct ResultsBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "results",
        abstract: "Decoding a large query result (two bigints and a timestamptz a row) with PostgresClient.",
        discussion: """
            Times `query` of --rows rows from generate_series, every value read through the typed accessors, \
            against the same statement's server time alone (`SELECT count(*)` over it); prints each run, the \
            medians, and the client's time per row.
            """)

    @OptionGroup var database: DatabaseOptions

    @Option(help: "Rows in the result.")
    var rows = 1_000_000

    @Option(help: "Runs; the median is reported.")
    var repetitions = 7

    func validate() throws {
        guard rows > 0 else { throw ValidationError("--rows must be positive") }
        guard repetitions > 0 else { throw ValidationError("--repetitions must be positive") }
    }

    func run() throws {
        let connection = try PostgresConnection(
            try database.conninfo(), options: ["application_name": "matcher-bench"])
        defer { connection.close() }
        let rowsQuery = """
            SELECT g AS filter_id, g * 7 AS profile_id, timestamptz '2026-03-01 03:00+00' + g * interval '1 second'
            FROM generate_series(1, $1::bigint) g
            """
        var whole: [Double] = []
        var server: [Double] = []
        for run in 1...repetitions {
            let clock = ContinuousClock()
            let serverStart = clock.now
            let counted = try connection.query("SELECT count(*) FROM (\(rowsQuery)) s", [.int8(Int64(rows))])
            let serverSeconds = (clock.now - serverStart).seconds
            let start = clock.now
            var sum: Int64 = 0
            for row in try connection.query(rowsQuery, [.int8(Int64(rows))]).rows {
                sum &+= try row.int64(0) &+ row.int64(1) &+ row.timestamp(2).microsecondsSinceEpoch
            }
            let seconds = (clock.now - start).seconds
            guard try counted.rows[0].int64(0) == Int64(rows), sum != 0 else {
                throw ValidationError("the result did not hold \(rows) rows")
            }
            whole.append(seconds)
            server.append(serverSeconds)
            print(String(format: "run %d: query and read %.3f s, server alone %.3f s", run, seconds, serverSeconds))
        }
        let client = median(whole) - median(server)
        print(
            String(
                format: "medians: query and read %.3f s, server alone %.3f s; client %.3f s, %.0f ns a row",
                median(whole), median(server), client, client / Double(rows) * 1e9))
    }
}
