import DeterministicRandom
import Testing

@testable import Matching

/// Hostile and malformed documents: each gives a clear error, none traps or hangs.
@Suite struct FilterLanguageHostileJSONTests {
    /// The parser's and validator's verdict, past the 64 KiB limit too (see `sizeLimitComesFirst`).
    private func error(_ json: String) -> String? {
        do {
            _ = try FilterConditions.decodeIgnoringSizeLimit(jsonUTF8: Array(json.utf8))
            return nil
        } catch {
            return error.description
        }
    }

    private func error(utf8 bytes: [UInt8]) -> String? {
        do {
            _ = try FilterConditions.decodeIgnoringSizeLimit(jsonUTF8: bytes)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func deepNestingIsRefusedAtTheLimit() {
        let brackets = String(repeating: "[", count: 10_000)
        #expect(
            error(brackets)
                == "conditions: invalid JSON: nesting deeper than 64 levels of arrays and objects (the limit) at byte 64"
        )
        let objects = String(repeating: #"{"a":"#, count: 10_000)
        #expect(
            error(objects)
                == "conditions: invalid JSON: nesting deeper than 64 levels of arrays and objects (the limit) at byte 320"
        )
        let closed = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(
            error(closed)
                == "conditions: invalid JSON: nesting deeper than 64 levels of arrays and objects (the limit) at byte 64"
        )
    }

    @Test func nestingUpToTheLimitIsParsed() {
        // The object is depth 1, so 63 nested lists reach depth 64.
        let deepest = #"{"age": "# + String(repeating: "[", count: 63) + String(repeating: "]", count: 63) + "}"
        #expect(error(deepest) == "age: condition is not an object (a list)")
        let tooDeep = #"{"age": "# + String(repeating: "[", count: 64) + String(repeating: "]", count: 64) + "}"
        #expect(
            error(tooDeep)
                == "conditions: invalid JSON: nesting deeper than 64 levels of arrays and objects (the limit) at byte 71"
        )
    }

    @Test func megabyteStringsAreQuotedShort() {
        let long = String(repeating: "a", count: 1 << 20)
        let forty = String(repeating: "a", count: 40)
        #expect(error("{\"age\": \"\(long)\"}") == "age: condition is not an object (string \"\(forty)…\")")
        #expect(error("{\"\(long)\": 1}") == "\"\(forty)…\": unknown item")
        #expect(error("{\"age\": {\"min\": \"\(long)\"}}") == "age: min is not an integer (string \"\(forty)…\")")
        #expect(error("{\"age\": {\"\(long)\": 1}}") == "age: unexpected key \"\(forty)…\"")
        let spaces = String(repeating: " ", count: 1 << 20)
        #expect(error(spaces + #"{"has_photo": true}"# + spaces) == nil)
    }

    @Test func longStringsWithEscapesAndUnicodeAreShortenedByCharacter() {
        let text = String(repeating: "東", count: 50)
        #expect(
            error("{\"has_photo\": \"\(text)\"}")
                == "has_photo: condition is not true or false (string \"\(String(repeating: "東", count: 40))…\")")
        #expect(
            error(#"{"has_photo": "line\none\ttab\u0001\"q\\"}"#)
                == #"has_photo: condition is not true or false (string "line\none\ttab\u0001\"q\\")"#)
    }

