import CLibPQ
import Chronology

extension PostgresConnection {
    /// Streams `COPY … TO STDOUT (FORMAT binary)` (`sql` is the whole statement) and calls `row`
    /// once per data row, with a cursor that is valid only during the call. Returns the row count.
    ///
    /// If `row` throws, the COPY is cancelled and drained, so that the connection stays usable,
    /// and the error is rethrown.
    @discardableResult
    public func copyOut(_ sql: String, _ row: (inout BinaryCopyRow) throws -> Void) throws -> Int {
        try withConnection { connection in
            let start = PQexec(connection, sql)
            defer { PQclear(start) }
            guard PQresultStatus(start) == PGRES_COPY_OUT else {
                try check(start, connection)
                throw PostgresError(kind: .usage, message: "copyOut needs a COPY … TO STDOUT statement")
            }
            var parser = BinaryCopyParser()
            do {
                try receive(connection, into: &parser, row)
            } catch {
                // Stop the server from sending the rest, then discard what is already under way: only while the
                // connection is sound. After the call deadline shut the socket, or the connection broke, a cancel
                // request (a new connection, a blocking read with no time limit) could wait for ever on the same
                // frozen path, holding the cancel lock that a second signal needs to exit.
                if !deadline.hasTripped, PQstatus(connection) == CONNECTION_OK,
                    (error as? PostgresError)?.kind != .connection
                {
                    cancelCurrentStatement()
                    drainCopyOut(connection)
                }
                throw error
            }
            if let error = finishResults(connection) { throw error }
            guard parser.isFinished else {
                throw PostgresError(kind: .copy, message: "the COPY data ended without the binary trailer")
            }
            return parser.rowCount
        }
    }

    private func receive(
        _ connection: OpaquePointer, into parser: inout BinaryCopyParser, _ row: (inout BinaryCopyRow) throws -> Void
    ) throws {
        while true {
            var buffer: UnsafeMutablePointer<CChar>?
            let length = PQgetCopyData(connection, &buffer, 0)
            if length == -1 { break }  // done; the final result follows
            guard length >= 0, let buffer else { throw connectionError(connection) }
            defer { PQfreemem(buffer) }
            madeProgress()
            try parser.feed(UnsafeRawBufferPointer(start: buffer, count: Int(length)), row)
        }
        guard !parser.hasPartialData else {
            throw PostgresError(kind: .copy, message: "the COPY data ended inside a row")
        }
    }
}

/// Splits binary COPY data into the header, rows and the trailer.
struct BinaryCopyParser {
    private static let signature: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00]
    /// PostgreSQL's largest field value (1 GiB).
    static let maximumFieldLength = 1 << 30
    private(set) var rowCount = 0
    private(set) var isFinished = false
    private var hasHeader = false
    /// Bytes of a row (or the header) that continues in the next chunk.
    private var pending: [UInt8] = []

    var hasPartialData: Bool { !pending.isEmpty }

    /// Parses a chunk of COPY data as libpq hands it over. The server sends one message per row,
    /// so rows are normally parsed straight from libpq's buffer; a row split between chunks is
    /// put together in `pending` first.
    mutating func feed(_ chunk: UnsafeRawBufferPointer, _ row: (inout BinaryCopyRow) throws -> Void) throws {
        if pending.isEmpty {
            let used = try consume(chunk, row)
            if used < chunk.count { pending.append(contentsOf: chunk[used...]) }
        } else {
            pending.append(contentsOf: chunk)
            var buffered = pending
            pending = []  // `consume` must not see `pending` change under it
            let used = try buffered.withUnsafeBytes { try consume($0, row) }
            buffered.removeFirst(used)
            pending = buffered
        }
    }

    /// Calls `row` for each complete row in `bytes`; returns how many bytes were used (the rest
    /// is an incomplete row, to be passed again with more data).
    private mutating func consume(
        _ bytes: UnsafeRawBufferPointer, _ row: (inout BinaryCopyRow) throws -> Void
    ) throws -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        let count = bytes.count
        var offset = 0
        if !hasHeader {
            guard count >= 19 else { return 0 }
            guard Self.signature.withUnsafeBytes({ $0.elementsEqual(UnsafeRawBufferPointer(start: base, count: 11)) })
            else {
                throw PostgresError(kind: .copy, message: "not binary COPY data; use COPY … TO STDOUT (FORMAT binary)")
            }
            // The high 16 bits are critical (bit 16: OIDs follow, which no statement here asks for; the rest unknown
            // to this reader, so it must stop); the low 16 are backward compatible and ignored, as the server's own
            // reader does.
            let flags = base.uint32BE(at: 11)
            guard flags >> 16 == 0 else {
                throw PostgresError(kind: .copy, message: "unsupported critical binary COPY header flags \(flags)")
            }
            let extensionLength = Int(base.uint32BE(at: 15))
            guard extensionLength <= Self.maximumFieldLength else {
                throw PostgresError(
                    kind: .copy, message: "invalid binary COPY header extension length \(extensionLength)")
            }
            guard count >= 19 + extensionLength else { return 0 }
            offset = 19 + extensionLength
            hasHeader = true
        }
        while offset < count {
            guard !isFinished else {
                throw PostgresError(kind: .copy, message: "data after the binary COPY trailer")
            }
            guard offset + 2 <= count else { break }
            let fieldCount = Int(base.int16BE(at: offset))
            if fieldCount == -1 {
                isFinished = true
                offset += 2
                continue
            }
            guard fieldCount >= 0 else {
                throw PostgresError(kind: .copy, message: "invalid field count \(fieldCount)")
            }
            // Find the row's end; stop if it is not all here yet.
            var end = offset + 2
            var complete = true
            for _ in 0..<fieldCount {
                guard end + 4 <= count else { complete = false; break }
                let length = Int(base.int32BE(at: end))
                end += 4
                if length > 0 {
                    // No server sends a field over 1 GiB (PostgreSQL's limit): refuse it rather than
                    // buffer toward a length a broken or hostile peer made up.
                    guard length <= Self.maximumFieldLength else {
                        throw PostgresError(
                            kind: .copy, message: "invalid field length \(length) (over PostgreSQL's 1 GiB limit)")
                    }
                    end += length
                    guard end <= count else { complete = false; break }
                } else if length < -1 {
                    throw PostgresError(kind: .copy, message: "invalid field length \(length)")
                }
            }
            guard complete else { break }
            var cursor = BinaryCopyRow(fields: base + offset + 2, fieldCount: fieldCount)
            try row(&cursor)
            rowCount += 1
            offset = end
        }
        return offset
    }
}

