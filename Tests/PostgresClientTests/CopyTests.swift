import Chronology
import PostgresClient
import PostgresTestSupport
import Testing

/// A profile-like row, generated from its id.
private struct BulkRow: Equatable {
    var id: Int64
    var gender: Int16
    var score: Int32
    var birthDate: CalendarDate
    var updatedAt: Timestamp
    var name: String
    var hobbies: [Int16]
    var verified: Bool
    var income: Int16?

    static let fieldCount = 9

    init(_ id: Int64) {
        self.id = id
        gender = Int16(id % 3)
        score = Int32(truncatingIfNeeded: id &* 2_654_435_761)  // negative and positive
        birthDate = CalendarDate(daysSinceEpoch: Int32(id % 40_000) - 20_000)
        updatedAt = Timestamp(
            microsecondsSinceEpoch: 1_700_000_000_000_000 + id * 1_000_003 - 900_000_000_000_000 * (id % 3))
        name = id % 10 == 0 ? "名前\(id) 🎉" : "name\(id)"
        hobbies = (0..<Int16(id % 4)).map { Int16(id % 50) + $0 }
        verified = id % 2 == 0
        income = id % 5 == 0 ? nil : Int16(id % 1000)
    }

    init(_ row: inout BinaryCopyRow) throws {
        id = try #require(try row.int64())
        gender = try #require(try row.int16())
        score = try #require(try row.int32())
        birthDate = try #require(try row.date())
        updatedAt = try #require(try row.timestamp())
        name = try #require(try row.string())
        hobbies = try #require(try row.int16Array())
        verified = try unwrap(try row.bool())
        income = try row.int16()
    }

    func write(to writer: BinaryCopyWriter) {
        writer.beginRow(fieldCount: Self.fieldCount)
        writer.write(id)
        writer.write(gender)
        writer.write(score)
        writer.write(birthDate)
        writer.write(updatedAt)
        writer.write(name)
        writer.write(hobbies)
        writer.write(verified)
        writer.write(income)
    }
}

private let bulkTable = """
    CREATE TABLE bulk (id bigint PRIMARY KEY, gender smallint NOT NULL, score int NOT NULL, birth_date date NOT NULL,
                       updated_at timestamptz NOT NULL, name text NOT NULL, hobbies smallint[] NOT NULL,
                       verified bool NOT NULL, income smallint)
    """

/// Sums that the server and the client compute the same way.
private struct Checksum: Equatable {
    var count: Int64 = 0
    var ids: Int64 = 0
    var genders: Int64 = 0
    var scores: Int64 = 0
    var days: Int64 = 0
    var microsModulo: Int64 = 0
    var nameBytes: Int64 = 0
    var hobbyCount: Int64 = 0
    var hobbySum: Int64 = 0
    var verified: Int64 = 0
    var incomes: Int64 = 0
    var nullIncomes: Int64 = 0

    static let query = """
        SELECT count(*), sum(id)::int8, sum(gender)::int8, sum(score)::int8, sum(birth_date - DATE '1970-01-01')::int8,
               sum(mod((extract(epoch FROM updated_at) * 1000000)::int8, 1000000007))::int8,
               sum(octet_length(name))::int8, sum(cardinality(hobbies))::int8,
               coalesce(sum((SELECT sum(h) FROM unnest(hobbies) h)), 0)::int8,
               count(*) FILTER (WHERE verified), coalesce(sum(income), 0)::int8, count(*) FILTER (WHERE income IS NULL)
        FROM bulk
        """

    init() {}

    init(_ row: PostgresRow) throws {
        let v = try (0..<12).map { try row.int64($0) }
        (count, ids, genders, scores, days, microsModulo) = (v[0], v[1], v[2], v[3], v[4], v[5])
        (nameBytes, hobbyCount, hobbySum, verified, incomes, nullIncomes) = (v[6], v[7], v[8], v[9], v[10], v[11])
    }

    mutating func add(_ row: BulkRow) {
        count += 1
        ids += row.id
        genders += Int64(row.gender)
        scores += Int64(row.score)
        days += Int64(row.birthDate.daysSinceEpoch)
        let m = row.updatedAt.microsecondsSinceEpoch % 1_000_000_007
        microsModulo += m < 0 ? m : m  // PostgreSQL's mod keeps the sign of the dividend, as Swift's % does
        nameBytes += Int64(row.name.utf8.count)
        hobbyCount += Int64(row.hobbies.count)
        hobbySum += row.hobbies.reduce(0) { $0 + Int64($1) }
        verified += row.verified ? 1 : 0
        incomes += Int64(row.income ?? 0)
        nullIncomes += row.income == nil ? 1 : 0
    }
}

@Suite("Binary COPY")
struct CopyTests {
    @Test func millionRowsBothWays() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute(bulkTable)
        let rowCount: Int64 = 1_000_000
        var written = Checksum()
        let count = try connection.copyIn("COPY bulk FROM STDIN (FORMAT binary)") { writer in
            for id in 1...rowCount {
                let row = BulkRow(id)
                written.add(row)
                row.write(to: writer)
            }
        }
        #expect(count == Int(rowCount))
        #expect(written.count == rowCount)
        let server = try Checksum(connection.query(Checksum.query).rows[0])
        #expect(server == written)