    @Test func hugeNumbersAreOutsideTheDomain() {
        let digits = String(repeating: "9", count: 1 << 20)
        #expect(
            error(#"{"age": {"min": \#(digits)}}"#)
                == "age: min \(String(repeating: "9", count: 40))… is outside 18..120")
        #expect(
            error(#"{"age": {"min": 0.\#(digits)}}"#)
                == "age: min is not an integer (\"0.\(String(repeating: "9", count: 38))…\")")
        #expect(
            error(#"{"age": {"min": 1e99999999999999999999999}}"#)
                == "age: min 1e99999999999999999999999 is outside 18..120")
        #expect(
            error(#"{"age": {"min": 25e-99999999999999999999999}}"#)
                == #"age: min is not an integer ("25e-99999999999999999999999")"#)
        #expect(
            error(#"{"personality": {"anyOf": [1234567890123456789012345678901234567890]}}"#)
                == "personality: code 1234567890123456789012345678901234567890 is outside 1..40")
    }

    @Test func invalidUTF8IsRefused() {
        // {"age": "<FF>"}
        let inString: [UInt8] = [0x7B, 0x22, 0x61, 0x67, 0x65, 0x22, 0x3A, 0x20, 0x22, 0xFF, 0x22, 0x7D]
        #expect(error(utf8: inString) == "conditions: invalid JSON: invalid UTF-8 in the string at byte 8")
        // {<FF>}
        #expect(
            error(utf8: [0x7B, 0xFF, 0x7D])
                == "conditions: invalid JSON: expected a member name, found byte 0xFF at byte 1")
        // {"<C0 80>": 1}: an overlong NUL
        #expect(
            error(utf8: [0x7B, 0x22, 0xC0, 0x80, 0x22, 0x3A, 0x31, 0x7D])
                == "conditions: invalid JSON: invalid UTF-8 in the string at byte 1")
        // {"<ED A0 80>": 1}: a UTF-16 surrogate encoded in UTF-8
        #expect(
            error(utf8: [0x7B, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x3A, 0x31, 0x7D])
                == "conditions: invalid JSON: invalid UTF-8 in the string at byte 1")
        // {"<E3 81>: a truncated sequence at the end of input
        #expect(error(utf8: [0x7B, 0x22, 0xE3, 0x81]) == "conditions: invalid JSON: unterminated string at byte 1")
        // a byte order mark is not JSON whitespace
        #expect(
            error(utf8: [0xEF, 0xBB, 0xBF, 0x7B, 0x7D])
                == "conditions: invalid JSON: expected a value, found byte 0xEF at byte 0")
        // through String, invalid bytes were already replaced by U+FFFD
        let repaired = String(decoding: [0x7B, 0xFF, 0x7D] as [UInt8], as: UTF8.self)
        #expect(error(repaired) == "conditions: invalid JSON: expected a member name, found byte 0xEF at byte 1")
        let repairedKey = String(decoding: [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D] as [UInt8], as: UTF8.self)
        #expect(error(repairedKey) == "\"\u{FFFD}\": unknown item")
    }

    @Test(arguments: [
        (#"{"age": {"min": 2"#, "conditions: invalid JSON: unexpected end of input at byte 17"),
        (#"{"age": {"min": "#, "conditions: invalid JSON: unexpected end of input at byte 16"),
        (#"{"age": {"min""#, "conditions: invalid JSON: unexpected end of input at byte 14"),
        (#"{"age": {"mi"#, "conditions: invalid JSON: unterminated string at byte 9"),
        (#"{"age": {"#, "conditions: invalid JSON: unexpected end of input at byte 9"),
        (#"{"age""#, "conditions: invalid JSON: unexpected end of input at byte 6"),
        (#"{"#, "conditions: invalid JSON: unexpected end of input at byte 1"),
        (#"{"has_photo": tr"#, "conditions: invalid JSON: unexpected end of input at byte 16"),
        (#"{"has_photo": trux}"#, "conditions: invalid JSON: invalid literal (expected true) at byte 14"),
        (#"{"has_photo": nul"#, "conditions: invalid JSON: unexpected end of input at byte 17"),
        (#"{"age": {"min": 2.}}"#, #"conditions: invalid JSON: expected a digit, found "}" at byte 18"#),
        (#"{"age": {"min": 2e}}"#, #"conditions: invalid JSON: expected a digit, found "}" at byte 18"#),
        (#"{"age": {"min": -}}"#, #"conditions: invalid JSON: expected a digit, found "}" at byte 17"#),
        (#"{"age": {"min": 025}}"#, #"conditions: invalid JSON: expected "," or "}", found "2" at byte 17"#),
        (#"{"age": {"min": .5}}"#, #"conditions: invalid JSON: expected a value, found "." at byte 16"#),
        (#"{"age": {"min": +5}}"#, #"conditions: invalid JSON: expected a value, found "+" at byte 16"#),
        (#"{"age": {"min": NaN}}"#, #"conditions: invalid JSON: expected a value, found "N" at byte 16"#),
        (#"{"age": {"min": Infinity}}"#, #"conditions: invalid JSON: expected a value, found "I" at byte 16"#),
        (#"{"smoking": {"anyOf": [1, 2}}"#, #"conditions: invalid JSON: expected "," or "]", found "}" at byte 27"#),
        (#"{"smoking": {"anyOf": [1,]}}"#, #"conditions: invalid JSON: expected a value, found "]" at byte 25"#),
        (#"{"a\x": 1}"#, "conditions: invalid JSON: invalid escape at byte 3"),
        (#"{"a\u12": 1}"#, "conditions: invalid JSON: invalid \\u escape at byte 3"),
        (#"{"\ud83d": 1}"#, "conditions: invalid JSON: unpaired UTF-16 surrogate in an escape at byte 2"),
        (#"{"\ude00": 1}"#, "conditions: invalid JSON: unpaired UTF-16 surrogate in an escape at byte 2"),
        (#"{"\ud83d\u0041": 1}"#, "conditions: invalid JSON: unpaired UTF-16 surrogate in an escape at byte 2"),
        ("{\"a\nb\": 1}", "conditions: invalid JSON: control character in a string at byte 3"),
        ("{\"has_photo\": true}\u{0}", "conditions: invalid JSON: unexpected byte 0x00 after the document at byte 19"),
    ])
    func malformedDocuments(json: String, message: String) {
        #expect(error(json) == message)
    }

    @Test func everyTruncationOfAValidDocumentIsAnError() {
        let document = #"""
            {"gender": {"anyOf": [2]}, "age": {"min": 25, "max": 32}, "residence": {"anyOf": [13, 14, 11]},
             "personality": {"allOf": [2, 9]}, "has_photo": true, "last_login": {"withinDays": 7}, "note\u00e9": null}
            """#
        let bytes = Array(document.utf8)
        for length in 0..<bytes.count {
            let message = error(utf8: Array(bytes[0..<length]))
            #expect(
                message?.hasPrefix("conditions: invalid JSON: ") == true,
                "prefix of \(length) bytes: \(message ?? "accepted")")
        }
        #expect(error(utf8: bytes) == #""noteé": unknown item"#)
    }

    @Test func sizeLimitComesFirst() throws {
        let limit = FilterConditions.maximumJSONBytes
        let padding = String(repeating: " ", count: limit - #"{"has_photo": true}"#.utf8.count)
        #expect(throws: Never.self) { try FilterConditions.decode(json: #"{"has_photo": true}"# + padding) }
        let over = #"{"has_photo": true}"# + padding + " "
        let refused = #expect(throws: FilterValidationError.self) { try FilterConditions.decode(json: over) }
        #expect(
            refused?.description
                == "conditions: too large: 65537 bytes of JSON, the limit is 65536; shorten the code lists or remove conditions"
        )
        // Refused before parsing: even text that is not JSON at all gets the size reason.
        let junk = String(repeating: "[", count: 70 * 1024)
        #expect(throws: FilterValidationError.self) { try FilterConditions.decode(json: junk) }
        #expect(error(junk)?.contains("nesting deeper") == true)
        #expect((try? FilterConditions.decode(jsonUTF8: Array(junk.utf8))) == nil)
    }

    @Test func hugeListsAreFine() throws {
        let codes = (0..<200_000).map { String($0 % 1000 + 1) }.joined(separator: ",")
        let decoded = try FilterConditions.decodeIgnoringSizeLimit(
            jsonUTF8: Array(#"{"communities": {"anyOf": [\#(codes)]}}"#.utf8))
        #expect(decoded.conditions.first?.form == .anyOf(Array(1...1000)))
        let nulls = Array(repeating: "null", count: 200_000).joined(separator: ",")
        #expect(error(#"{"x": [\#(nulls)]}"#) == "x: unknown item")
    }

    /// Random bytes, and random mutations of valid documents: the decoder always returns or throws.
    @Test func fuzzNeverTraps() {
        var random = SplitMix64(seed: 0xF022)
        let alphabet =
            Array(#"{}[]":,.-+eE0123456789 truenfalsull\"#.utf8) + [0x00, 0x0A, 0xC3, 0xA9, 0xFF, 0xED, 0xA0]
        let seeds = [
            #"{"gender": {"anyOf": [2]}, "age": {"min": 25, "max": 32}}"#,
            #"{"personality": {"allOf": [1, 2]}, "has_photo": true, "last_login": {"withinDays": 7}}"#,
            #"{"height": {"min": 1.5e2}, "communities": {"anyOf": [2147483647]}, "\u00e9\ud83d\ude00": "x"}"#,
        ].map { Array($0.utf8) }
        var accepted = 0
        var rejected = 0
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round % 4 == 0 {
                bytes = (0..<Int.random(in: 0...40, using: &random)).map { _ in
                    alphabet.randomElement(using: &random) ?? 0
                }
            } else {
                bytes = seeds[round % seeds.count]
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    let position = Int.random(in: 0...bytes.count, using: &random)
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: bytes.insert(alphabet.randomElement(using: &random) ?? 0, at: position)
                    case 1 where position < bytes.count: bytes.remove(at: position)
                    default: if position < bytes.count { bytes[position] = alphabet.randomElement(using: &random) ?? 0 }
                    }
                }
            }
            do {
                _ = try FilterConditions.decode(jsonUTF8: bytes)
                accepted += 1
            } catch {
                #expect(!error.description.isEmpty)
                #expect(!error.description.contains("\n"))
                rejected += 1
            }
        }
        #expect(accepted > 0)
        #expect(rejected > 0)
    }
}

/// The JSON parser on its own: numbers keep their literal, and integers are told apart from
/// fractions exactly as PostgreSQL's jsonb does.
@Suite struct FilterLanguageJSONNumberTests {
    @Test(arguments: [
        ("25", true, Int64?.some(25)),
        ("-25", true, -25),
        ("0", true, 0),
        ("-0", true, 0),
        ("25.0", false, nil),
        ("-0.0", false, nil),
        ("25.5", false, nil),
        ("1e2", true, 100),
        ("1E+2", true, 100),
        ("2.5e1", true, 25),
        ("0.5e1", true, 5),
        ("1.50e1", false, nil),
        ("100e-2", false, nil),
        ("0e5", true, 0),
        ("0e-5", false, nil),
        ("0.000e3", true, 0),
        ("9223372036854775807", true, .max),
        ("9223372036854775808", true, nil),
        ("-9223372036854775808", true, .min),
        ("-9223372036854775809", true, nil),
        ("92233720368547758.07e2", true, .max),
        ("1e18", true, 1_000_000_000_000_000_000),
        ("1e19", true, nil),
        ("1e400", true, nil),
        ("1e-400", false, nil),
    ])
    func integersAreDecidedAsPostgreSQLDoes(literal: String, isInteger: Bool, value: Int64?) throws {
        let parsed = try JSONValue.parse(literal)
        guard case .number(let number) = parsed else {
            Issue.record("\(literal) parsed as \(parsed)")
            return
        }
        #expect(number.literal == literal)
        #expect(number.isInteger == isInteger)
        #expect(number.int64 == value)
    }

    @Test func parsesEveryKindOfValue() throws {
        let parsed = try JSONValue.parse(#" {"a": [null, true, false, "s\u00e9\n", 1, {}], "b": {"c": []}} "#)
        guard case .object(let members) = parsed else {
            Issue.record("not an object: \(parsed)")
            return
        }
        #expect(members.count == 2)
        guard case .array(let list) = try #require(members["a"]) else {
            Issue.record("a is not a list")
            return
        }
        try #require(list.count == 6)
        #expect(list[0] == .null)
        #expect(list[1] == .bool(true))
        #expect(list[2] == .bool(false))
        #expect(list[3] == .string("sé\n"))
        #expect(list[5] == .object([:]))
        #expect(members["b"] == .object(["c": .array([])]))
    }

    @Test func lastOfARepeatedNameWins() throws {
        #expect(try JSONValue.parse(#"{"a": 1, "a": true}"#) == .object(["a": .bool(true)]))
    }

    @Test func parseErrorsGiveTheByteOffset() {
        do {
            _ = try JSONValue.parse("[1, 2")
            Issue.record("accepted a truncated list")
        } catch {
            #expect(error == JSONParseError(reason: "unexpected end of input", offset: 5))
            #expect(error.description == "invalid JSON: unexpected end of input at byte 5")
        }
    }
}
