import Chronology
import PostgresClient
import PostgresTestSupport
import Testing

@Suite("Values: parameters, results and binary COPY")
struct ValueTests {
    @Test func everyTypeRoundTripsThroughParameters() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        for value in try sampleValues() {
            let result = try connection.query("SELECT $1 AS v", [value])
            #expect(result.columns == ["v"])
            #expect(result.rows.count == 1)
            #expect(result.rows.first?["v"] == value, "round trip of \(value)")
        }
    }

    /// Review of the explain output: a filter whose `conditions` the app retyped to bytea was quarantined with
    /// "conditions holds oid 17, not jsonb"; the type is named as PostgreSQL names it.
    @Test func aTypeThisClientDoesNotDecodeIsNamedAsPostgreSQLNamesIt() {
        #expect(PostgresValue.other(oid: 17, bytes: []).typeName == "bytea")
        #expect(PostgresValue.other(oid: 1700, bytes: []).typeName == "numeric")
        #expect(PostgresValue.other(oid: 1114, bytes: []).typeName == "timestamp")
        #expect(PostgresValue.other(oid: 600_000, bytes: []).typeName == "oid 600000")
    }

    @Test func nanRoundTrips() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let value = try connection.query("SELECT $1", [.float8(.nan)]).rows[0][0]
        #expect(value.doubleValue?.isNaN == true)
    }

    @Test func parametersMeanWhatTheServerReads() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute("SET TimeZone = 'UTC'; SET IntervalStyle = 'postgres'")
        let cases: [(PostgresValue, String)] = [
            (.date(try date(1900, 2, 28)), "1900-02-28"),
            (.date(try date(1969, 12, 31)), "1969-12-31"),
            (.date(try date(2400, 2, 29)), "2400-02-29"),
            (.date(CalendarDate(daysSinceEpoch: .max)), "infinity"),
            (.date(CalendarDate(daysSinceEpoch: .min)), "-infinity"),
            (.timestamptz(Timestamp(microsecondsSinceEpoch: -1)), "1969-12-31 23:59:59.999999+00"),
            (.timestamptz(try timestamp("2400-02-29T12:34:56.789012Z")), "2400-02-29 12:34:56.789012+00"),
            (.timestamptz(try timestamp("1900-02-28T00:00:00.000001Z")), "1900-02-28 00:00:00.000001+00"),
            (.timestamptz(Timestamp(microsecondsSinceEpoch: .max)), "infinity"),
            (.timestamptz(Timestamp(microsecondsSinceEpoch: .min)), "-infinity"),
            (
                .interval(PostgresInterval(months: 14, days: -3, microseconds: 3_723_000_001)),
                "1 year 2 mons -3 days +01:02:03.000001"
            ),
            (.int2Array([-1, 0, 1]), "{-1,0,1}"),
            (.int8Array([]), "{}"),
            (.textArray(["a b", "日本"]), "{\"a b\",日本}"),
            (.jsonb(#"{"k": ["v", 1]}"#), #"{"k": ["v", 1]}"#),
            (.text("日本語 🎉"), "日本語 🎉"),
            (.bool(true), "true"),
            (.float8(-2.5), "-2.5"),
        ]
        for (value, text) in cases {
            let result = try connection.query("SELECT $1::text", [value])
            #expect(try result.rows[0].string(0) == text, "\(value)")
        }
        let types = try connection.query(
            "SELECT pg_typeof($1)::text, pg_typeof($2)::text, pg_typeof($3)::text, pg_typeof($4)::text",
            [.jsonb("{}"), .int2Array([1]), .interval(PostgresInterval()), .textArray([])])
        #expect(types.rows[0].values.map(\.stringValue) == ["jsonb", "smallint[]", "interval", "text[]"])
    }

    @Test func resultsMeanWhatTheServerWrote() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let row = try #require(
            try connection.query(
                """
                SELECT DATE '1900-02-28' AS d1, DATE '2400-02-29' AS d2, 'infinity'::date AS d3, '-infinity'::date AS d4,
                       TIMESTAMPTZ '1969-12-31 23:59:59.999999+00' AS t1, TIMESTAMPTZ '2400-02-29 12:34:56.789012+09' AS t2,
                       'infinity'::timestamptz AS t3, '-infinity'::timestamptz AS t4,
                       INTERVAL '1 year 2 mons -3 days 01:02:03.000001' AS i,
                       ARRAY[1, 2, 3]::smallint[] AS a2, '{}'::bigint[] AS a8, ARRAY['x', '', 'z'] AS at,
                       'x'::varchar(5) AS vc, 'ab'::char(3) AS bp, '{"b": 1, "a": [true]}'::json AS js,
                       1.5::float4 AS f4, 12.5::numeric AS num
                """
            ).rows.first)
        #expect(try row.date("d1") == date(1900, 2, 28))
        #expect(try row.date("d2") == date(2400, 2, 29))
        #expect(try row.date("d3") == CalendarDate(daysSinceEpoch: .max))
        #expect(try row.date("d4") == CalendarDate(daysSinceEpoch: .min))
        #expect(try row.timestamp("t1") == Timestamp(microsecondsSinceEpoch: -1))
        #expect(try row.timestamp("t2") == timestamp("2400-02-29T03:34:56.789012Z"))
        #expect(try row.timestamp("t3") == Timestamp(microsecondsSinceEpoch: .max))
        #expect(try row.timestamp("t4") == Timestamp(microsecondsSinceEpoch: .min))
        #expect(try row.interval("i") == PostgresInterval(months: 14, days: -3, microseconds: 3_723_000_001))
        #expect(row["a2"] == .int2Array([1, 2, 3]))
        #expect(try row.int64Array("a2") == [1, 2, 3])
        #expect(row["a8"] == .int8Array([]))
        #expect(try row.stringArray("at") == ["x", "", "z"])
        #expect(row["vc"] == .text("x"))
        #expect(row["bp"] == .text("ab "))
        #expect(row["js"] == .jsonb(#"{"b": 1, "a": [true]}"#))
        #expect(row["f4"] == .float8(1.5))
        guard case .other(let oid, let bytes) = row["num"] else {
            Issue.record("numeric should come as .other, got \(row["num"])")
            return
        }
        #expect(oid == 1700)
        #expect(!bytes.isEmpty)
    }

    @Test func arrayDecodingErrorsAreClear() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let nullElement = #expect(throws: PostgresError.self) {
            try connection.query("SELECT ARRAY[1, NULL, 3]::int4[] AS a")
        }
        #expect(nullElement?.kind == .decoding)
        #expect(nullElement?.description.contains("NULL") == true)
        #expect(nullElement?.description.contains("\"a\"") == true)

        let multi = #expect(throws: PostgresError.self) {
            try connection.query("SELECT '{{1,2},{3,4}}'::int2[]")
        }
        #expect(multi?.description.contains("2-dimensional") == true)

        let row = try connection.query("SELECT ARRAY[1, 40000]::int4[] AS wide, 'text' AS t, NULL::int AS n").rows[0]
        #expect(try row.int64Array("wide") == [1, 40000])
        let narrow = #expect(throws: PostgresError.self) { try row.int16Array("wide") }
        #expect(narrow?.kind == .decoding)
        let wrongType = #expect(throws: PostgresError.self) { try row.int64(1) }
        #expect(wrongType?.kind == .decoding)
        #expect(wrongType?.message.contains("column 1 (\"t\")") == true)
        #expect(wrongType?.message.contains("text") == true)
        let null = #expect(throws: PostgresError.self) { try row.int32("n") }
        #expect(null?.message.contains("NULL") == true)
        #expect(try row.optionalInt32("n") == nil)
        #expect(row["n"].isNull)
        let missing = #expect(throws: PostgresError.self) { try row.int32("nope") }
        #expect(missing?.kind == .usage)
    }

    @Test func integerAccessorsWidenAndNarrow() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let row = try connection.query("SELECT 1::int2, 70000::int4, 5::int8, 5000000000::int8").rows[0]
        #expect(try row.int64(0) == 1)
        #expect(try row.int32(0) == 1)
        #expect(try row.int16(2) == 5)
        #expect(try row.int32(2) == 5)
        #expect(try row.int64(1) == 70000)
        #expect(throws: PostgresError.self) { try row.int16(1) }
        #expect(throws: PostgresError.self) { try row.int32(3) }
    }

    @Test func everyTypeRoundTripsThroughTableAndCopy() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute(
            """
            CREATE TABLE by_params \(TypedRow.tableDefinition);
            CREATE TABLE by_copy \(TypedRow.tableDefinition);
            CREATE TABLE by_values \(TypedRow.tableDefinition);
            """)
        let samples = try TypedRow.samples()
        let placeholders = (1...15).map { "$\($0)" }.joined(separator: ", ")
        for sample in samples {
            let inserted = try connection.query("INSERT INTO by_params VALUES (\(placeholders))", sample.values)
            #expect(inserted.affectedRows == 1)
        }
        let written = try connection.copyIn("COPY by_copy FROM STDIN (FORMAT binary)") { writer in
            for sample in samples { sample.write(to: writer) }
        }
        #expect(written == samples.count)
        try connection.copyIn("COPY by_values FROM STDIN (FORMAT binary)") { writer in
            for sample in samples {
                writer.beginRow(fieldCount: 15)
                for value in sample.values { writer.write(value) }
            }
        }

        for table in ["by_params", "by_copy", "by_values"] {
            let selected = try connection.query("SELECT * FROM \(table) ORDER BY id").rows.map(TypedRow.init(result:))
            #expect(selected == samples, "SELECT from \(table)")
            var copied: [TypedRow] = []
            let count = try connection.copyOut("COPY (SELECT * FROM \(table) ORDER BY id) TO STDOUT (FORMAT binary)") {
                row in
                #expect(row.fieldCount == 15)
                copied.append(try TypedRow(copy: &row))
            }
            #expect(count == samples.count)
            #expect(copied == samples, "COPY out of \(table)")
        }
        // The same values, compared by the server.
        let differences = try connection.query(
            """
            SELECT count(*) FROM ((TABLE by_params EXCEPT TABLE by_copy) UNION ALL (TABLE by_copy EXCEPT TABLE by_params)) d
            """)
        #expect(try differences.rows[0].int64(0) == 0)
    }

    @Test func copyRowCursorPeeksSkipsAndReadsGenerically() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        var seen: [[PostgresValue]] = []
        try connection.copyOut(
            """
            COPY (SELECT NULL::int, 7::int, 'skip me'::text, ARRAY[1,2]::int8[], 8::int2 ) TO STDOUT (FORMAT binary)
            """
        ) { row in
            #expect(row.isNull())
            #expect(try row.int32() == nil)
            #expect(!row.isNull())
            #expect(row.fieldIndex == 1)
            let seven = try row.value(oid: PostgresOID.int4)
            try row.skip()
            let array = try row.value(oid: PostgresOID.int8Array)
            // A field of the wrong size is a decoding error, not garbage.
            let wrong = #expect(throws: PostgresError.self) { try row.int32() }
            #expect(wrong?.kind == .decoding)
            #expect(throws: PostgresError.self) { try row.int32() }  // past the last field
            seen.append([seven, array])
        }
        #expect(seen == [[.int4(7), .int8Array([1, 2])]])
    }
}
