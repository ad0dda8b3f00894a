/// What kind of failure an error is, for the exit status (cli.md) and for whether retrying can help.
public enum FailureKind: String, Sendable, Hashable {
    /// A bad command line: an unknown flag, a bad value, a `--now` without a zone (exit 64).
    case usage
    /// Configuration or state that retrying will not fix: an unreadable connection string, a schema the
    /// worker cannot use, progress that does not fit the database, a changed time zone (exit 78).
    case configuration
    /// The database cannot be reached (exit 69).
    case unavailable
    /// Another run of the same shard holds the run lock (exit 75).
    case locked
    /// Anything else (exit 1).
    case other
}

/// An error that knows its `FailureKind`; errors that are not classified count as `.other`.
public protocol ClassifiedError: Error {
    var failureKind: FailureKind { get }
    /// The database gave up this transaction because it conflicted with another writer's (a deadlock, a
    /// serialization failure): nothing of it was written, and the same work started again may succeed.
    var isWriteConflict: Bool { get }
}

extension ClassifiedError {
    public var isWriteConflict: Bool { false }
}
