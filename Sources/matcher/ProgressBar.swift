import Foundation
import Matching

/// A one-line progress bar with rate and ETA on a terminal (standard error), redrawn at most ten
/// times a second; when standard error is not a terminal the log's periodic progress lines serve.
final class ProgressBar: @unchecked Sendable {
    private let lock = NSLock()
    private var started: Date?
    private var lastDraw = Date.distantPast
    private var drawn = false

    static var isTerminal: Bool { isatty(STDERR_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb" }

    func update(done: Int, total: Int, matches: Int) {
        lock.lock()
        defer { lock.unlock() }
        let now = Date()
        if started == nil { started = now }
        guard done == total || now.timeIntervalSince(lastDraw) >= 0.1 else { return }
        lastDraw = now
        drawn = true
        FileHandle.standardError.write(
            Data(
                ("\r"
                    + Self.line(
                        done: done, total: total, matches: matches,
                        elapsed: now.timeIntervalSince(started ?? now))).utf8))
    }

    func finish() {
        lock.lock()
        defer { lock.unlock() }
        if drawn { FileHandle.standardError.write(Data("\n".utf8)) }
        drawn = false
        started = nil  // a second pass (a run after the interrupted one it completed) measures its own rate
    }

    static func line(done: Int, total: Int, matches: Int, elapsed: Double, width: Int = 30) -> String {
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 1
        let filled = Int((fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        let percent = String(format: "%3d%%", Int(fraction * 100))
        // Nothing to measure a rate by before the second update.
        let rate = elapsed > 0 && done > 0 ? Double(done) / elapsed : nil
        let pace =
            rate.map { "\(String(format: "%.0f", $0))/s  ETA \(clock(Double(total - done) / $0))" } ?? "-/s  ETA -"
        return "\(bar) \(percent)  \(done)/\(total) filters  \(pace)  \(matches) matches"
    }

    static func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600
            ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}
