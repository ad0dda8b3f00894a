import ArgumentParser
import Foundation
import Logging
import Matching

enum LogFormat: String, ExpressibleByArgument, CaseIterable {
    case logfmt
    case json
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// One event per line on standard error, logfmt or JSON: good in journald and in log pipelines.
/// Metadata values are written as given; nothing here ever receives a password. In JSON, values
/// logged as numbers or booleans (`.stringConvertible(42)`, `.stringConvertible(true)`) are JSON
/// numbers and booleans; strings stay strings. When standard error is the journal (systemd sets
/// `JOURNAL_STREAM` to its device and inode), each line starts with its syslog priority, `<3>` for
/// error to `<7>` for debug, so `journalctl -p warning` filters by level.
struct LineLogHandler: LogHandler {
    let label: String
    let format: LogFormat
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var priorityPrefix = false

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        FileHandle.standardError.write(
            Data(
                (line(
                    level: event.level, message: event.message.description,
                    metadata: event.metadata)).utf8))
    }

    /// The text written for one event, newline included.
    func line(level: Logger.Level, message: String, metadata explicit: Logger.Metadata?) -> String {
        var fields: [(String, Logger.Metadata.Value)] = [
            ("ts", .string(Self.timestamp())), ("level", .string(level.rawValue)), ("msg", .string(message)),
        ]
        let merged = metadata.merging(explicit ?? [:]) { $1 }
        for key in merged.keys.sorted() { fields.append((key, merged[key]!)) }
        let text: String
        switch format {
        case .logfmt:
            text = fields.map { "\($0.0)=\(Self.logfmtValue("\($0.1)"))" }.joined(separator: " ")
        case .json:
            text = "{" + fields.map { "\(Self.jsonString($0.0)):\(Self.jsonValue($0.1))" }.joined(separator: ",") + "}"
        }
        return (priorityPrefix ? "<\(Self.syslogPriority(level))>" : "") + text + "\n"
    }

    /// syslog priorities as journald reads them from a `<N>` prefix.
    static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .critical: return 2
        case .error: return 3
        case .warning: return 4
        case .notice: return 5
        case .info: return 6
        case .debug, .trace: return 7
        }
    }

    static func timestamp() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date())
    }

    /// A logfmt value: quoted when it holds a space of any kind, `=`, `"`, a control or a format character, with `\\`,
    /// `"`, `\n`, `\r`, `\t` escaped and other control and format characters written as `\u001b` (JSON's form), so
    /// that a line stays one line and inert (a server's message may carry anything).
    static func logfmtValue(_ value: String) -> String {
        let needsQuotes =
            value.isEmpty
            || value.unicodeScalars.contains {
                $0 == "=" || $0 == "\"" || $0.properties.isWhitespace || ReportRenderer.isControl($0)
                    || $0.properties.generalCategory == .format
            }
        guard needsQuotes else { return value }
        var escaped = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            default:
                // Controls, and format characters (U+202E would reorder what a terminal shows of the line).
                if ReportRenderer.isControl(scalar) || scalar.properties.generalCategory == .format {
                    // JSON's form, which logfmt readers take: a surrogate pair above U+FFFF (a tag character).
                    for unit in String(scalar).utf16 { escaped += String(format: "\\u%04x", unit) }
                } else {
                    escaped.unicodeScalars.append(scalar)
                }
            }
        }
        return "\"\(escaped)\""
    }

    static func jsonString(_ value: String) -> String { JSONText.string(value) }

    /// Numbers and booleans logged as such are JSON numbers and booleans; everything else a string.
    static func jsonValue(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text):
            return jsonString(text)
        case .stringConvertible(let convertible):
            switch convertible {
            case let bool as Bool: return bool ? "true" : "false"
            case let int as any BinaryInteger: return "\(int)"
            case let double as Double where double.isFinite: return "\(double)"
            default: return jsonString(convertible.description)
            }
        case .array(let values):
            return "[" + values.map(jsonValue).joined(separator: ",") + "]"
        case .dictionary(let values):
            return "{"
                + values.keys.sorted().map { "\(jsonString($0)):\(jsonValue(values[$0]!))" }.joined(separator: ",")
                + "}"
        }
    }
}

enum Log {
    /// Whether standard error is the journal: systemd sets `JOURNAL_STREAM=DEV:INODE` of the stream it
    /// connected, which must be standard error's own (a child whose stderr was redirected inherits the
    /// variable but not the stream). `MATCHER_LOG_PRIORITY_PREFIX=1` or `0` forces it either way.
    static func standardErrorIsJournal(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        // 1/true/yes or 0/false/no; anything else (a typo) is as if unset, not "off" (review of session 32).
        switch environment["MATCHER_LOG_PRIORITY_PREFIX"]?.lowercased() {
        case "1", "true", "yes": return true
        case "0", "false", "no": return false
        default: break
        }
        guard let stream = environment["JOURNAL_STREAM"] else { return false }
        let parts = stream.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(STDERR_FILENO, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    /// The prefix that makes journald file a line written straight to standard error (the one failure line a
    /// failure prints, cli.md) at priority err, as the logger's own error events are: without it the journal
    /// files the line as info, and `journalctl -p err` does not show it. Empty when standard error is not the
    /// journal.
    static var errorPriority: String {
        standardErrorIsJournal() ? "<\(LineLogHandler.syslogPriority(.error))>" : ""
    }

    static func bootstrap(_ format: LogFormat, level: Logger.Level = .info) {
        let prefix = standardErrorIsJournal()
        LoggingSystem.bootstrap { label in
            LineLogHandler(label: label, format: format, logLevel: level, priorityPrefix: prefix)
        }
    }
}
