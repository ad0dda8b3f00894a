import Foundation

/// A key chosen at run time (a section's or a field's key).
struct JSONKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }

    init(_ key: String) { stringValue = key }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// The one way this program writes JSON: `JSONEncoder`, keys sorted (a stable order), `/` unescaped.
public enum JSONText {
    /// `value` as one line of JSON.
    public static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return String(decoding: try encoder.encode(value), as: UTF8.self)
        } catch {
            // Only a non-finite Double fails to encode, and none is ever given.
            preconditionFailure("JSON encoding failed: \(error)")
        }
    }

    /// `s` as a JSON string literal (quotes, backslashes and control characters escaped).
    public static func string(_ s: String) -> String { encode(s) }
}
