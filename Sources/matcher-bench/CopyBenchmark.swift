import ArgumentParser
import Chronology
import Foundation
import PostgresClient

/// Binary COPY out and in of profile-like rows, ours against `psql \copy … (FORMAT binary)`.
struct CopyBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Binary COPY throughput of PostgresClient compared with psql's \\copy.",
        discussion: """
            Fills a table with profile-like rows, then times, alternately: COPY out decoding every field \
            against psql \\copy to a file, and COPY in from an in-memory array against psql \\copy from a file \
            (the table truncated before each run). Prints each run and the medians.
            """)

    @OptionGroup var database: DatabaseOptions

    @Option(help: "Rows in the table.")
    var rows = 1_000_000

    @Option(help: "Runs of each side; the median is reported.")
    var repetitions = 5

    @Option(help: "The psql executable (default: psql on PATH, else the newest /usr/lib/postgresql/*/bin/psql).")
    var psql: String?

    func validate() throws {
        guard rows > 0 else { throw ValidationError("--rows must be positive") }
        guard repetitions > 0 else { throw ValidationError("--repetitions must be positive") }
    }

    func run() throws {
        let conninfo = try database.conninfo()
        let psqlPath = try psql ?? Shell.psql()
        let connection = try PostgresConnection(conninfo, options: ["application_name": "matcher-bench"])
        let suffix = "\(ProcessInfo.processInfo.processIdentifier)"
        let source = "bench_copy_source_\(suffix)"
        let target = "bench_copy_target_\(suffix)"
        // psql's input for COPY in, and the file its COPY out writes (kept apart, so that the input stays intact).
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("matcher-bench-copy-\(suffix).bin")
        let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent(
            "matcher-bench-copy-\(suffix)-out.bin")
        defer {
            try? connection.execute("DROP TABLE IF EXISTS \(source); DROP TABLE IF EXISTS \(target)")
            try? FileManager.default.removeItem(at: file)
            try? FileManager.default.removeItem(at: outputFile)
        }
        print("server: \(connection.endpointDescription), PostgreSQL \(connection.serverVersion)")
        print("psql: \(psqlPath)")

        print("filling \(source) with \(rows) rows…")
        try connection.execute("DROP TABLE IF EXISTS \(source); DROP TABLE IF EXISTS \(target)")
        try connection.execute(
            """
            CREATE TABLE \(source) (
                id bigint PRIMARY KEY, gender smallint NOT NULL, prefecture smallint NOT NULL,
                height smallint NOT NULL, plan smallint NOT NULL, status smallint NOT NULL,
                birth_date date NOT NULL, income smallint, hobbies smallint[] NOT NULL,
                verified boolean NOT NULL, updated_at timestamptz NOT NULL);
            INSERT INTO \(source)
            SELECT g, 1 + g % 2, 1 + g % 47, 140 + g % 60, g % 3, CASE WHEN g % 50 = 0 THEN 2 ELSE 1 END,
                   DATE '1960-01-01' + (g::int8 * 7919 % 20000)::int,
                   CASE WHEN g % 4 = 0 THEN NULL ELSE g % 20 END,
                   ARRAY[g % 30, g * 7 % 30, g * 13 % 30]::smallint[],
                   g % 3 = 0, TIMESTAMPTZ '2024-01-01 00:00:00+00' + g * INTERVAL '1.000001 second'
            FROM generate_series(1, \(rows)) g;
            CREATE TABLE \(target) (LIKE \(source) INCLUDING ALL);
            """)
        try connection.execute("VACUUM ANALYZE \(source)")
        // Write out the setup's dirty pages now rather than during a measured run (needs superuser
        // or pg_checkpoint; without it the runs are just noisier).
        try? connection.execute("CHECKPOINT")

        // The rows to write, loaded once (also a warm-up of the table's pages).
        var profiles: [BenchProfile] = []
        profiles.reserveCapacity(rows)
        try connection.copyOut("COPY \(source) TO STDOUT (FORMAT binary)") { row in
            profiles.append(try BenchProfile(&row))
        }
        let expected = Checksum(profiles)
        // psql's input for COPY in: the same rows, written by psql.
        try runPSQL(psqlPath, conninfo, "\\copy \(source) TO '\(file.path)' (FORMAT binary)")

        print("\nCOPY out, decoding every field (ours) vs psql \\copy to a file:")
        var oursOut: [Double] = []
        var psqlOut: [Double] = []
        for run in 1...repetitions {
            var ours = 0.0
            var theirs = 0.0
            // Alternate which side goes first, so that neither always runs on a warmer server.
            for side in run % 2 == 1 ? [true, false] : [false, true] {
                if side {
                    var checksum = Checksum()
                    ours = try measure {
                        try connection.copyOut("COPY \(source) TO STDOUT (FORMAT binary)") { row in
                            checksum.add(try BenchProfile(&row))
                        }
                    }
                    guard checksum == expected else {
                        throw ValidationError("COPY out read other rows: \(checksum) vs \(expected)")
                    }
                } else {
                    theirs = try measure {
                        try runPSQL(psqlPath, conninfo, "\\copy \(source) TO '\(outputFile.path)' (FORMAT binary)")
                    }
                }
            }
            oursOut.append(ours)
            psqlOut.append(theirs)
            print("  run \(run): ours \(format(ours)), psql \(format(theirs))")
        }

        print(
            "\nCOPY in, encoding from memory (ours) vs psql \\copy from a file (\(target) truncated before each run):")
        var oursIn: [Double] = []
        var psqlIn: [Double] = []
        for run in 1...repetitions {
            var ours = 0.0
            var theirs = 0.0
            for side in run % 2 == 1 ? [true, false] : [false, true] {
                try connection.execute("TRUNCATE \(target)")
                if side {
                    ours = try measure {
                        try connection.copyIn("COPY \(target) FROM STDIN (FORMAT binary)") { writer in
                            for profile in profiles { profile.write(to: writer) }
                        }
                    }
                } else {
                    theirs = try measure {
                        try runPSQL(psqlPath, conninfo, "\\copy \(target) FROM '\(file.path)' (FORMAT binary)")
                    }
                }
                try verify(connection, target, expected)
            }
            oursIn.append(ours)
            psqlIn.append(theirs)
            print("  run \(run): ours \(format(ours)), psql \(format(theirs))")
        }

        print("\nmedians of \(repetitions) runs, \(rows) rows:")
        report("COPY out", ours: median(oursOut), psql: median(psqlOut))
        report("COPY in ", ours: median(oursIn), psql: median(psqlIn))
    }

    private func verify(_ connection: PostgresConnection, _ table: String, _ expected: Checksum) throws {
        let row = try connection.query(
            """
            SELECT count(*), sum(id)::int8, sum(height)::int8, sum(birth_date - DATE '1970-01-01')::int8,
                   count(income), sum(cardinality(hobbies))::int8
            FROM \(table)
            """
        ).rows[0]
        let found = try (0..<6).map { try row.int64($0) }
        let wanted = [
            expected.count, expected.ids, expected.heights, expected.days, expected.incomes, expected.hobbies,
        ]
        guard found == wanted else { throw ValidationError("\(table) holds other rows: \(found) vs \(wanted)") }
    }

    private func report(_ name: String, ours: Double, psql: Double) {
        print("  \(name): ours \(format(ours)), psql \(format(psql)), ours/psql \(String(format: "%.2f", ours / psql))")
    }

    private func format(_ seconds: Double) -> String {
        String(format: "%.3f s (%.0f rows/s)", seconds, Double(rows) / seconds)
    }

    private func measure(_ body: () throws -> Void) throws -> Double { try Shell.time(body) }

    private func runPSQL(_ path: String, _ conninfo: String, _ command: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", conninfo, "-c", command]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ValidationError("psql failed (status \(process.terminationStatus)) running \(command)")
        }
    }
}

