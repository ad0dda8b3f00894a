import Foundation

/// What a person reads (a run summary, an explanation), as data: titled sections of rows. One renderer
/// turns any report into terminal text or JSON, so commands stay declarative and tests read values.
///
/// Labels are for people and may be reworded; keys are for programs and never change (snake_case, only ever
/// added). The text shows labels, the JSON keys.
public struct Report: Sendable, Hashable {
    public let title: String
    public let sections: [ReportSection]

    public init(title: String, sections: [ReportSection]) {
        self.title = title
        self.sections = sections
    }

    /// A section by its title.
    public func section(_ title: String) -> ReportSection? { sections.first { $0.title == title } }
}

/// One labelled value with its stable key.
public struct ReportField: Sendable, Hashable {
    public let key: String
    public let label: String
    public let value: ReportValue
    /// The text leaves the field out when it has no value (`.none`); the JSON always has its key, null then,
    /// so that a script finds the same keys in every state (review of session 37).
    public let textOnlyWithValue: Bool

    public init(_ key: String, _ label: String, _ value: ReportValue) {
        self.init(key, label, value, textOnlyWithValue: false)
    }

    private init(_ key: String, _ label: String, _ value: ReportValue, textOnlyWithValue: Bool) {
        self.key = key
        self.label = label
        self.value = value
        self.textOnlyWithValue = textOnlyWithValue
    }

    /// A field that only some states have a value for: shown in text when it has one, null in JSON otherwise.
    public static func ifAny(_ key: String, _ label: String, _ value: ReportValue) -> ReportField {
        ReportField(key, label, value, textOnlyWithValue: true)
    }

    /// Whether the text shows it.
    var isShownInText: Bool { !(textOnlyWithValue && value == .none) }
}

/// A table's column: its stable key and its heading.
public struct ReportColumn: Sendable, Hashable {
    public let key: String
    public let label: String

    public init(_ key: String, _ label: String) {
        self.key = key
        self.label = label
    }
}

public struct ReportSection: Sendable, Hashable {
    public enum Layout: Sendable, Hashable {
        /// Label-value pairs.
        case fields([ReportField])
        /// A table: one value per column in each row.
        case table(columns: [ReportColumn], rows: [[ReportValue]])
    }

    public let key: String
    public let title: String
    public let layout: Layout

    public static func fields(_ key: String, _ title: String, _ fields: [ReportField]) -> ReportSection {
        ReportSection(key: key, title: title, layout: .fields(fields))
    }

    public static func table(
        _ key: String, _ title: String, columns: [ReportColumn], rows: [[ReportValue]]
    ) -> ReportSection {
        ReportSection(key: key, title: title, layout: .table(columns: columns, rows: rows))
    }

    /// The value of a field by its label.
    public func value(_ label: String) -> ReportValue? {
        guard case .fields(let fields) = layout else { return nil }
        return fields.first { $0.label == label }?.value
    }

    /// The value of a field by its key.
    public func value(key: String) -> ReportValue? {
        guard case .fields(let fields) = layout else { return nil }
        return fields.first { $0.key == key }?.value
    }
}

public enum ReportValue: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    case text(String)
    case integer(Int)
    case seconds(Double)
    /// A size against another: "2.00x" in text, 2.0 in JSON.
    case ratio(Double)
    case flag(Bool)
    /// Names: joined by commas in text ("none" when empty), an array in JSON.
    case names([String])
    case none

    public init(stringLiteral value: String) { self = .text(value) }

    public var description: String {
        switch self {
        case .text(let s): return s
        case .integer(let n): return String(n)
        case .seconds(let s): return String(format: "%.3f s", s)
        case .ratio(let r): return String(format: "%.2fx", r)
        case .flag(let b): return b ? "yes" : "no"
        case .names(let names): return names.isEmpty ? "none" : names.joined(separator: ", ")
        case .none: return "-"
        }
    }
}

public enum ReportFormat: String, Sendable, CaseIterable {
    case text
    case json
}

public enum ReportRenderer {
    public static func render(_ report: Report, as format: ReportFormat) -> String {
        switch format {
        case .text: return text(report)
        case .json: return JSONText.encode(report)
        }
    }