        var read = Checksum()
        var mismatches = 0
        let readCount = try connection.copyOut("COPY bulk TO STDOUT (FORMAT binary)") { cursor in
            let row = try BulkRow(&cursor)
            if row != BulkRow(row.id) { mismatches += 1 }
            read.add(row)
        }
        #expect(readCount == Int(rowCount))
        #expect(mismatches == 0)
        #expect(read == written)
    }

    @Test func throwingCopyInBodyAbortsAndLeavesTheTableUnchanged() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute(bulkTable)
        try connection.copyIn("COPY bulk FROM STDIN (FORMAT binary)") { writer in
            for id in 1...3 { BulkRow(Int64(id)).write(to: writer) }
        }
        // Large enough that some data has been sent before the body throws.
        #expect(throws: Failure(reason: "stop")) {
            try connection.copyIn("COPY bulk FROM STDIN (FORMAT binary)") { writer in
                for id in 100...60_000 { BulkRow(Int64(id)).write(to: writer) }
                throw Failure(reason: "stop")
            }
        }
        #expect(!connection.isInTransaction)
        #expect(try connection.query("SELECT count(*), max(id) FROM bulk").rows[0].values == [.int8(3), .int8(3)])

        // Inside a transaction the abort fails the transaction, which rolls back.
        #expect(throws: Failure(reason: "stop")) {
            try connection.transaction { tx in
                try tx.query("DELETE FROM bulk")
                try tx.copyIn("COPY bulk FROM STDIN (FORMAT binary)") { _ in throw Failure(reason: "stop") }
            }
        }
        #expect(try connection.query("SELECT count(*) FROM bulk").rows[0].int64(0) == 3)
    }

    @Test func serverErrorDuringCopyInSurfacesAndConnectionStaysUsable() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute(bulkTable)
        let error = #expect(throws: PostgresError.self) {
            try connection.copyIn("COPY bulk FROM STDIN (FORMAT binary)") { writer in
                for id in 1...50_000 { BulkRow(Int64(id)).write(to: writer) }
                BulkRow(7).write(to: writer)
            }
        }
        #expect(error?.sqlState == "23505")
        #expect(error?.detail == "Key (id)=(7) already exists.")
        #expect(try connection.query("SELECT count(*) FROM bulk").rows[0].int64(0) == 0)

        let wrongType = #expect(throws: PostgresError.self) {
            try connection.copyIn(
                "COPY bulk (id, gender, score, birth_date, updated_at, name, hobbies, verified, income) FROM STDIN (FORMAT binary)"
            ) { writer in
                writer.beginRow(fieldCount: 9)
                writer.write(Int32(1))  // int4 where int8 is expected
                for _ in 0..<8 { writer.writeNull() }
            }
        }
        #expect(wrongType?.kind == .server)
        #expect(try connection.query("SELECT 1").rows[0].int32(0) == 1)
    }

    @Test func wrongFieldCountIsAUsageError() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute(bulkTable)
        let error = #expect(throws: PostgresError.self) {
            try connection.copyIn("COPY bulk FROM STDIN (FORMAT binary)") { writer in
                writer.beginRow(fieldCount: 9)
                writer.write(Int64(1))
            }
        }
        #expect(error?.kind == .usage)
        #expect(error?.message.contains("8 fields fewer") == true)
        #expect(try connection.query("SELECT count(*) FROM bulk").rows[0].int64(0) == 0)
    }

    @Test func throwingCopyOutCallbackLeavesTheConnectionUsable() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        var seen = 0
        #expect(throws: Failure(reason: "enough")) {
            try connection.copyOut(
                "COPY (SELECT g, repeat('x', 100) FROM generate_series(1, 2000000) g) TO STDOUT (FORMAT binary)"
            ) { _ in
                seen += 1
                if seen == 5 { throw Failure(reason: "enough") }
            }
        }
        #expect(seen == 5)
        #expect(try connection.query("SELECT 42").rows[0].int32(0) == 42)
    }

    @Test func copyMisuseIsReportedAndRecovered() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute("CREATE TABLE t (id int)")

        let textFormat = #expect(throws: PostgresError.self) {
            try connection.copyOut("COPY (SELECT 1) TO STDOUT") { _ in }
        }
        #expect(textFormat?.kind == .copy)

        let notCopy = #expect(throws: PostgresError.self) { try connection.copyOut("SELECT 1") { _ in } }
        #expect(notCopy?.kind == .usage)

        let wrongDirection = #expect(throws: PostgresError.self) {
            try connection.copyIn("COPY t TO STDOUT (FORMAT binary)") { _ in }
        }
        #expect(wrongDirection?.kind == .usage)

        let viaQuery = #expect(throws: PostgresError.self) { try connection.query("COPY t FROM STDIN") }
        #expect(viaQuery?.kind == .usage)
        let viaExecute = #expect(throws: PostgresError.self) { try connection.execute("COPY (SELECT 1) TO STDOUT") }
        #expect(viaExecute?.kind == .usage)

        let serverError = #expect(throws: PostgresError.self) {
            try connection.copyOut("COPY (SELECT 1/0) TO STDOUT (FORMAT binary)") { _ in }
        }
        #expect(serverError?.sqlState == "22012")
        #expect(try connection.query("SELECT count(*) FROM t").rows[0].int64(0) == 0)
    }

    @Test func emptyCopyOutAndCopyIn() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute("CREATE TABLE t (id int)")
        #expect(try connection.copyIn("COPY t FROM STDIN (FORMAT binary)") { _ in } == 0)
        #expect(try connection.copyOut("COPY t TO STDOUT (FORMAT binary)") { _ in } == 0)
    }
}