/// A cursor over one row of binary COPY data: read the fields in order. Scalars are read
/// straight from libpq's buffer, without allocating. Valid only inside the `copyOut` callback.
public struct BinaryCopyRow {
    private var position: UnsafeRawPointer
    /// The number of fields in the row.
    public let fieldCount: Int
    /// The index of the next field to read.
    public private(set) var fieldIndex = 0

    /// `fields` points at the first field's length; the parser has checked that the row is complete.
    init(fields: UnsafeRawPointer, fieldCount: Int) {
        self.position = fields
        self.fieldCount = fieldCount
    }

    /// Whether the next field is NULL (false when there is none); does not advance.
    public func isNull() -> Bool {
        fieldIndex < fieldCount && position.int32BE() == -1
    }

    /// Skips the next field.
    public mutating func skip() throws {
        _ = try next()
    }

    /// The next field's bytes, or nil for NULL.
    @inline(__always)
    private mutating func next() throws -> UnsafeRawBufferPointer? {
        guard fieldIndex < fieldCount else {
            throw PostgresError(kind: .decoding, message: "read past the last field (the row has \(fieldCount) fields)")
        }
        let length = Int(position.int32BE())
        fieldIndex += 1
        position += 4
        guard length >= 0 else { return nil }
        defer { position += length }
        return UnsafeRawBufferPointer(start: position, count: length)
    }

    @inline(__always)
    private mutating func next(length: Int, _ type: StaticString) throws -> UnsafeRawPointer? {
        guard let bytes = try next() else { return nil }
        guard bytes.count == length else {
            throw PostgresError(
                kind: .decoding, message: "field \(fieldIndex - 1): \(type) needs \(length) bytes, got \(bytes.count)")
        }
        return bytes.baseAddress!
    }

    /// Runs a decoder on the next field, naming the field in its errors.
    private mutating func decode<T>(_ decoder: (UnsafeRawBufferPointer) throws -> T) throws -> T? {
        guard let bytes = try next() else { return nil }
        do {
            return try decoder(bytes)
        } catch let error as PostgresError {
            throw PostgresError(kind: .decoding, message: "field \(fieldIndex - 1): \(error.message)")
        }
    }

    public mutating func int16() throws -> Int16? {
        try next(length: 2, "int2")?.int16BE()
    }

    public mutating func int32() throws -> Int32? {
        try next(length: 4, "int4")?.int32BE()
    }

    public mutating func int64() throws -> Int64? {
        try next(length: 8, "int8")?.int64BE()
    }

    public mutating func bool() throws -> Bool? {
        try next(length: 1, "bool").map { $0.load(as: UInt8.self) != 0 }
    }

    public mutating func float8() throws -> Double? {
        try next(length: 8, "float8").map { Double(bitPattern: $0.uint64BE()) }
    }

