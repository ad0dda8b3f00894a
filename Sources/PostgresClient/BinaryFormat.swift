import Chronology

// PostgreSQL's binary wire formats: big-endian integers, dates and timestamps counted from
// 2000-01-01, one-dimensional arrays. Shared by query parameters/results and binary COPY.

/// PostgreSQL counts dates and timestamps from 2000-01-01; Chronology from 1970-01-01.
enum PostgresEpoch {
    static let days: Int32 = 10_957
    static let microseconds: Int64 = 946_684_800 * 1_000_000
}

extension CalendarDate {
    /// From PostgreSQL's days since 2000-01-01; `±infinity` (Int32.max/min) map to the same sentinels.
    init(postgresDays days: Int32) {
        switch days {
        case .max, .min: self.init(daysSinceEpoch: days)
        default:
            let (sum, overflow) = days.addingReportingOverflow(PostgresEpoch.days)
            self.init(daysSinceEpoch: overflow ? .max : sum)
        }
    }

    /// To PostgreSQL's days since 2000-01-01. A value that cannot be represented becomes a
    /// finite out-of-range value that the server rejects, never an accidental infinity.
    var postgresDays: Int32 {
        switch daysSinceEpoch {
        case .max, .min: return daysSinceEpoch
        default:
            let (difference, overflow) = daysSinceEpoch.subtractingReportingOverflow(PostgresEpoch.days)
            return overflow ? .min + 1 : (difference == .min ? .min + 1 : difference)
        }
    }
}

extension Timestamp {
    /// From PostgreSQL's microseconds since 2000-01-01 UTC; `±infinity` (Int64.max/min) map to the same sentinels.
    init(postgresMicroseconds micros: Int64) {
        switch micros {
        case .max, .min: self.init(microsecondsSinceEpoch: micros)
        default:
            // The last 29 years of PostgreSQL's range overflow the 1970 epoch: clamped to the largest finite
            // instant, never to the +infinity sentinel (`Int64.max`).
            let (sum, overflow) = micros.addingReportingOverflow(PostgresEpoch.microseconds)
            self.init(microsecondsSinceEpoch: overflow || sum == .max ? .max - 1 : sum)
        }
    }

    var postgresMicroseconds: Int64 {
        switch microsecondsSinceEpoch {
        case .max, .min: return microsecondsSinceEpoch
        default:
            let (difference, overflow) = microsecondsSinceEpoch.subtractingReportingOverflow(PostgresEpoch.microseconds)
            return overflow ? .min + 1 : (difference == .min ? .min + 1 : difference)
        }
    }
}

