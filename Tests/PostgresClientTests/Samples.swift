import Chronology
import Foundation
import PostgresClient
import Testing

func date(_ year: Int, _ month: Int, _ day: Int) throws -> CalendarDate {
    try #require(CalendarDate(year: year, month: month, day: day))
}

func timestamp(_ text: String) throws -> Timestamp {
    try #require(Timestamp(iso8601: text))
}

/// The value of a non-NULL field (`#require` is ambiguous for `Bool?`).
func unwrap<T>(_ value: T?, sourceLocation: SourceLocation = #_sourceLocation) throws -> T {
    try #require(value, sourceLocation: sourceLocation)
}

/// Values for every supported type, including extremes, for parameter round trips.
func sampleValues() throws -> [PostgresValue] {
    [
        .bool(true), .bool(false),
        .int2(.min), .int2(.max), .int2(-1), .int2(0),
        .int4(.min), .int4(.max), .int4(-42),
        .int8(.min), .int8(.max), .int8(-1_234_567_890_123),
        .float8(3.25), .float8(-0.5), .float8(.greatestFiniteMagnitude), .float8(-1e-300), .float8(.infinity),
        .text(""), .text("hello"), .text("日本語のテキスト"), .text("emoji 🎉👩‍👩‍👧 and é"),
        .text("quote ' \" \\ backslash\ttab\nnewline"),
        .jsonb(#"{"a": {"b": [1, 2.5, {"c": null}], "d": true}, "name": "日本 🎌"}"#),
        .jsonb("[]"), .jsonb("{}"), .jsonb(#""just a string""#), .jsonb("-12.5"),
        .date(try date(1900, 2, 28)), .date(try date(1969, 12, 31)), .date(try date(1970, 1, 1)),
        .date(try date(2000, 1, 1)), .date(try date(2100, 3, 1)), .date(try date(2400, 2, 29)),
        .date(try date(1, 1, 1)),
        .timestamptz(Timestamp(microsecondsSinceEpoch: -1)),
        .timestamptz(Timestamp(microsecondsSinceEpoch: 0)),
        .timestamptz(try timestamp("1900-02-28T23:59:59.000001Z")),
        .timestamptz(try timestamp("1969-12-31T12:00:00.5Z")),
        .timestamptz(try timestamp("2026-03-01T03:00:00.123456Z")),
        .timestamptz(try timestamp("2100-03-01T00:00:00.999999Z")),
        .timestamptz(try timestamp("2400-02-29T12:34:56.789012Z")),
        .interval(PostgresInterval(months: 14, days: -3, microseconds: 3_723_000_001)),
        .interval(PostgresInterval(months: -1, days: 0, microseconds: -1)),
        .interval(PostgresInterval(months: 0, days: 0, microseconds: 0)),
        .int2Array([]), .int2Array([Int16.min, 0, -1, Int16.max]),
        .int4Array([]), .int4Array([Int32.min, 7, Int32.max]),
        .int8Array([]), .int8Array([Int64.min, -1, Int64.max]),
        .textArray([]), .textArray(["a", "", "日本", "🎉", "with \"quotes\" and , commas"]),
        .date(CalendarDate(daysSinceEpoch: .max)), .date(CalendarDate(daysSinceEpoch: .min)),
        .timestamptz(Timestamp(microsecondsSinceEpoch: .max)), .timestamptz(Timestamp(microsecondsSinceEpoch: .min)),
        .null,
    ]
}

/// One row of the all-types table, read and written with the typed COPY API.
struct TypedRow: Equatable {
    var id: Int32
    var flag: Bool?
    var small: Int16?
    var medium: Int32?
    var big: Int64?
    var real: Double?
    var text: String?
    var json: String?
    var day: CalendarDate?
    var instant: Timestamp?
    var span: PostgresInterval?
    var smalls: [Int16]?
    var mediums: [Int32]?
    var bigs: [Int64]?
    var texts: [String]?

    static let tableDefinition = """
        (id int PRIMARY KEY, flag bool, small smallint, medium int, big bigint, real float8, text text,
         json jsonb, day date, instant timestamptz, span interval, smalls smallint[], mediums int[],
         bigs bigint[], texts text[])
        """

    var values: [PostgresValue] {
        [
            .int4(id), PostgresValue(flag), PostgresValue(small), PostgresValue(medium), PostgresValue(big),
            PostgresValue(real), PostgresValue(text), json.map(PostgresValue.jsonb) ?? .null, PostgresValue(day),
            PostgresValue(instant), PostgresValue(span), PostgresValue(smalls), PostgresValue(mediums),
            PostgresValue(bigs), PostgresValue(texts),
        ]
    }

    func write(to writer: BinaryCopyWriter) {
        writer.beginRow(fieldCount: 15)
        writer.write(id)
        writer.write(flag)
        writer.write(small)
        writer.write(medium)
        writer.write(big)
        writer.write(real)
        writer.write(text)
        writer.writeJSONB(json)
        writer.write(day)
        writer.write(instant)
        writer.write(span)
        writer.write(smalls)
        writer.write(mediums)
        writer.write(bigs)
        writer.write(texts)
    }

    init(copy row: inout BinaryCopyRow) throws {
        id = try #require(try row.int32())
        flag = try row.bool()
        small = try row.int16()
        medium = try row.int32()
        big = try row.int64()
        real = try row.float8()
        text = try row.string()
        json = try row.jsonb()
        day = try row.date()
        instant = try row.timestamp()
        span = try row.interval()
        smalls = try row.int16Array()
        mediums = try row.int32Array()
        bigs = try row.int64Array()
        texts = try row.stringArray()
    }

    init(result row: PostgresRow) throws {
        id = try row.int32("id")
        flag = try row.optionalBool("flag")
        small = try row.optionalInt16("small")
        medium = try row.optionalInt32("medium")
        big = try row.optionalInt64("big")
        real = try row.optionalDouble("real")
        text = try row.optionalString("text")
        json = try row.optionalString("json")
        day = try row.optionalDate("day")
        instant = try row.optionalTimestamp("instant")
        span = try row.optionalInterval("span")
        smalls = try row.optionalInt16Array("smalls")
        mediums = try row.optionalInt32Array("mediums")
        bigs = try row.optionalInt64Array("bigs")
        texts = try row.optionalStringArray("texts")
    }

    init(
        id: Int32, flag: Bool? = nil, small: Int16? = nil, medium: Int32? = nil, big: Int64? = nil, real: Double? = nil,
        text: String? = nil, json: String? = nil, day: CalendarDate? = nil, instant: Timestamp? = nil,
        span: PostgresInterval? = nil, smalls: [Int16]? = nil, mediums: [Int32]? = nil, bigs: [Int64]? = nil,
        texts: [String]? = nil
    ) {
        self.id = id
        self.flag = flag
        self.small = small
        self.medium = medium
        self.big = big
        self.real = real
        self.text = text
        self.json = json
        self.day = day
        self.instant = instant
        self.span = span
        self.smalls = smalls
        self.mediums = mediums
        self.bigs = bigs
        self.texts = texts
    }

    static func samples() throws -> [TypedRow] {
        [
            TypedRow(
                id: 1, flag: true, small: .min, medium: .min, big: .min, real: -1.5, text: "日本語 🎉",
                json: #"{"a": {"b": [1, 2, {"c": "ü"}]}, "z": null}"#, day: try date(1900, 2, 28),
                instant: try timestamp("1900-02-28T01:02:03.000004Z"),
                span: PostgresInterval(months: -14, days: -2, microseconds: -5),
                smalls: [.min, -1, 0, .max], mediums: [.min, .max], bigs: [.min, .max], texts: ["", "日本", "🎌"]),
            TypedRow(
                id: 2, flag: false, small: .max, medium: .max, big: .max, real: .greatestFiniteMagnitude, text: "",
                json: "[]", day: try date(2400, 2, 29), instant: try timestamp("2400-02-29T23:59:59.999999Z"),
                span: PostgresInterval(months: 1200, days: 31, microseconds: 86_399_999_999),
                smalls: [], mediums: [], bigs: [], texts: []),
            TypedRow(
                id: 3, flag: true, small: -2, medium: -3, big: -4, real: 0, text: "plain",
                json: #""🎉""#, day: try date(1969, 12, 31), instant: Timestamp(microsecondsSinceEpoch: -1),
                span: PostgresInterval(), smalls: [3], mediums: [-7], bigs: [1 << 40], texts: ["x"]),
            TypedRow(
                id: 4, day: try date(2100, 3, 1), instant: try timestamp("2100-03-01T00:00:00.000001Z")),
            TypedRow(
                id: 5, day: CalendarDate(daysSinceEpoch: .max), instant: Timestamp(microsecondsSinceEpoch: .min)),
            TypedRow(id: 6),
        ]
    }
}

/// A value shared with another thread.
final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func get() -> Value { lock.withLock { value } }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
    func update(_ change: (inout Value) -> Void) { lock.withLock { change(&value) } }
}
