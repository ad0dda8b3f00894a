import Foundation
import MatchingPostgres

/// The store's fault points as the command line sets them: none, unless this binary was built with the
/// compilation condition `MATCHER_FAULTS` (debug builds, which `swift test` runs as `MatcherProcess`; never
/// a release build) and `MATCHER_FAULT` is set.
enum FaultInjection {
    static var storeFaultPoints: (any StoreFaultPoints)? {
        #if MATCHER_FAULTS
            return SigkillAtFaultPoint.fromEnvironment()
        #else
            return nil
        #endif
    }
}

#if MATCHER_FAULTS
    /// Deterministic crash points for the fault-injection tests: with `MATCHER_FAULT=point[:n]` in the
    /// environment, the process kills itself with SIGKILL the n-th time (default 1st) it reaches `point`, one
    /// of `StoreFaultPoint`'s names (`after-read`, `unit-before-commit`, `unit-after-commit`, `before-finish`,
    /// `sweep-between-pairs-and-entries`).
    final class SigkillAtFaultPoint: StoreFaultPoints, @unchecked Sendable {
        private let point: StoreFaultPoint
        private let hit: Int
        private var hits = 0
        private let lock = NSLock()

        init(point: StoreFaultPoint, hit: Int) {
            self.point = point
            self.hit = hit
        }

        /// nil when `MATCHER_FAULT` is unset or empty; a point it does not name is never reached.
        static func fromEnvironment() -> SigkillAtFaultPoint? {
            guard let spec = ProcessInfo.processInfo.environment["MATCHER_FAULT"], !spec.isEmpty else { return nil }
            let parts = spec.split(separator: ":")
            guard let point = parts.first.flatMap({ StoreFaultPoint(rawValue: String($0)) }) else { return nil }
            return SigkillAtFaultPoint(point: point, hit: parts.count > 1 ? Int(parts[1]) ?? 1 : 1)
        }

        func reach(_ reached: StoreFaultPoint) {
            guard reached == point else { return }
            lock.lock()
            hits += 1
            let count = hits
            lock.unlock()
            if count == hit {
                FileHandle.standardError.write(
                    Data("matcher: MATCHER_FAULT: SIGKILL at \(reached.rawValue) #\(count)\n".utf8))
                kill(getpid(), SIGKILL)
            }
        }
    }
#endif
