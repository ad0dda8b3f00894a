import ArgumentParser
import Foundation
import Logging
import Matching

enum LogFormat: String, ExpressibleByArgument, CaseIterable {
    case logfmt
    case json
}

/// One event per line on standard error, logfmt or JSON: good in journald and in log pipelines.
/// Metadata values are written as given; nothing here ever receives a password.
struct LineLogHandler: LogHandler {
    let label: String
    let format: LogFormat
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let level = event.level, message = event.message, explicit = event.metadata
        var fields: [(String, String)] = [
            ("ts", Self.timestamp()), ("level", level.rawValue), ("msg", message.description),
        ]
        let merged = metadata.merging(explicit ?? [:]) { $1 }
        for key in merged.keys.sorted() { fields.append((key, "\(merged[key]!)")) }
        let text: String
        switch format {
        case .logfmt:
            text = fields.map { "\($0.0)=\(Self.logfmtValue($0.1))" }.joined(separator: " ")
        case .json:
            text = "{" + fields.map { "\(Self.jsonString($0.0)):\(Self.jsonString($0.1))" }.joined(separator: ",") + "}"
        }
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    static func timestamp() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date())
    }

    static func logfmtValue(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.contains { $0 == " " || $0 == "=" || $0 == "\"" || $0.isNewline }
        guard needsQuotes else { return value }
        let escaped = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
        return "\"\(escaped)\""
    }

    static func jsonString(_ value: String) -> String { ReportRenderer.jsonString(value) }
}

enum Log {
    static func bootstrap(_ format: LogFormat) {
        LoggingSystem.bootstrap { label in LineLogHandler(label: label, format: format) }
    }
}
