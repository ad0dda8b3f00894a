import Chronology

/// PostgreSQL's `interval`: months, days and microseconds are kept apart, as the server does,
/// because a month or a day has no fixed length.
public struct PostgresInterval: Sendable, Hashable, CustomStringConvertible {
    public let months: Int32
    public let days: Int32
    public let microseconds: Int64

    public init(months: Int32 = 0, days: Int32 = 0, microseconds: Int64 = 0) {
        self.months = months
        self.days = days
        self.microseconds = microseconds
    }

    public var description: String { "\(months) mons \(days) days \(microseconds) us" }
}

/// A parameter or a result value. Values travel in PostgreSQL's binary format.
public enum PostgresValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int2(Int16)
    case int4(Int32)
    case int8(Int64)
    case float8(Double)
    case text(String)
    /// The JSON text of a `jsonb` (or, when received, `json`) value.
    case jsonb(String)
    case date(CalendarDate)
    case timestamptz(Timestamp)
    case interval(PostgresInterval)
    case int2Array([Int16])
    case int4Array([Int32])
    case int8Array([Int64])
    case textArray([String])
    /// Any other type, as received in binary (or to be sent in binary with that type OID).
    case other(oid: UInt32, bytes: [UInt8])
}

extension PostgresValue {
    public init(_ value: Bool?) { self = value.map(PostgresValue.bool) ?? .null }
    public init(_ value: Int16?) { self = value.map(PostgresValue.int2) ?? .null }
    public init(_ value: Int32?) { self = value.map(PostgresValue.int4) ?? .null }
    public init(_ value: Int64?) { self = value.map(PostgresValue.int8) ?? .null }
    /// An `Int` is sent as `int8`.
    public init(_ value: Int?) { self = value.map { .int8(Int64($0)) } ?? .null }
    public init(_ value: Double?) { self = value.map(PostgresValue.float8) ?? .null }
    public init(_ value: String?) { self = value.map(PostgresValue.text) ?? .null }
    public init(_ value: CalendarDate?) { self = value.map(PostgresValue.date) ?? .null }
    public init(_ value: Timestamp?) { self = value.map(PostgresValue.timestamptz) ?? .null }
    public init(_ value: PostgresInterval?) { self = value.map(PostgresValue.interval) ?? .null }
    public init(_ value: [Int16]?) { self = value.map(PostgresValue.int2Array) ?? .null }
    public init(_ value: [Int32]?) { self = value.map(PostgresValue.int4Array) ?? .null }
    public init(_ value: [Int64]?) { self = value.map(PostgresValue.int8Array) ?? .null }
    public init(_ value: [String]?) { self = value.map(PostgresValue.textArray) ?? .null }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    public var boolValue: Bool? {
        if case .bool(let v) = self { return v }
        return nil
    }

    /// int2, or int4/int8 when the value fits.
    public var int16Value: Int16? {
        switch self {
        case .int2(let v): return v
        case .int4(let v): return Int16(exactly: v)
        case .int8(let v): return Int16(exactly: v)
        default: return nil
        }
    }

    /// int2 or int4, or int8 when the value fits.
    public var int32Value: Int32? {
        switch self {
        case .int2(let v): return Int32(v)
        case .int4(let v): return v
        case .int8(let v): return Int32(exactly: v)
        default: return nil
        }
    }

    /// int2, int4 or int8.
    public var int64Value: Int64? {
        switch self {
        case .int2(let v): return Int64(v)
        case .int4(let v): return Int64(v)
        case .int8(let v): return v
        default: return nil
        }
    }

    public var doubleValue: Double? {
        if case .float8(let v) = self { return v }
        return nil
    }

    /// The text of a `text` or `jsonb` value.
    public var stringValue: String? {
        switch self {
        case .text(let v), .jsonb(let v): return v
        default: return nil
        }
    }

    public var dateValue: CalendarDate? {
        if case .date(let v) = self { return v }
        return nil
    }

    public var timestampValue: Timestamp? {
        if case .timestamptz(let v) = self { return v }
        return nil
    }

    public var intervalValue: PostgresInterval? {
        if case .interval(let v) = self { return v }
        return nil
    }

    /// An integer array whose elements all fit in Int16.
    public var int16ArrayValue: [Int16]? {
        switch self {
        case .int2Array(let v): return v
        case .int4Array(let v): return exactly(v)
        case .int8Array(let v): return exactly(v)
        default: return nil
        }
    }

    /// An integer array whose elements all fit in Int32.
    public var int32ArrayValue: [Int32]? {
        switch self {
        case .int2Array(let v): return v.map(Int32.init)
        case .int4Array(let v): return v
        case .int8Array(let v): return exactly(v)
        default: return nil
        }
    }

