import Foundation

/// Deterministic crash points for the fault-injection tests: with `MATCHER_FAULT=point[:n]` in the
/// environment, the process kills itself with SIGKILL the n-th time (default 1st) it reaches `point`.
/// Unset (always, in production), each check is one comparison.
///
/// Points: `after-read` (candidates read, nothing written), `unit-before-commit` (a unit's rows are
/// written inside its open transaction), `unit-after-commit`, `before-finish` (all units committed,
/// the run not yet marked succeeded).
enum FaultInjection {
    private static let configured: (point: String, hit: Int)? = {
        guard let spec = ProcessInfo.processInfo.environment["MATCHER_FAULT"], !spec.isEmpty else { return nil }
        let parts = spec.split(separator: ":")
        return (String(parts[0]), parts.count > 1 ? Int(parts[1]) ?? 1 : 1)
    }()
    nonisolated(unsafe) private static var hits: [String: Int] = [:]
    private static let lock = NSLock()

    static func reach(_ point: String) {
        guard let configured, configured.point == point else { return }
        lock.lock()
        hits[point, default: 0] += 1
        let count = hits[point]!
        lock.unlock()
        if count == configured.hit {
            FileHandle.standardError.write(Data("matcher: MATCHER_FAULT: SIGKILL at \(point) #\(count)\n".utf8))
            kill(getpid(), SIGKILL)
        }
    }
}