    /// text, varchar, bpchar or name, as UTF-8.
    public mutating func string() throws -> String? {
        try next().map(BinaryDecoding.string)
    }

    /// jsonb in binary (a version byte, 1, then the JSON text).
    public mutating func jsonb() throws -> String? {
        try decode(BinaryDecoding.jsonb)
    }

    public mutating func date() throws -> CalendarDate? {
        try next(length: 4, "date").map { CalendarDate(postgresDays: $0.int32BE()) }
    }

    public mutating func timestamp() throws -> Timestamp? {
        try next(length: 8, "timestamptz").map { Timestamp(postgresMicroseconds: $0.int64BE()) }
    }

    public mutating func interval() throws -> PostgresInterval? {
        try next(length: 16, "interval").map(BinaryDecoding.interval)
    }

    /// A one-dimensional int2/int4/int8 array whose elements fit in Int16.
    public mutating func int16Array() throws -> [Int16]? {
        try decode { try BinaryDecoding.integerArray($0, as: Int16.self) }
    }

    public mutating func int32Array() throws -> [Int32]? {
        try decode { try BinaryDecoding.integerArray($0, as: Int32.self) }
    }

    public mutating func int64Array() throws -> [Int64]? {
        try decode { try BinaryDecoding.integerArray($0, as: Int64.self) }
    }

    /// A one-dimensional text (or varchar) array.
    public mutating func stringArray() throws -> [String]? {
        try decode(BinaryDecoding.textArray)
    }

    /// The next field's raw binary bytes.
    public mutating func bytes() throws -> [UInt8]? {
        try next().map { Array($0) }
    }

    // MARK: Total readers, for rows the worker does not own (the app's tables)

    /// Any integer field: int2, int4 or int8, told apart by its length (so a column the app widened
    /// still reads); nil for NULL.
    public mutating func anyInteger() throws -> Int64? {
        guard let bytes = try next() else { return nil }
        switch bytes.count {
        case 2: return Int64(bytes.baseAddress!.int16BE())
        case 4: return Int64(bytes.baseAddress!.int32BE())
        case 8: return bytes.baseAddress!.int64BE()
        default:
            throw PostgresError(
                kind: .decoding,
                message: "field \(fieldIndex - 1): an integer needs 2, 4 or 8 bytes, got \(bytes.count)")
        }
    }

    /// A date field: NULL, a date in PostgreSQL's range, or `.outOfRange` for ±infinity and any value
    /// outside that range (which no server sends).
    public mutating func dateField() throws -> TimeField<CalendarDate> {
        guard let pointer = try next(length: 4, "date") else { return .null }
        let days = pointer.int32BE()
        guard PostgresRange.dateDays.contains(days) else { return .outOfRange }
        return .value(CalendarDate(postgresDays: days))
    }

    /// A timestamptz field: NULL, an instant in PostgreSQL's range, or `.outOfRange` for ±infinity and
    /// any value outside that range.
    public mutating func timestampField() throws -> TimeField<Timestamp> {
        guard let pointer = try next(length: 8, "timestamptz") else { return .null }
        let micros = pointer.int64BE()
        guard PostgresRange.timestampMicroseconds.contains(micros) else { return .outOfRange }
        return .value(Timestamp(postgresMicroseconds: micros))
    }

    /// Visits the non-NULL elements of an integer array of any dimension (NULL elements are skipped
    /// and counted); nil for a NULL field. See `IntegerArrayScan`.
    public mutating func integerElements(_ visit: (Int64) -> Void) throws -> IntegerArrayScan? {
        try decode { try BinaryDecoding.integerElements($0, visit) }
    }

    /// The next field decoded as a value of type `oid`, as query results are.
    public mutating func value(oid: UInt32) throws -> PostgresValue {
        try decode { try BinaryDecoding.value(oid: oid, bytes: $0) } ?? .null
    }
}

/// A date or timestamp field read totally: infinite and impossible values are told apart from NULL.
public enum TimeField<Value: Sendable & Hashable>: Sendable, Hashable {
    case null
    case value(Value)
    /// ±infinity, or a value outside PostgreSQL's range.
    case outOfRange
}

/// PostgreSQL's valid ranges, in its own units (counted from 2000-01-01).
public enum PostgresRange {
    /// 4713-11-24 BC (Julian day 0) ..< 5874898-01-01 (DATE_END_JULIAN).
    public static let dateDays: Range<Int32> = -2_451_545..<2_145_031_949
    /// 4713-11-24 BC 00:00 UTC ..< 294277-01-01 00:00 UTC (MIN_TIMESTAMP ..< END_TIMESTAMP).
    public static let timestampMicroseconds: Range<Int64> = -211_813_488_000_000_000..<9_223_371_331_200_000_000
}