    public var int64ArrayValue: [Int64]? {
        switch self {
        case .int2Array(let v): return v.map(Int64.init)
        case .int4Array(let v): return v.map(Int64.init)
        case .int8Array(let v): return v
        default: return nil
        }
    }

    public var stringArrayValue: [String]? {
        if case .textArray(let v) = self { return v }
        return nil
    }

    /// The type OID the value is sent with (0, "let the server infer", for NULL).
    public var oid: UInt32 {
        switch self {
        case .null: return 0
        case .bool: return PostgresOID.bool
        case .int2: return PostgresOID.int2
        case .int4: return PostgresOID.int4
        case .int8: return PostgresOID.int8
        case .float8: return PostgresOID.float8
        case .text: return PostgresOID.text
        case .jsonb: return PostgresOID.jsonb
        case .date: return PostgresOID.date
        case .timestamptz: return PostgresOID.timestamptz
        case .interval: return PostgresOID.interval
        case .int2Array: return PostgresOID.int2Array
        case .int4Array: return PostgresOID.int4Array
        case .int8Array: return PostgresOID.int8Array
        case .textArray: return PostgresOID.textArray
        case .other(let oid, _): return oid
        }
    }

    /// A short name of the case, for error messages: the type's name as PostgreSQL's `pg_type` has it ("int4",
    /// "text", "bytea", "numeric"), "NULL", or "oid 600000" for a type this client has no name for.
    public var typeName: String {
        switch self {
        case .null: return "NULL"
        case .bool: return "bool"
        case .int2: return "int2"
        case .int4: return "int4"
        case .int8: return "int8"
        case .float8: return "float8"
        case .text: return "text"
        case .jsonb: return "jsonb"
        case .date: return "date"
        case .timestamptz: return "timestamptz"
        case .interval: return "interval"
        case .int2Array: return "int2[]"
        case .int4Array: return "int4[]"
        case .int8Array: return "int8[]"
        case .textArray: return "text[]"
        case .other(let oid, _): return Self.builtInTypeNames[oid] ?? "oid \(oid)"
        }
    }

    /// Built-in types (their OIDs are fixed) that a retyped app column may hold, named as `pg_type.typname` (an
    /// array as its element's name and `[]`, not typname's `_int8`).
    private static let builtInTypeNames: [UInt32: String] = [
        16: "bool", 17: "bytea", 18: "char", 19: "name", 20: "int8", 21: "int2", 23: "int4", 25: "text", 26: "oid",
        114: "json", 142: "xml", 700: "float4", 701: "float8", 790: "money", 829: "macaddr", 869: "inet",
        650: "cidr", 1042: "bpchar", 1043: "varchar", 1082: "date", 1083: "time", 1114: "timestamp",
        1184: "timestamptz", 1186: "interval", 1266: "timetz", 1560: "bit", 1562: "varbit", 1700: "numeric",
        2950: "uuid", 3802: "jsonb", 3614: "tsvector", 1000: "bool[]", 1001: "bytea[]", 1005: "int2[]",
        1007: "int4[]", 1009: "text[]", 1014: "bpchar[]", 1015: "varchar[]", 1016: "int8[]", 1021: "float4[]",
        1022: "float8[]", 1115: "timestamp[]", 1182: "date[]", 1185: "timestamptz[]", 1231: "numeric[]",
        199: "json[]", 3807: "jsonb[]", 2951: "uuid[]",
    ]
}

private func exactly<Source: BinaryInteger, Target: FixedWidthInteger>(_ values: [Source]) -> [Target]? {
    var result: [Target] = []
    result.reserveCapacity(values.count)
    for value in values {
        guard let converted = Target(exactly: value) else { return nil }
        result.append(converted)
    }
    return result
}

/// Type OIDs (pg_type.oid) of the types this client knows.
public enum PostgresOID {
    public static let bool: UInt32 = 16
    public static let bytea: UInt32 = 17
    public static let name: UInt32 = 19
    public static let int8: UInt32 = 20
    public static let int2: UInt32 = 21
    public static let int4: UInt32 = 23
    public static let text: UInt32 = 25
    public static let json: UInt32 = 114
    public static let float4: UInt32 = 700
    public static let float8: UInt32 = 701
    public static let unknown: UInt32 = 705
    public static let bpchar: UInt32 = 1042
    public static let varchar: UInt32 = 1043
    public static let date: UInt32 = 1082
    public static let timestamptz: UInt32 = 1184
    public static let interval: UInt32 = 1186
    public static let jsonb: UInt32 = 3802
    public static let int2Array: UInt32 = 1005
    public static let int4Array: UInt32 = 1007
    public static let textArray: UInt32 = 1009
    public static let bpcharArray: UInt32 = 1014
    public static let varcharArray: UInt32 = 1015
    public static let int8Array: UInt32 = 1016
}
