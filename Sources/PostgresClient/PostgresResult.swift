import CLibPQ
import Chronology

/// The rows of a statement, decoded.
public struct PostgresResult: Sendable {
    public let columns: [String]
    /// The type OID of each column.
    public let columnTypes: [UInt32]
    public let rows: [PostgresRow]
    /// PQcmdTuples: rows inserted, updated, deleted, selected, copied…; 0 when not applicable.
    public let affectedRows: Int

    /// Decodes a PGRES_TUPLES_OK or PGRES_COMMAND_OK result.
    init(_ result: OpaquePointer) throws {
        let columnCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        let names = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        let types = (0..<columnCount).map { PQftype(result, Int32($0)) }
        let layout = ColumnLayout(names)
        // Every value in one array, row after row, and each row a view into it: a large result (a digest day's
        // waiting lists are millions of rows) spent more on an array per row than on decoding the values.
        var values: [PostgresValue] = []
        values.reserveCapacity(rowCount * columnCount)
        for row in 0..<rowCount {
            for column in 0..<columnCount {
                let r = Int32(row), c = Int32(column)
                if PQgetisnull(result, r, c) != 0 {
                    values.append(.null)
                    continue
                }
                let bytes = UnsafeRawBufferPointer(
                    start: PQgetvalue(result, r, c), count: Int(PQgetlength(result, r, c)))
                do {
                    values.append(try BinaryDecoding.value(oid: types[column], bytes: bytes))
                } catch let error as PostgresError {
                    throw PostgresError(
                        kind: .decoding, message: "row \(row + 1), \(layout.describe(column)): \(error.message)")
                }
            }
        }
        let storage = ResultValues(values: values, columnCount: columnCount, layout: layout)
        self.columns = names
        self.columnTypes = types
        self.rows = (0..<rowCount).map { PostgresRow(storage, row: $0) }
        self.affectedRows = PQcmdTuples(result).flatMap { Int(String(cString: $0)) } ?? 0
    }
}

/// Column names shared by the rows of one result.
final class ColumnLayout: Sendable {
    let names: [String]
    private let indexes: [String: Int]

    init(_ names: [String]) {
        self.names = names
        var indexes: [String: Int] = [:]
        for (index, name) in names.enumerated() where indexes[name] == nil { indexes[name] = index }
        self.indexes = indexes
    }

    func index(of name: String) -> Int? { indexes[name] }

    func describe(_ index: Int) -> String {
        index < names.count ? "column \(index) (\"\(names[index])\")" : "column \(index)"
    }
}

/// The decoded values of one result, row after row, shared by its rows.
final class ResultValues: Sendable {
    let values: [PostgresValue]
    let columnCount: Int
    let layout: ColumnLayout

    init(values: [PostgresValue], columnCount: Int, layout: ColumnLayout) {
        self.values = values
        self.columnCount = columnCount
        self.layout = layout
    }
}

/// One row of a result: values by position or by column name, and typed accessors that throw
/// `.decoding` naming the column and what was found.
public struct PostgresRow: Sendable {
    private let storage: ResultValues
    /// Where the row's first value is in `storage.values`.
    private let start: Int

    init(_ storage: ResultValues, row: Int) {
        self.storage = storage
        self.start = row * storage.columnCount
    }

    private var layout: ColumnLayout { storage.layout }
    public var values: [PostgresValue] { Array(storage.values[start..<start + storage.columnCount]) }
    public var columns: [String] { layout.names }
    public var count: Int { storage.columnCount }

    public subscript(_ index: Int) -> PostgresValue {
        precondition(index >= 0 && index < count, "column index \(index) is out of range (\(count) columns)")
        return storage.values[start + index]
    }

    /// The value of the first column named `column`; a missing column is a programming error (traps).
    public subscript(_ column: String) -> PostgresValue {
        guard let index = layout.index(of: column) else {
            preconditionFailure("no column \"\(column)\" in \(layout.names)")
        }
        return self[index]
    }

    /// The index of the first column named `column`; throws `.usage` when there is none.
    public func index(of column: String) throws -> Int {
        guard let index = layout.index(of: column) else {
            throw PostgresError(kind: .usage, message: "no column \"\(column)\"; the columns are \(layout.names)")
        }
        return index
    }

    private func value(_ index: Int) throws -> PostgresValue {
        guard index >= 0, index < count else {
            throw PostgresError(kind: .usage, message: "column index \(index) is out of range (\(count) columns)")
        }
        return storage.values[start + index]
    }

    /// The converted value, nil for NULL; throws when the value is of another type.
    private func optional<T>(_ index: Int, _ expected: String, _ convert: (PostgresValue) -> T?) throws -> T? {
        let value = try value(index)
        if value.isNull { return nil }
        guard let converted = convert(value) else {
            let found: String
            switch value {
            case .int2(let v): found = "int2 \(v)"
            case .int4(let v): found = "int4 \(v)"
            case .int8(let v): found = "int8 \(v)"
            default: found = value.typeName
            }
            throw PostgresError(
                kind: .decoding, message: "\(layout.describe(index)): expected \(expected), found \(found)")
        }
        return converted
    }

    private func required<T>(_ index: Int, _ expected: String, _ convert: (PostgresValue) -> T?) throws -> T {
        guard let value = try optional(index, expected, convert) else {
            throw PostgresError(kind: .decoding, message: "\(layout.describe(index)): expected \(expected), found NULL")
        }
        return value
    }

