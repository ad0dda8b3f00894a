import Chronology
import Foundation

/// `ServiceStateRepository` in memory, for use-case tests. Thread-safe.
public final class InMemoryServiceState: ServiceStateRepository, @unchecked Sendable {
    private let lock = NSLock()
    private var pause: NotificationPause?
    private let clock: @Sendable () -> Timestamp

    /// `clock`: the time a pause begins (the database's clock in PostgreSQL).
    public init(clock: @escaping @Sendable () -> Timestamp = { Timestamp.now() }) {
        self.clock = clock
    }

    public func notificationsPaused() throws -> NotificationPause? {
        lock.lock()
        defer { lock.unlock() }
        return pause
    }

    @discardableResult
    public func pauseNotifications(by: String, reason: String) throws -> NotificationPause {
        lock.lock()
        defer { lock.unlock() }
        let current = NotificationPause(pausedAt: pause?.pausedAt ?? clock(), pausedBy: by, reason: reason)
        pause = current
        return current
    }

    @discardableResult
    public func resumeNotifications() throws -> NotificationPause? {
        lock.lock()
        defer { lock.unlock() }
        let lifted = pause
        pause = nil
        return lifted
    }
}
