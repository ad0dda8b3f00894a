import Testing

@testable import PostgresClient

/// The parser on hand-made binary COPY data, fed in chunks of every size, as libpq could hand it over.
@Suite("Binary COPY parser")
struct CopyParserTests {
    /// Header (with a 3-byte extension area), rows of (int4, text, NULL, int2[]), trailer.
    private static func stream(rows: Int) -> [UInt8] {
        var bytes = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00]
        bytes.appendBigEndian(UInt32(0))
        bytes.appendBigEndian(UInt32(3))
        bytes += [1, 2, 3]
        for i in 0..<rows {
            bytes.appendBigEndian(Int16(4))
            bytes.appendBigEndian(Int32(4))
            bytes.appendBigEndian(Int32(i))
            let text = Array("row \(i) 日本".utf8)
            bytes.appendBigEndian(Int32(text.count))
            bytes += text
            bytes.appendBigEndian(Int32(-1))
            var array: [UInt8] = []
            BinaryEncoding.appendArray((0..<Int16(i % 3)).map { $0 }, elementOID: PostgresOID.int2, to: &array)
            bytes.appendBigEndian(Int32(array.count))
            bytes += array
        }
        bytes.appendBigEndian(Int16(-1))
        return bytes
    }

    private struct Row: Equatable {
        var id: Int32?
        var text: String?
        var null: Int64?
        var array: [Int16]?
    }

    private static func expected(rows: Int) -> [Row] {
        (0..<rows).map { Row(id: Int32($0), text: "row \($0) 日本", null: nil, array: (0..<Int16($0 % 3)).map { $0 }) }
    }

    @Test(arguments: [1, 2, 3, 5, 7, 19, 20, 64, 1000, 100_000])
    func rowsSplitAcrossChunks(chunkSize: Int) throws {
        let data = Self.stream(rows: 50)
        var parser = BinaryCopyParser()
        var rows: [Row] = []
        try data.withUnsafeBytes { all in
            var offset = 0
            while offset < all.count {
                let end = min(offset + chunkSize, all.count)
                try parser.feed(UnsafeRawBufferPointer(rebasing: all[offset..<end])) { row in
                    #expect(row.fieldCount == 4)
                    rows.append(
                        Row(
                            id: try row.int32(), text: try row.string(), null: try row.int64(),
                            array: try row.int16Array()))
                }
                offset = end
            }
        }
        #expect(parser.isFinished)
        #expect(!parser.hasPartialData)
        #expect(parser.rowCount == 50)
        #expect(rows == Self.expected(rows: 50))
    }

    @Test func truncatedStreamLeavesPartialData() throws {
        let data = Self.stream(rows: 3)
        var parser = BinaryCopyParser()
        var count = 0
        try data.withUnsafeBytes { all in
            try parser.feed(UnsafeRawBufferPointer(rebasing: all[..<(all.count - 10)])) { _ in count += 1 }
        }
        #expect(count == 2)
        #expect(parser.hasPartialData)
        #expect(!parser.isFinished)
    }

    /// The header's flags as the format defines them: the low 16 bits are backward compatible (a reader ignores
    /// them), the high 16 critical (a reader that does not know one stops; bit 16, OIDs, is never asked for).
    @Test(arguments: [(UInt32(0x0000_0001), true), (0x0000_8000, true), (0x0001_0000, false), (0x0002_0000, false)])
    func headerFlagsLowAreIgnoredHighAreRefused(flags: UInt32, readable: Bool) throws {
        var data = Self.stream(rows: 3)
        withUnsafeBytes(of: flags.bigEndian) { data.replaceSubrange(11..<15, with: $0) }
        var parser = BinaryCopyParser()
        var rows = 0
        do {
            try data.withUnsafeBytes { try parser.feed($0) { _ in rows += 1 } }
            #expect(readable, "flags \(flags) accepted")
            #expect(rows == 3)
        } catch let error as PostgresError {
            #expect(!readable, "flags \(flags) refused: \(error)")
            #expect(error.kind == .copy && error.message.contains("critical"))
        }
    }

    @Test func rejectsTextFormatAndBadFieldLengths() throws {
        var parser = BinaryCopyParser()
        let text = Array("1\thello\n2\tworld\n\\.\n".utf8)
        let notBinary = #expect(throws: PostgresError.self) {
            try text.withUnsafeBytes { try parser.feed($0) { _ in } }
        }
        #expect(notBinary?.kind == .copy)

        var bad = Array(Self.stream(rows: 0).dropLast(2))
        bad.appendBigEndian(Int16(1))
        bad.appendBigEndian(Int32(-7))
        var parser2 = BinaryCopyParser()
        let badLength = #expect(throws: PostgresError.self) {
            try bad.withUnsafeBytes { try parser2.feed($0) { _ in } }
        }
        #expect(badLength?.message.contains("-7") == true)
    }
}
