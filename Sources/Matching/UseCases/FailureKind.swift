import Foundation

/// What kind of failure an error is, for the exit status (cli.md) and for whether retrying can help.
public enum FailureKind: String, Sendable, Hashable {
    /// A bad command line: an unknown flag, a bad value, a `--now` without a zone (exit 64).
    case usage
    /// Configuration or state that retrying will not fix: an unreadable connection string, a schema the
    /// worker cannot use, progress that does not fit the database, a changed time zone (exit 78).
    case configuration
    /// The database cannot be reached (exit 69).
    case unavailable
    /// Another run of the same shard holds the run lock, or `matcher migrate` could not take its locks in time
    /// (exit 75).
    case locked
    /// Anything else (exit 1).
    case other
}

/// An error that knows its `FailureKind`; errors that are not classified count as `.other`.
public protocol ClassifiedError: Error {
    var failureKind: FailureKind { get }
    /// The database gave up this transaction because it conflicted with another writer's (a deadlock, a
    /// serialization failure, a row lock not granted within the lock timeout, a conflict the unit's fallback
    /// met again): nothing of it was written, and the same work started again may succeed.
    var isWriteConflict: Bool { get }
}

extension ClassifiedError {
    public var isWriteConflict: Bool { false }
}

/// How work the database gave up for a conflict with another writer is started again: a run's unit
/// (`UnitWriter`), a retention batch (`BatchConflicts`) and the listing of notify-off matches (`MatchingPass`)
/// alike. The transaction rolled back whole, so the same
/// work is done again, up to `attempts` times in all, after a pause that grows.
public enum WriteConflictRetry {
    public static let attempts = 3

    /// Waits before attempt `attempt` (2, 3, …): 50-100 ms, then 100-200 ms. The other writer goes on once this
    /// transaction is gone; a pause that grows lets it finish.
    public static func pause(beforeAttempt attempt: Int) {
        Thread.sleep(forTimeInterval: 0.05 * Double(attempt - 1) * Double.random(in: 1...2))
    }

    /// `body`, one transaction, started again after a write conflict up to `attempts` times in all.
    public static func run<T>(_ body: () throws -> T) throws -> T {
        var attempt = 1
        while true {
            do {
                return try body()
            } catch let error as any ClassifiedError where error.isWriteConflict && attempt < attempts {
                attempt += 1
                pause(beforeAttempt: attempt)
            }
        }
    }
}