/// Big-endian reads at any alignment. Concrete rather than generic, so that they stay cheap
/// where the optimizer does not specialize (debug builds, calls across files without WMO).
extension UnsafeRawPointer {
    @inline(__always)
    func int16BE(at offset: Int = 0) -> Int16 {
        Int16(bigEndian: loadUnaligned(fromByteOffset: offset, as: Int16.self))
    }
    @inline(__always)
    func int32BE(at offset: Int = 0) -> Int32 {
        Int32(bigEndian: loadUnaligned(fromByteOffset: offset, as: Int32.self))
    }
    @inline(__always)
    func int64BE(at offset: Int = 0) -> Int64 {
        Int64(bigEndian: loadUnaligned(fromByteOffset: offset, as: Int64.self))
    }
    @inline(__always)
    func uint32BE(at offset: Int = 0) -> UInt32 {
        UInt32(bigEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }
    @inline(__always)
    func uint64BE(at offset: Int = 0) -> UInt64 {
        UInt64(bigEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }
}

extension Array where Element == UInt8 {
    @inline(__always)
    mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}

// MARK: - Encoding

enum BinaryEncoding {
    /// The binary representation of a non-NULL value, without its length prefix.
    static func append(_ value: PostgresValue, to buffer: inout [UInt8]) {
        switch value {
        case .null: break
        case .bool(let v): buffer.append(v ? 1 : 0)
        case .int2(let v): buffer.appendBigEndian(v)
        case .int4(let v): buffer.appendBigEndian(v)
        case .int8(let v): buffer.appendBigEndian(v)
        case .float8(let v): buffer.appendBigEndian(v.bitPattern)
        case .text(let v): buffer.append(contentsOf: v.utf8)
        case .jsonb(let v):
            buffer.append(1)  // jsonb binary format version
            buffer.append(contentsOf: v.utf8)
        case .date(let v): buffer.appendBigEndian(v.postgresDays)
        case .timestamptz(let v): buffer.appendBigEndian(v.postgresMicroseconds)
        case .interval(let v): appendInterval(v, to: &buffer)
        case .int2Array(let v): appendArray(v, elementOID: PostgresOID.int2, to: &buffer)
        case .int4Array(let v): appendArray(v, elementOID: PostgresOID.int4, to: &buffer)
        case .int8Array(let v): appendArray(v, elementOID: PostgresOID.int8, to: &buffer)
        case .textArray(let v): appendTextArray(v, to: &buffer)
        case .other(_, let bytes): buffer.append(contentsOf: bytes)
        }
    }

    @inline(__always)
    static func appendInterval(_ v: PostgresInterval, to buffer: inout [UInt8]) {
        buffer.appendBigEndian(v.microseconds)
        buffer.appendBigEndian(v.days)
        buffer.appendBigEndian(v.months)
    }

    /// Encoded size of a one-dimensional integer array.
    @inline(__always)
    static func arraySize<T: FixedWidthInteger>(_ values: [T]) -> Int {
        values.isEmpty ? 12 : 20 + values.count * (4 + MemoryLayout<T>.size)
    }

    /// ndim, has-null flag, element OID, then (size, lower bound 1) and length-prefixed elements.
    /// An empty array has ndim 0, as the server sends it.
    static func appendArray<T: FixedWidthInteger>(_ values: [T], elementOID: UInt32, to buffer: inout [UInt8]) {
        buffer.appendBigEndian(Int32(values.isEmpty ? 0 : 1))
        buffer.appendBigEndian(Int32(0))
        buffer.appendBigEndian(elementOID)
        guard !values.isEmpty else { return }
        buffer.appendBigEndian(Int32(values.count))
        buffer.appendBigEndian(Int32(1))
        for value in values {
            buffer.appendBigEndian(Int32(MemoryLayout<T>.size))
            buffer.appendBigEndian(value)
        }
    }

    static func textArraySize(_ values: [String]) -> Int {
        values.isEmpty ? 12 : values.reduce(20) { $0 + 4 + $1.utf8.count }
    }

    static func appendTextArray(_ values: [String], to buffer: inout [UInt8]) {
        buffer.appendBigEndian(Int32(values.isEmpty ? 0 : 1))
        buffer.appendBigEndian(Int32(0))
        buffer.appendBigEndian(PostgresOID.text)
        guard !values.isEmpty else { return }
        buffer.appendBigEndian(Int32(values.count))
        buffer.appendBigEndian(Int32(1))
        for value in values {
            buffer.appendBigEndian(Int32(value.utf8.count))
            buffer.append(contentsOf: value.utf8)
        }
    }
}

// MARK: - Decoding

enum BinaryDecoding {
    /// Decodes a non-NULL value of type `oid`. Types without a case of their own become `.other`.
    static func value(oid: UInt32, bytes: UnsafeRawBufferPointer) throws -> PostgresValue {
        switch oid {
        case PostgresOID.bool:
            try expectLength(bytes, 1, "bool")
            return .bool(bytes[0] != 0)
        case PostgresOID.int2:
            try expectLength(bytes, 2, "int2")
            return .int2(bytes.baseAddress!.int16BE())
        case PostgresOID.int4:
            try expectLength(bytes, 4, "int4")
            return .int4(bytes.baseAddress!.int32BE())
        case PostgresOID.int8:
            try expectLength(bytes, 8, "int8")
            return .int8(bytes.baseAddress!.int64BE())
        case PostgresOID.float8:
            try expectLength(bytes, 8, "float8")
            return .float8(Double(bitPattern: bytes.baseAddress!.uint64BE()))
        case PostgresOID.float4:
            try expectLength(bytes, 4, "float4")
            return .float8(Double(Float(bitPattern: bytes.baseAddress!.uint32BE())))
        case PostgresOID.text, PostgresOID.varchar, PostgresOID.bpchar, PostgresOID.name, PostgresOID.unknown:
            return .text(string(bytes))
        case PostgresOID.jsonb:
            return .jsonb(try jsonb(bytes))
        case PostgresOID.json:
            return .jsonb(string(bytes))
        case PostgresOID.date:
            try expectLength(bytes, 4, "date")
            return .date(CalendarDate(postgresDays: bytes.baseAddress!.int32BE()))
        case PostgresOID.timestamptz:
            try expectLength(bytes, 8, "timestamptz")
            return .timestamptz(Timestamp(postgresMicroseconds: bytes.baseAddress!.int64BE()))
        case PostgresOID.interval:
            try expectLength(bytes, 16, "interval")
            return .interval(interval(bytes.baseAddress!))
        case PostgresOID.int2Array:
            return .int2Array(try integerArray(bytes, as: Int16.self))
        case PostgresOID.int4Array:
            return .int4Array(try integerArray(bytes, as: Int32.self))
        case PostgresOID.int8Array:
            return .int8Array(try integerArray(bytes, as: Int64.self))
        case PostgresOID.textArray, PostgresOID.varcharArray, PostgresOID.bpcharArray:
            return .textArray(try textArray(bytes))
        default:
            return .other(oid: oid, bytes: Array(bytes))
        }
    }

    @inline(__always)
    static func expectLength(_ bytes: UnsafeRawBufferPointer, _ length: Int, _ type: String) throws {
        guard bytes.count == length else {
            throw PostgresError(kind: .decoding, message: "\(type) needs \(length) bytes, got \(bytes.count)")
        }
    }

    @inline(__always)
    static func string(_ bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    static func jsonb(_ bytes: UnsafeRawBufferPointer) throws -> String {
        guard bytes.count >= 1, bytes[0] == 1 else {
            throw PostgresError(
                kind: .decoding,
                message: bytes.isEmpty ? "jsonb value is empty" : "unsupported jsonb format version \(bytes[0])")
        }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[1...]), as: UTF8.self)
    }

    @inline(__always)
    static func interval(_ p: UnsafeRawPointer) -> PostgresInterval {
        PostgresInterval(
            months: p.int32BE(at: 12),
            days: p.int32BE(at: 8),
            microseconds: p.int64BE(at: 0))
    }

    /// A one-dimensional array of int2, int4 or int8 elements, converted to `T` (throws when
    /// an element does not fit). ndim 0 is the empty array; NULL elements are an error.
    static func integerArray<T: FixedWidthInteger>(_ bytes: UnsafeRawBufferPointer, as type: T.Type) throws -> [T] {
        var reader = ByteReader(bytes)
        let (count, elementOID) = try reader.arrayHeader()
        let width: Int
        switch elementOID {
        case PostgresOID.int2: width = 2
        case PostgresOID.int4: width = 4
        case PostgresOID.int8: width = 8
        default:
            throw PostgresError(
                kind: .decoding, message: "expected an integer array, found element type oid \(elementOID)")
        }
        var result: [T] = []
        result.reserveCapacity(count)
        for index in 0..<count {
            let length = try reader.elementLength(index)
            guard length == width else {
                throw PostgresError(
                    kind: .decoding, message: "array element \(index + 1) has \(length) bytes, expected \(width)")
            }
            let wide: Int64
            switch width {
            case 2: wide = Int64(try reader.read(Int16.self))
            case 4: wide = Int64(try reader.read(Int32.self))
            default: wide = try reader.read(Int64.self)
            }
            guard let element = T(exactly: wide) else {
                throw PostgresError(
                    kind: .decoding, message: "array element \(index + 1) (\(wide)) does not fit in \(T.self)")
            }
            result.append(element)
        }
        return result
    }

    static func textArray(_ bytes: UnsafeRawBufferPointer) throws -> [String] {
        var reader = ByteReader(bytes)
        let (count, elementOID) = try reader.arrayHeader()
        switch elementOID {
        case PostgresOID.text, PostgresOID.varchar, PostgresOID.bpchar, PostgresOID.name: break
        default:
            throw PostgresError(kind: .decoding, message: "expected a text array, found element type oid \(elementOID)")
        }
        var result: [String] = []
        result.reserveCapacity(count)
        for index in 0..<count {
            let length = try reader.elementLength(index)
            result.append(string(try reader.bytes(length)))
        }
        return result
    }
}

/// What a lenient integer-array read met besides its elements (`BinaryDecoding.integerElements`).
public struct IntegerArrayScan: Sendable, Hashable {
    /// Elements visited (NULL elements excluded).
    public var elements = 0
    /// NULL elements, skipped.
    public var nullElements = 0
    /// The array's dimensions (0 for an empty array).
    public var dimensions = 0

