import Foundation

/// What a person reads (a run summary, an explanation), as data: titled sections of rows. One renderer
/// turns any report into terminal text or JSON, so commands stay declarative and tests read values.
public struct Report: Sendable, Hashable {
    public let title: String
    public let sections: [ReportSection]

    public init(title: String, sections: [ReportSection]) {
        self.title = title
        self.sections = sections
    }

    public func section(_ title: String) -> ReportSection? { sections.first { $0.title == title } }
}

public struct ReportSection: Sendable, Hashable {
    public enum Layout: Sendable, Hashable {
        /// Label-value pairs: rows of two cells.
        case fields
        /// A table with these column names.
        case table(columns: [String])
    }

    public let title: String
    public let layout: Layout
    public let rows: [[ReportValue]]

    public static func fields(_ title: String, _ pairs: [(String, ReportValue)]) -> ReportSection {
        ReportSection(title: title, layout: .fields, rows: pairs.map { [.text($0.0), $0.1] })
    }

    public static func table(_ title: String, columns: [String], rows: [[ReportValue]]) -> ReportSection {
        ReportSection(title: title, layout: .table(columns: columns), rows: rows)
    }

    /// The value of a `fields` row by its label.
    public func value(_ label: String) -> ReportValue? {
        rows.first { $0.first == .text(label) }.flatMap { $0.count > 1 ? $0[1] : nil }
    }
}

public enum ReportValue: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    case text(String)
    case integer(Int)
    case seconds(Double)
    case flag(Bool)
    case none

    public init(stringLiteral value: String) { self = .text(value) }

    public var description: String {
        switch self {
        case .text(let s): return s
        case .integer(let n): return String(n)
        case .seconds(let s): return String(format: "%.3f s", s)
        case .flag(let b): return b ? "yes" : "no"
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
        case .json: return json(report)
        }
    }

    static func text(_ report: Report) -> String {
        var lines = [report.title]
        for section in report.sections {
            lines.append("")
            lines.append(section.title)
            switch section.layout {
            case .fields:
                let width = section.rows.map { displayWidth($0.first?.description ?? "") }.max() ?? 0
                for row in section.rows {
                    let label = row.first?.description ?? ""
                    let value = row.dropFirst().map(\.description).joined(separator: " ")
                    lines.append("  " + pad(label, to: width) + "  " + value)
                }
            case .table(let columns):
                let cells = [columns] + section.rows.map { $0.map(\.description) }
                let widths = columns.indices.map { i in cells.map { i < $0.count ? displayWidth($0[i]) : 0 }.max() ?? 0
                }
                for row in cells {
                    let padded = columns.indices.map { i in pad(i < row.count ? row[i] : "", to: widths[i]) }
                    lines.append(("  " + padded.joined(separator: "  ")).trimmingTrailingSpaces())
                }
                if section.rows.isEmpty { lines.append("  (none)") }
            }
        }
        return lines.joined(separator: "\n")
    }

    static func json(_ report: Report) -> String {
        var sections: [String] = []
        for section in report.sections {
            let body: String
            switch section.layout {
            case .fields:
                body =
                    "{"
                    + section.rows.map { row in
                        jsonString(key(row.first?.description ?? "")) + ": " + jsonValue(row.count > 1 ? row[1] : .none)
                    }.joined(separator: ", ") + "}"
            case .table(let columns):
                body =
                    "["
                    + section.rows.map { row in
                        "{"
                            + columns.indices.map { i in
                                jsonString(key(columns[i])) + ": " + jsonValue(i < row.count ? row[i] : .none)
                            }.joined(separator: ", ") + "}"
                    }.joined(separator: ", ") + "]"
            }
            sections.append(jsonString(key(section.title)) + ": " + body)
        }
        return "{\"title\": \(jsonString(report.title)), " + sections.joined(separator: ", ") + "}"
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

    /// "Matches written" -> "matches_written".
    static func key(_ label: String) -> String {
        label.lowercased().map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined()
            .split(separator: "_", omittingEmptySubsequences: true).joined(separator: "_")
    }

    static func jsonValue(_ value: ReportValue) -> String {
        switch value {
        case .text(let s): return jsonString(s)
        case .integer(let n): return String(n)
        case .seconds(let s): return String(format: "%.6f", s)
        case .flag(let b): return b ? "true" : "false"
        case .none: return "null"
        }
    }

    /// `s` as a JSON string literal (quotes, backslashes and control characters escaped).
    public static func jsonString(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}

extension String {
    fileprivate func trimmingTrailingSpaces() -> String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