    static func text(_ report: Report) -> String {
        var lines = [report.title]
        for section in report.sections {
            // A section of fields none of which the text shows (a run that completed no interrupted run) is left
            // out; its keys are still in the JSON.
            if case .fields(let fields) = section.layout, !fields.isEmpty, !fields.contains(where: \.isShownInText) {
                continue
            }
            lines.append("")
            lines.append(section.title)
            switch section.layout {
            case .fields(let all):
                let fields = all.filter(\.isShownInText)
                let width = fields.map { displayWidth($0.label) }.max() ?? 0
                for field in fields {
                    lines.append("  " + pad(field.label, to: width) + "  " + printable(field.value.description))
                }
            case .table(let columns, let rows):
                let cells = [columns.map(\.label)] + rows.map { $0.map { printable($0.description) } }
                let widths = columns.indices.map { i in cells.map { i < $0.count ? displayWidth($0[i]) : 0 }.max() ?? 0
                }
                for row in cells {
                    let padded = columns.indices.map { i in pad(i < row.count ? row[i] : "", to: widths[i]) }
                    lines.append(("  " + padded.joined(separator: "  ")).trimmingTrailingSpaces())
                }
                if rows.isEmpty { lines.append("  (none)") }
            }
        }
        return lines.joined(separator: "\n")
    }

    /// `text` as one printable line for a terminal: control characters (ESC of an escape sequence, a newline,
    /// C1 controls) and the line, paragraph and bidirectional-override characters are written as `\u{…}`. Values
    /// the app or an operator wrote (a filter's name, a pause's reason) would otherwise reach the terminal raw.
    public static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnprintable) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if isUnprintable(scalar) {
                result += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    private static func isUnprintable(_ scalar: Unicode.Scalar) -> Bool {
        isControl(scalar) || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
    }

    /// A character that breaks or steers a line: C0 and C1 controls, DEL, the line and paragraph separators.
    /// (Log lines escape these too, `LineLogHandler.logfmtValue`; text reports also the bidirectional overrides.)
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029: return true
        default: return false
        }
    }

    /// Terminal columns `text` takes: East Asian wide and fullwidth characters (kanji, kana, hangul,
    /// fullwidth forms) take two.
    static func displayWidth(_ text: String) -> Int {
        text.unicodeScalars.reduce(0) { width, scalar in
            switch scalar.value {
            case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
                0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
                return width + 2
            case 0x0300...0x036F, 0x200B...0x200F:
                return width  // combining marks and zero-width characters
            default:
                return width + 1
            }
        }
    }

    static func pad(_ text: String, to width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - displayWidth(text)))
    }
}

// MARK: - JSON: keys, never labels

extension Report: Encodable {
    /// `{"title": …, "<section key>": {"<field key>": value, …} or [{"<column key>": value, …}, …], …}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: JSONKey.self)
        try container.encode(title, forKey: JSONKey("title"))
        for section in sections {
            switch section.layout {
            case .fields(let fields):
                var object = container.nestedContainer(keyedBy: JSONKey.self, forKey: JSONKey(section.key))
                for field in fields { try object.encode(field.value, forKey: JSONKey(field.key)) }
            case .table(let columns, let rows):
                var array = container.nestedUnkeyedContainer(forKey: JSONKey(section.key))
                for row in rows {
                    var object = array.nestedContainer(keyedBy: JSONKey.self)
                    for (i, column) in columns.enumerated() {
                        try object.encode(i < row.count ? row[i] : .none, forKey: JSONKey(column.key))
                    }
                }
            }
        }
    }
}

extension ReportValue: Encodable {
    /// Text a string, integers and flags as such, seconds a number to the microsecond, a ratio a number to the
    /// hundredth, names an array of strings, none null.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .text(let s): try container.encode(s)
        case .integer(let n): try container.encode(n)
        case .seconds(let s): try container.encode(s.isFinite ? (s * 1e6).rounded() / 1e6 : 0)
        case .ratio(let r): try container.encode(r.isFinite ? (r * 100).rounded() / 100 : 0)
        case .flag(let b): try container.encode(b)
        case .names(let names): try container.encode(names)
        case .none: try container.encodeNil()
        }
    }
}

extension String {
    fileprivate func trimmingTrailingSpaces() -> String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
