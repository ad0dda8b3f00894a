/// A parsed JSON document (RFC 8259), as the filter language reads it.
///
/// Numbers keep their literal and whether they are integers; objects keep the last value of a
/// repeated member name, as PostgreSQL's `jsonb` does (so a filter reads the same before and after
/// the database stores it).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    /// Members by name; of a repeated name, the last value.
    case object([String: JSONValue])

    /// The deepest nesting of arrays and objects accepted (the top-level object is depth 1).
    public static let maximumDepth = 64

    /// Parses `text`. Never traps, whatever the text; errors give the byte offset of the problem.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(utf8: Array(text.utf8))
    }

    /// Parses UTF-8 bytes, rejecting invalid UTF-8. Never traps, whatever the bytes.
    public static func parse(utf8 bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        return try parser.parseDocument()
    }
}

/// A JSON number: its literal, and its integer value when it has one.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The literal as written, such as `25`, `-0`, `25.0`, `1e2`.
    public let literal: String
    /// Whether the number is an integer, decided as PostgreSQL's `numeric` (and so `jsonb`) does:
    /// exactly when no fraction digit is left once the exponent is applied, that is when `jsonb`
    /// prints it without a decimal point. `25`, `-0`, `1e2`, `2.5e1` are integers; `25.0`, `1.50e1`,
    /// `100e-2`, `25.5` are not.
    public let isInteger: Bool
    /// The value of an integer that fits in 64 bits; nil for a fraction or a larger integer.
    public let int64: Int64?

    public var description: String { literal }
}

/// Why a text is not JSON, and where.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public let reason: String
    /// Offset in bytes (of the text's UTF-8) where the problem is.
    public let offset: Int

    public var description: String { "invalid JSON: \(reason) at byte \(offset)" }
}

