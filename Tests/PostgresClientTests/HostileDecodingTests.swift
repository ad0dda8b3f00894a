import Chronology
import Testing

@testable import PostgresClient

/// Issue 14: decoding is total over what a server may send for the app's rows, and bounded whatever a
/// broken or hostile peer claims in a length field.
@Suite struct HostileDecodingTests {
    /// An integer array in binary: dims (size, lower bound) and elements (nil = NULL).
    static func array(oid: UInt32, dims: [(Int32, Int32)], elements: [Int64?], width: Int = 2) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendBigEndian(Int32(dims.count))
        bytes.appendBigEndian(Int32(elements.contains { $0 == nil } ? 1 : 0))
        bytes.appendBigEndian(oid)
        for (size, lower) in dims {
            bytes.appendBigEndian(size)
            bytes.appendBigEndian(lower)
        }
        for element in elements {
            guard let element else { bytes.appendBigEndian(Int32(-1)); continue }
            bytes.appendBigEndian(Int32(width))
            switch width {
            case 2: bytes.appendBigEndian(Int16(truncatingIfNeeded: element))
            case 4: bytes.appendBigEndian(Int32(truncatingIfNeeded: element))
            default: bytes.appendBigEndian(element)
            }
        }
        return bytes
    }

    static func scan(_ bytes: [UInt8]) throws -> ([Int64], IntegerArrayScan) {
        var seen: [Int64] = []
        let scan = try bytes.withUnsafeBytes { try BinaryDecoding.integerElements($0) { seen.append($0) } }
        return (seen, scan)
    }

    @Test func nullElementsAreSkippedAndCounted() throws {
        let (values, scan) = try Self.scan(Self.array(oid: PostgresOID.int2, dims: [(3, 1)], elements: [1, nil, 2]))
        #expect(values == [1, 2])
        #expect(scan.nullElements == 1 && scan.elements == 2 && scan.dimensions == 1)
    }

    @Test func anyDimensionAndLowerBoundIsFlattened() throws {
        let (values, scan) = try Self.scan(
            Self.array(oid: PostgresOID.int4, dims: [(2, 1), (2, -7)], elements: [1, 2, 3, nil], width: 4))
        #expect(values == [1, 2, 3])
        #expect(scan.dimensions == 2 && scan.nullElements == 1)
        let (wide, _) = try Self.scan(Self.array(oid: PostgresOID.int8, dims: [(1, 0)], elements: [.max], width: 8))
        #expect(wide == [.max])
        let (empty, emptyScan) = try Self.scan(Self.array(oid: PostgresOID.int2, dims: [], elements: []))
        #expect(empty.isEmpty && emptyScan.dimensions == 0)
    }

    @Test func countsTheBytesCannotHoldAreRefusedBeforeAllocating() throws {
        // 2^31 - 1 elements claimed, none sent: refused at once (no 16 GiB reservation).
        let huge = Self.array(oid: PostgresOID.int2, dims: [(Int32.max, 1)], elements: [])
        let error = #expect(throws: PostgresError.self) { try Self.scan(huge) }
        #expect(error?.message.contains("claims 2147483647 elements") == true)
        #expect(throws: PostgresError.self) {
            try huge.withUnsafeBytes { try BinaryDecoding.integerArray($0, as: Int16.self) }
        }
        // Dimensions whose product overflows, negative sizes, too many or negative dimensions.
        #expect(throws: PostgresError.self) {
            try Self.scan(
                Self.array(oid: PostgresOID.int2, dims: Array(repeating: (Int32.max, 1), count: 6), elements: []))
        }
        #expect(throws: PostgresError.self) {
            try Self.scan(Self.array(oid: PostgresOID.int2, dims: [(-1, 1)], elements: []))
        }
        #expect(throws: PostgresError.self) {
            try Self.scan(Self.array(oid: PostgresOID.int2, dims: Array(repeating: (1, 1), count: 7), elements: [1]))
        }
        var negative = Self.array(oid: PostgresOID.int2, dims: [], elements: [])
        negative.replaceSubrange(0..<4, with: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: PostgresError.self) { try Self.scan(negative) }
        // Truncated data and a wrong element width are errors, never a trap.
        let truncated = Array(Self.array(oid: PostgresOID.int2, dims: [(2, 1)], elements: [1, 2]).dropLast(1))
        #expect(throws: PostgresError.self) { try Self.scan(truncated) }
        #expect(throws: PostgresError.self) {
            try Self.scan(Self.array(oid: PostgresOID.int2, dims: [(1, 1)], elements: [1], width: 4))
        }
        #expect(throws: PostgresError.self) {
            try Self.scan(Self.array(oid: PostgresOID.text, dims: [(1, 1)], elements: [1]))
        }
    }

    /// A COPY stream of one row per field list, fed whole.
    static func copy(_ rows: [[[UInt8]?]], read: (inout BinaryCopyRow) throws -> Void) throws -> Int {
        var bytes = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00]
        bytes.appendBigEndian(UInt32(0))
        bytes.appendBigEndian(UInt32(0))
        for fields in rows {
            bytes.appendBigEndian(Int16(fields.count))
            for field in fields {
                guard let field else { bytes.appendBigEndian(Int32(-1)); continue }
                bytes.appendBigEndian(Int32(field.count))
                bytes += field
            }
        }
        bytes.appendBigEndian(Int16(-1))
        var parser = BinaryCopyParser()
        try bytes.withUnsafeBytes { try parser.feed($0, read) }
        return parser.rowCount
    }

    static func be<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendBigEndian(value)
        return bytes
    }

    @Test func totalReadersTakeAnyIntegerWidthAndTellInfinityFromNull() throws {
        var integers: [Int64?] = []
        var dates: [TimeField<CalendarDate>] = []
        var stamps: [TimeField<Timestamp>] = []
        let count = try Self.copy([
            [Self.be(Int16(-3)), Self.be(Int32(0)), nil],
            [Self.be(Int32.max), Self.be(Int32.max), Self.be(Int64.max)],
            [Self.be(Int64.min), Self.be(Int32(2_145_031_949)), Self.be(Int64(-211_813_488_000_000_001))],
            [nil, nil, Self.be(Int64(0))],
        ]) { row in
            integers.append(try row.anyInteger())
            dates.append(try row.dateField())
            stamps.append(try row.timestampField())
        }
        #expect(count == 4)
        #expect(integers == [-3, Int64(Int32.max), .min, nil])
        #expect(dates == [.value(CalendarDate(postgresDays: 0)), .outOfRange, .outOfRange, .null])
        #expect(stamps == [.null, .outOfRange, .outOfRange, .value(Timestamp(postgresMicroseconds: 0))])
        // A width no integer has is an error naming the field.
        let error = #expect(throws: PostgresError.self) {
            try Self.copy([[[1, 2, 3]]]) { row in _ = try row.anyInteger() }
        }
        #expect(error?.message.contains("2, 4 or 8 bytes") == true)
    }

    /// PostgreSQL's last finite instant (294276-12-31 23:59:59.999999 UTC) overflows the 1970 epoch: it reads as
    /// a finite instant, the largest, never as +infinity.
    @Test func theLastFiniteInstantIsNotInfinity() throws {
        var stamps: [TimeField<Timestamp>] = []
        _ = try Self.copy([[Self.be(Int64(9_223_371_331_199_999_999))]]) { row in
            stamps.append(try row.timestampField())
        }
        guard case .value(let last)? = stamps.first else {
            Issue.record("expected a finite instant, got \(stamps)")
            return
        }
        #expect(last.microsecondsSinceEpoch == .max - 1)
    }

    @Test func aFieldLengthBeyondOneGibibyteIsRefused() throws {
        var bytes = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00]
        bytes.appendBigEndian(UInt32(0))
        bytes.appendBigEndian(UInt32(0))
        bytes.appendBigEndian(Int16(1))
        bytes.appendBigEndian(Int32.max)  // 2 GiB claimed
        var parser = BinaryCopyParser()
        let error = #expect(throws: PostgresError.self) {
            try bytes.withUnsafeBytes { try parser.feed($0) { _ in } }
        }
        #expect(error?.message.contains("1 GiB") == true)
    }
}
