import Foundation
import Matching

/// Prometheus text-format metrics for node_exporter's textfile collector, written after every run
/// (success or not) to a temporary file in the same folder, made world-readable and renamed into
/// place, so the collector never reads half a file. Totals and the last success time carry over from
/// the previous file. Failure to write is logged by the caller and never changes the exit status.
struct MetricsFile {
    enum Result: String {
        case success
        case failure
        case locked
        case stopped
    }

    let path: String
    let kind: RunKind
    let shard: Shard

    func write(_ result: Result, summary: RunSummary?, now: Date = Date()) throws {
        let previous = (try? String(contentsOfFile: path, encoding: .utf8)).map(Self.parse) ?? [:]
        let labels = "kind=\"\(kind.rawValue)\",shard=\"\(shard)\""
        func key(_ name: String, _ extra: String = "") -> String { "\(name){\(labels)\(extra)}" }

        var lines: [String] = []
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(String, Double)]) {
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) \(type)")
            for (labelSet, value) in samples { lines.append("\(labelSet) \(Self.format(value))") }
        }

        var totals: [(String, Double)] = []
        for r in [Result.success, .failure, .locked, .stopped] {
            let k = key("matcher_runs_total", ",result=\"\(r.rawValue)\"")
            totals.append((k, (previous[k] ?? 0) + (r == result ? 1 : 0)))
        }
        metric("matcher_runs_total", "counter", "Runs finished, by result.", totals)
        metric("matcher_last_run_timestamp_seconds", "gauge", "When the last run ended (Unix time).",
               [(key("matcher_last_run_timestamp_seconds"), now.timeIntervalSince1970)])
        metric("matcher_last_run_success", "gauge", "1 if the last run succeeded (or found the shard locked), else 0.",
               [(key("matcher_last_run_success"), result == .success || result == .locked ? 1 : 0)])
        let successKey = key("matcher_last_success_timestamp_seconds")
        let lastSuccess = result == .success ? now.timeIntervalSince1970 : previous[successKey]
        if let lastSuccess {
            metric("matcher_last_success_timestamp_seconds", "gauge", "When a run last succeeded (Unix time).",
                   [(successKey, lastSuccess)])
        }
        if let summary, result == .success {
            metric("matcher_run_phase_seconds", "gauge", "Seconds the last successful run spent per phase.",
                   RunPhase.allCases.map { (key("matcher_run_phase_seconds", ",phase=\"\($0.rawValue)\""),
                                            summary.phaseSeconds[$0] ?? 0) })
            metric("matcher_run_duration_seconds", "gauge", "Wall-clock seconds of the last successful run.",
                   [(key("matcher_run_duration_seconds"), summary.totalSeconds)])
            let c = summary.counters
            for (name, help, value) in [
                ("matcher_run_candidates", "Profiles considered by the last successful run.", c.candidates),
                ("matcher_run_filters_evaluated", "Filters evaluated by the last successful run.", c.filtersEvaluated),
                ("matcher_run_filters_invalid", "Invalid filters skipped by the last successful run.", c.filtersInvalid),
                ("matcher_run_filters_paid_ignored", "Filters whose paid conditions were ignored (owner's plan).", c.filtersPaidIgnored),
                ("matcher_run_matches_written", "Matches written by the last successful run.", c.matchesWritten),
                ("matcher_run_notifications_written", "Notifications written by the last successful run.", c.notificationsWritten),
            ] {
                metric(name, "gauge", help, [(key(name), Double(value))])
            }
        }

        let text = lines.joined(separator: "\n") + "\n"
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).\(ProcessInfo.processInfo.processIdentifier).tmp")
        try Data(text.utf8).write(to: temporary)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: temporary.path)
        if rename(temporary.path, url.path) != 0 {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw MetricsFileError(description: "cannot rename \(temporary.path) to \(path): \(reason)")
        }
    }

    /// `name{labels} value` lines of a previous file.
    static func parse(_ text: String) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
        return values
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(format: "%.6f", value)
    }
}

struct MetricsFileError: Error, CustomStringConvertible {
    let description: String
}