/// A recursive-descent parser over UTF-8 bytes. Recursion is bounded by `JSONValue.maximumDepth`,
/// every loop advances, and every byte access is checked, so no input traps or hangs.
struct JSONParser {
    private let bytes: [UInt8]
    private var position = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue(depth: 0)
        skipWhitespace()
        if position < bytes.count {
            throw JSONParseError(reason: "unexpected \(describe(bytes[position])) after the document", offset: position)
        }
        return value
    }

    // MARK: Values

    /// Parses the value at `position`, inside containers nested `depth` deep.
    private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard let byte = peek() else { throw failure(expected: "a value") }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try parseLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try parseLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try parseLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw failure(expected: "a value")
        }
    }

    private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        try checkDepth(depth)
        position += 1  // {
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            position += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw failure(expected: "a member name") }
            let name = try parseString()
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { throw failure(expected: "\":\"") }
            position += 1
            skipWhitespace()
            members[name] = try parseValue(depth: depth)
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","):
                position += 1
            case UInt8(ascii: "}"):
                position += 1
                return .object(members)
            default:
                throw failure(expected: "\",\" or \"}\"")
            }
        }
    }

    private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        try checkDepth(depth)
        position += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            position += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","):
                position += 1
            case UInt8(ascii: "]"):
                position += 1
                return .array(elements)
            default:
                throw failure(expected: "\",\" or \"]\"")
            }
        }
    }

    private func checkDepth(_ depth: Int) throws(JSONParseError) {
        if depth > JSONValue.maximumDepth {
            throw JSONParseError(
                reason: "nesting deeper than \(JSONValue.maximumDepth) levels of arrays and objects (the limit)",
                offset: position)
        }
    }

    private mutating func parseLiteral(_ word: String) throws(JSONParseError) {
        let start = position
        for byte in word.utf8 {
            guard peek() == byte else {
                if position >= bytes.count { throw failure(expected: word) }
                throw JSONParseError(reason: "invalid literal (expected \(word))", offset: start)
            }
            position += 1
        }
    }

    // MARK: Strings

    private mutating func parseString() throws(JSONParseError) -> String {
        let start = position
        position += 1  // opening quote
        var decoded: [UInt8] = []  // used only once an escape appears
        var segmentStart = position
        var escaped = false
        while true {
            guard position < bytes.count else {
                throw JSONParseError(reason: "unterminated string", offset: start)
            }
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let text: String?
                if escaped {
                    decoded.append(contentsOf: bytes[segmentStart..<position])
                    text = String(validating: decoded, as: UTF8.self)
                } else {
                    text = String(validating: bytes[segmentStart..<position], as: UTF8.self)
                }
                position += 1
                guard let text else {
                    throw JSONParseError(reason: "invalid UTF-8 in the string", offset: start)
                }
                return text
            } else if byte == UInt8(ascii: "\\") {
                decoded.append(contentsOf: bytes[segmentStart..<position])
                escaped = true
                try parseEscape(into: &decoded)
                segmentStart = position
            } else if byte < 0x20 {
                throw JSONParseError(reason: "control character in a string", offset: position)
            } else {
                position += 1
            }
        }
    }

    /// Decodes the escape at `position` (a backslash) into UTF-8.
    private mutating func parseEscape(into output: inout [UInt8]) throws(JSONParseError) {
        let start = position
        position += 1
        guard let byte = peek() else { throw JSONParseError(reason: "unterminated string", offset: start) }
        position += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): output.append(byte)
        case UInt8(ascii: "b"): output.append(0x08)
        case UInt8(ascii: "f"): output.append(0x0C)
        case UInt8(ascii: "n"): output.append(0x0A)
        case UInt8(ascii: "r"): output.append(0x0D)
        case UInt8(ascii: "t"): output.append(0x09)
        case UInt8(ascii: "u"):
            let unit = try parseHex4(escapeStart: start)
            var scalarValue = UInt32(unit)
            if (0xD800...0xDBFF).contains(unit) {
                guard peek() == UInt8(ascii: "\\"), peek(1) == UInt8(ascii: "u") else {
                    throw JSONParseError(reason: "unpaired UTF-16 surrogate in an escape", offset: start)
                }
                position += 2
                let low = try parseHex4(escapeStart: start)
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw JSONParseError(reason: "unpaired UTF-16 surrogate in an escape", offset: start)
                }
                scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(unit) {
                throw JSONParseError(reason: "unpaired UTF-16 surrogate in an escape", offset: start)
            }
            guard let scalar = Unicode.Scalar(scalarValue) else {
                throw JSONParseError(reason: "invalid \\u escape", offset: start)
            }
            output.append(contentsOf: scalar.utf8)
        default:
            throw JSONParseError(reason: "invalid escape", offset: start)
        }
    }

    private mutating func parseHex4(escapeStart: Int) throws(JSONParseError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard let byte = peek() else { throw JSONParseError(reason: "unterminated string", offset: escapeStart) }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw JSONParseError(reason: "invalid \\u escape", offset: escapeStart)
            }
            value = value << 4 | UInt16(digit)
            position += 1
        }
        return value
    }

    // MARK: Numbers

    private mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
        let start = position
        let negative = peek() == UInt8(ascii: "-")
        if negative { position += 1 }
        let integerStart = position
        guard let first = peek(), isDigit(first) else { throw failure(expected: "a digit") }
        if first == UInt8(ascii: "0") {
            position += 1  // a leading zero stands alone
        } else {
            skipDigits()
        }
        let integerDigits = integerStart..<position
        var fractionDigits = position..<position
        if peek() == UInt8(ascii: ".") {
            position += 1
            let fractionStart = position
            guard let next = peek(), isDigit(next) else { throw failure(expected: "a digit") }
            skipDigits()
            fractionDigits = fractionStart..<position
        }
        // The exponent saturates far beyond any meaningful value, so huge ones cannot overflow.
        var exponent = 0
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            position += 1
            var exponentNegative = false
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") {
                exponentNegative = peek() == UInt8(ascii: "-")
                position += 1
            }
            guard let next = peek(), isDigit(next) else { throw failure(expected: "a digit") }
            while let byte = peek(), isDigit(byte) {
                exponent = min(exponent * 10 + Int(byte - UInt8(ascii: "0")), 1_000_000_000)
                position += 1
            }
            if exponentNegative { exponent = -exponent }
        }
        let literal = String(decoding: bytes[start..<position], as: UTF8.self)
        // Fraction digits left after the exponent: PostgreSQL's numeric display scale.
        let isInteger = exponent >= fractionDigits.count
        let value =
            isInteger
            ? integerValue(
                negative: negative, digits: bytes[integerDigits] + bytes[fractionDigits],
                zeros: exponent - fractionDigits.count)
            : nil
        return JSONNumber(literal: literal, isInteger: isInteger, int64: value)
    }

    /// The value of `digits` followed by `zeros` zeros, with its sign, or nil beyond 64 bits.
    private func integerValue(negative: Bool, digits: ArraySlice<UInt8>, zeros: Int) -> Int64? {
        let significant = digits.drop { $0 == UInt8(ascii: "0") }
        if significant.isEmpty { return 0 }
        var magnitude: UInt64 = 0
        for digit in significant {
            let (shifted, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = shifted.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
            if overflow1 || overflow2 { return nil }
            magnitude = sum
        }
        for _ in 0..<zeros {  // stops at the first overflow, within 20 steps
            let (shifted, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            if overflow { return nil }
            magnitude = shifted
        }
        if negative {
            if magnitude == UInt64(Int64.max) + 1 { return .min }
            return magnitude <= UInt64(Int64.max) ? -Int64(magnitude) : nil
        }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    // MARK: Bytes

    private func peek(_ ahead: Int = 0) -> UInt8? {
        position + ahead < bytes.count ? bytes[position + ahead] : nil
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private mutating func skipDigits() {
        while let byte = peek(), isDigit(byte) { position += 1 }
    }

    private mutating func skipWhitespace() {
        while let byte = peek(),
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")
                || byte == UInt8(ascii: "\t")
        {
            position += 1
        }
    }

    /// "unexpected end of input", or "expected <what>, found <byte>".
    private func failure(expected what: String) -> JSONParseError {
        guard let byte = peek() else {
            return JSONParseError(reason: "unexpected end of input", offset: position)
        }
        return JSONParseError(reason: "expected \(what), found \(describe(byte))", offset: position)
    }

    /// `"x"` for printable ASCII, `byte 0xFF` otherwise.
    private func describe(_ byte: UInt8) -> String {
        if byte >= 0x21, byte < 0x7F {
            return "\"\(Character(Unicode.Scalar(byte)))\""
        }
        let hex = String(byte, radix: 16, uppercase: true)
        return "byte 0x\(hex.count == 1 ? "0" + hex : hex)"
    }
}