    public init() {}
}

extension BinaryDecoding {
    /// PostgreSQL's limit on array dimensions (MAXDIM).
    static let maximumArrayDimensions = 6

    /// Visits every non-NULL element of an int2, int4 or int8 array of any dimension (0...6) and any
    /// lower bounds, in storage order, widened to Int64; NULL elements are skipped and counted. Throws
    /// only for data no server sends (a truncated array, an element of another type or width, counts
    /// that do not fit the bytes), never allocating from a count it has not checked against the bytes.
    static func integerElements(_ bytes: UnsafeRawBufferPointer, _ visit: (Int64) -> Void) throws -> IntegerArrayScan {
        var reader = ByteReader(bytes)
        let header = try reader.arrayHeader(allowingDimensions: maximumArrayDimensions)
        let width: Int
        switch header.elementOID {
        case PostgresOID.int2: width = 2
        case PostgresOID.int4: width = 4
        case PostgresOID.int8: width = 8
        default:
            throw PostgresError(
                kind: .decoding, message: "expected an integer array, found element type oid \(header.elementOID)")
        }
        var scan = IntegerArrayScan()
        scan.dimensions = header.dimensions
        for index in 0..<header.count {
            let length = try reader.read(Int32.self)
            if length == -1 {
                scan.nullElements += 1
                continue
            }
            guard length == width else {
                throw PostgresError(
                    kind: .decoding, message: "array element \(index + 1) has \(length) bytes, expected \(width)")
            }
            switch width {
            case 2: visit(Int64(try reader.read(Int16.self)))
            case 4: visit(Int64(try reader.read(Int32.self)))
            default: visit(try reader.read(Int64.self))
            }
            scan.elements += 1
        }
        return scan
    }
}

/// A bounds-checked big-endian reader, for variable-length structures (arrays).
struct ByteReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Bytes not read yet.
    var remaining: Int { bytes.count - offset }