/// A profile-like row, as the matcher loads them.
private struct BenchProfile {
    var id: Int64
    var gender: Int16
    var prefecture: Int16
    var height: Int16
    var plan: Int16
    var status: Int16
    var birthDate: CalendarDate
    var income: Int16?
    var hobbies: [Int16]
    var verified: Bool
    var updatedAt: Timestamp

    init(_ row: inout BinaryCopyRow) throws {
        func required<T>(_ value: T?) throws -> T {
            guard let value else { throw ValidationError("unexpected NULL in field \(row.fieldIndex - 1)") }
            return value
        }
        id = try required(row.int64())
        gender = try required(row.int16())
        prefecture = try required(row.int16())
        height = try required(row.int16())
        plan = try required(row.int16())
        status = try required(row.int16())
        birthDate = try required(row.date())
        income = try row.int16()
        hobbies = try required(row.int16Array())
        verified = try required(row.bool())
        updatedAt = try required(row.timestamp())
    }

    func write(to writer: BinaryCopyWriter) {
        writer.beginRow(fieldCount: 11)
        writer.write(id)
        writer.write(gender)
        writer.write(prefecture)
        writer.write(height)
        writer.write(plan)
        writer.write(status)
        writer.write(birthDate)
        writer.write(income)
        writer.write(hobbies)
        writer.write(verified)
        writer.write(updatedAt)
    }
}

/// Sums that show two sets of rows are the same (and keep the decoding from being optimised away).
private struct Checksum: Equatable, CustomStringConvertible {
    var count: Int64 = 0
    var ids: Int64 = 0
    var heights: Int64 = 0
    var days: Int64 = 0
    var incomes: Int64 = 0
    var hobbies: Int64 = 0
    var other: Int64 = 0

    init() {}

    init(_ profiles: [BenchProfile]) {
        for profile in profiles { add(profile) }
    }

    mutating func add(_ p: BenchProfile) {
        count += 1
        ids &+= p.id
        heights &+= Int64(p.height)
        days &+= Int64(p.birthDate.daysSinceEpoch)
        incomes &+= p.income == nil ? 0 : 1
        hobbies &+= Int64(p.hobbies.count)
        other &+=
            Int64(p.gender) &+ Int64(p.prefecture) &+ Int64(p.plan) &+ Int64(p.status)
            &+ (p.verified ? 1 : 0) &+ p.updatedAt.microsecondsSinceEpoch &+ Int64(p.hobbies.first ?? 0)
    }

    var description: String { "count \(count), ids \(ids), heights \(heights), days \(days)" }
}