    /// int2, int4 or int8.
    public func int64(_ i: Int) throws -> Int64 { try required(i, "an integer", \.int64Value) }
    /// int2 or int4, or int8 in range.
    public func int32(_ i: Int) throws -> Int32 { try required(i, "an integer in Int32 range", \.int32Value) }
    /// int2, or int4/int8 in range.
    public func int16(_ i: Int) throws -> Int16 { try required(i, "an integer in Int16 range", \.int16Value) }
    public func bool(_ i: Int) throws -> Bool { try required(i, "bool", \.boolValue) }
    public func double(_ i: Int) throws -> Double { try required(i, "float8", \.doubleValue) }
    /// text or jsonb.
    public func string(_ i: Int) throws -> String { try required(i, "text", \.stringValue) }
    public func date(_ i: Int) throws -> CalendarDate { try required(i, "date", \.dateValue) }
    public func timestamp(_ i: Int) throws -> Timestamp { try required(i, "timestamptz", \.timestampValue) }
    public func interval(_ i: Int) throws -> PostgresInterval { try required(i, "interval", \.intervalValue) }
    public func int16Array(_ i: Int) throws -> [Int16] {
        try required(i, "an integer array in Int16 range", \.int16ArrayValue)
    }
    public func int32Array(_ i: Int) throws -> [Int32] {
        try required(i, "an integer array in Int32 range", \.int32ArrayValue)
    }
    public func int64Array(_ i: Int) throws -> [Int64] { try required(i, "an integer array", \.int64ArrayValue) }
    public func stringArray(_ i: Int) throws -> [String] { try required(i, "text[]", \.stringArrayValue) }

    public func optionalInt64(_ i: Int) throws -> Int64? { try optional(i, "an integer", \.int64Value) }
    public func optionalInt32(_ i: Int) throws -> Int32? { try optional(i, "an integer in Int32 range", \.int32Value) }
    public func optionalInt16(_ i: Int) throws -> Int16? { try optional(i, "an integer in Int16 range", \.int16Value) }
    public func optionalBool(_ i: Int) throws -> Bool? { try optional(i, "bool", \.boolValue) }
    public func optionalDouble(_ i: Int) throws -> Double? { try optional(i, "float8", \.doubleValue) }
    public func optionalString(_ i: Int) throws -> String? { try optional(i, "text", \.stringValue) }
    public func optionalDate(_ i: Int) throws -> CalendarDate? { try optional(i, "date", \.dateValue) }
    public func optionalTimestamp(_ i: Int) throws -> Timestamp? { try optional(i, "timestamptz", \.timestampValue) }
    public func optionalInterval(_ i: Int) throws -> PostgresInterval? { try optional(i, "interval", \.intervalValue) }
    public func optionalInt16Array(_ i: Int) throws -> [Int16]? {
        try optional(i, "an integer array in Int16 range", \.int16ArrayValue)
    }
    public func optionalInt32Array(_ i: Int) throws -> [Int32]? {
        try optional(i, "an integer array in Int32 range", \.int32ArrayValue)
    }
    public func optionalInt64Array(_ i: Int) throws -> [Int64]? {
        try optional(i, "an integer array", \.int64ArrayValue)
    }
    public func optionalStringArray(_ i: Int) throws -> [String]? { try optional(i, "text[]", \.stringArrayValue) }
}

/// The same accessors by column name (the first column of that name; `.usage` when there is none).
extension PostgresRow {
    public func int64(_ column: String) throws -> Int64 { try int64(index(of: column)) }
    public func int32(_ column: String) throws -> Int32 { try int32(index(of: column)) }
    public func int16(_ column: String) throws -> Int16 { try int16(index(of: column)) }
    public func bool(_ column: String) throws -> Bool { try bool(index(of: column)) }
    public func double(_ column: String) throws -> Double { try double(index(of: column)) }
    public func string(_ column: String) throws -> String { try string(index(of: column)) }
    public func date(_ column: String) throws -> CalendarDate { try date(index(of: column)) }
    public func timestamp(_ column: String) throws -> Timestamp { try timestamp(index(of: column)) }
    public func interval(_ column: String) throws -> PostgresInterval { try interval(index(of: column)) }
    public func int16Array(_ column: String) throws -> [Int16] { try int16Array(index(of: column)) }
    public func int32Array(_ column: String) throws -> [Int32] { try int32Array(index(of: column)) }
    public func int64Array(_ column: String) throws -> [Int64] { try int64Array(index(of: column)) }
    public func stringArray(_ column: String) throws -> [String] { try stringArray(index(of: column)) }

    public func optionalInt64(_ column: String) throws -> Int64? { try optionalInt64(index(of: column)) }
    public func optionalInt32(_ column: String) throws -> Int32? { try optionalInt32(index(of: column)) }
    public func optionalInt16(_ column: String) throws -> Int16? { try optionalInt16(index(of: column)) }
    public func optionalBool(_ column: String) throws -> Bool? { try optionalBool(index(of: column)) }
    public func optionalDouble(_ column: String) throws -> Double? { try optionalDouble(index(of: column)) }
    public func optionalString(_ column: String) throws -> String? { try optionalString(index(of: column)) }
    public func optionalDate(_ column: String) throws -> CalendarDate? { try optionalDate(index(of: column)) }
    public func optionalTimestamp(_ column: String) throws -> Timestamp? { try optionalTimestamp(index(of: column)) }
    public func optionalInterval(_ column: String) throws -> PostgresInterval? {
        try optionalInterval(index(of: column))
    }
    public func optionalInt16Array(_ column: String) throws -> [Int16]? { try optionalInt16Array(index(of: column)) }
    public func optionalInt32Array(_ column: String) throws -> [Int32]? { try optionalInt32Array(index(of: column)) }
    public func optionalInt64Array(_ column: String) throws -> [Int64]? { try optionalInt64Array(index(of: column)) }
    public func optionalStringArray(_ column: String) throws -> [String]? { try optionalStringArray(index(of: column)) }
}