    mutating func read<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        let size = MemoryLayout<T>.size
        guard size <= remaining else { throw truncated() }
        defer { offset += size }
        return T(bigEndian: bytes.baseAddress!.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    mutating func bytes(_ count: Int) throws -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw truncated() }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    /// Reads a one-dimensional array header; returns the element count (0 for ndim 0) and the element
    /// type OID. The count is checked against the bytes left (each element takes at least its 4-byte
    /// length), so a caller may reserve that much capacity.
    mutating func arrayHeader() throws -> (count: Int, elementOID: UInt32) {
        let header = try arrayHeader(allowingDimensions: 1)
        return (header.count, header.elementOID)
    }

    /// Reads an array header of at most `maximumDimensions` dimensions; the count is the product of
    /// the dimensions' sizes, checked (without overflow) against the bytes left.
    mutating func arrayHeader(
        allowingDimensions maximumDimensions: Int
    )
        throws -> (count: Int, elementOID: UInt32, dimensions: Int)
    {
        let dimensions = try read(Int32.self)
        _ = try read(Int32.self)  // has-null flag; NULL elements are detected one by one
        let elementOID = try read(UInt32.self)
        guard dimensions >= 0, Int(dimensions) <= maximumDimensions else {
            throw PostgresError(
                kind: .decoding,
                message: dimensions < 0
                    ? "negative array dimension count \(dimensions)"
                    : "\(dimensions)-dimensional arrays are not supported here (at most \(maximumDimensions))")
        }
        guard dimensions > 0 else { return (0, elementOID, 0) }
        var count = 1
        for _ in 0..<Int(dimensions) {
            let size = try read(Int32.self)
            _ = try read(Int32.self)  // lower bound: ignored
            guard size >= 0 else { throw PostgresError(kind: .decoding, message: "negative array size \(size)") }
            let (product, overflow) = count.multipliedReportingOverflow(by: Int(size))
            guard !overflow, product <= Int(Int32.max) else {
                throw PostgresError(kind: .decoding, message: "array of more than \(Int32.max) elements")
            }
            count = product
        }
        // Every element takes at least its 4-byte length: a count the bytes cannot hold is refused
        // before anyone reserves memory for it.
        guard count <= remaining / 4 else {
            throw PostgresError(
                kind: .decoding,
                message: "array claims \(count) elements but only \(remaining) bytes follow; the data is corrupt")
        }
        return (count, elementOID, Int(dimensions))
    }

    /// The length of the next element; throws for NULL elements.
    mutating func elementLength(_ index: Int) throws -> Int {
        let length = try read(Int32.self)
        guard length >= 0 else {
            throw PostgresError(
                kind: .decoding, message: "array element \(index + 1) is NULL; NULL elements are not supported")
        }
        return Int(length)
    }

    private func truncated() -> PostgresError {
        PostgresError(kind: .decoding, message: "array data is truncated (\(bytes.count) bytes)")
    }
}
