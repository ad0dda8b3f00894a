import Chronology

/// A service-wide pause of notifications (a push outage, say): while it is in force, runs keep
/// matching and recording pairs, but write no notifications; the pairs wait, unnotified, and go out
/// in the first digest after the pause is lifted.
public struct NotificationPause: Sendable, Hashable, Codable {
    /// When the pause began (kept when someone pauses again while paused).
    public let pausedAt: Timestamp
    /// Who paused: the operator's name as given to `matcher notifications pause`.
    public let pausedBy: String
    /// Why, as given with `--reason`.
    public let reason: String

    public init(pausedAt: Timestamp, pausedBy: String, reason: String) {
        self.pausedAt = pausedAt
        self.pausedBy = pausedBy
        self.reason = reason
    }
}

/// The service-wide switches an operator flips (`matcher notifications pause|resume`), one row
/// (`matcher_service_state`, migration 0007).
///
/// A run consults `notificationsPaused()` in each unit of work, inside the unit's transaction, before
/// deciding notifications: when it returns a pause, the unit records its matches and writes no
/// notification (its matches stay unnotified, so the next digest after `resumeNotifications()`
/// carries them).
public protocol ServiceStateRepository: Sendable {
    /// The pause in force, or nil when notifications flow.
    func notificationsPaused() throws -> NotificationPause?
    /// Pauses notifications. When already paused, keeps the original time and records the new
    /// `by` and `reason`. Returns the pause now in force.
    @discardableResult
    func pauseNotifications(by: String, reason: String) throws -> NotificationPause
    /// Lifts the pause; returns the pause that was lifted, or nil when none was in force.
    @discardableResult
    func resumeNotifications() throws -> NotificationPause?
}
