/// Why a saved filter's conditions are invalid: which key, and what is wrong with it.
///
/// `description` is `<key>: <problem>`, such as `age: min 40 is greater than max 30`, or
/// `conditions: <problem>` when the document as a whole is wrong (not JSON, not an object).
public struct FilterValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The key the problem is about; nil when the whole document is wrong. A catalogue key is given
    /// as is; an unknown key that is not a plain identifier of at most 40 characters is given quoted,
    /// escaped and shortened, so that it is always one short printable line.
    public let itemKey: String?
    /// The problem, lower-case, such as `code 49 is outside 1..48`.
    public let problem: String

    public init(itemKey: String?, problem: String) {
        self.itemKey = itemKey
        self.problem = problem
    }

    public var description: String { "\(itemKey ?? "conditions"): \(problem)" }
}

/// Text of offending values for messages: always short, single-line and printable.
enum MessageText {
    /// How many characters of an offending value a message quotes before `…`.
    static let quoteLimit = 40

    /// A key as it appears before the colon: plain when it is a short identifier, else quoted.
    static func key(_ key: String) -> String {
        let plain =
            !key.isEmpty && key.unicodeScalars.dropFirst(quoteLimit).isEmpty
            && key.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_"
            }
        return plain ? key : quoted(key)
    }

    /// `"text"`, JSON-escaped (`JSONText`) and cut at `quoteLimit` characters with `…`; C1 controls and the
    /// line and paragraph separators, which JSON allows raw, are escaped too, so that a message stays one
    /// printable line.
    static func quoted(_ text: String) -> String {
        let head = text.unicodeScalars.prefix(quoteLimit)
        var result = ""
        for scalar in JSONText.string(String(String.UnicodeScalarView(head))).unicodeScalars.dropLast() {
            if (0x7F...0x9F).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}" {
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        if head.endIndex != text.unicodeScalars.endIndex { result += "…" }
        return result + "\""
    }

    /// A number literal, cut at `quoteLimit` characters with `…`.
    static func literal(_ number: JSONNumber) -> String {
        number.literal.utf8.count > quoteLimit ? number.literal.prefix(quoteLimit) + "…" : number.literal
    }
}

extension JSONValue {
    /// The value in a message: `"25.5"` (a number), `string "abc"`, `null`, `true`, `a list`, `an object`.
    var briefDescription: String {
        switch self {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .number(let number): "\"\(MessageText.literal(number))\""
        case .string(let text): "string \(MessageText.quoted(text))"
        case .array: "a list"
        case .object: "an object"
        }
    }
}
