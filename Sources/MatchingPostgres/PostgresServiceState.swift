import Chronology
import Matching
import PostgresClient

/// `ServiceStateRepository` over `matcher_service_state` (migration 0007): one row, updated in place.
/// Each call is one statement, so it runs inside whatever transaction the connection has open: a unit
/// of work that reads `notificationsPaused()` on its own transaction sees the pause as of its snapshot.
public final class PostgresServiceState: ServiceStateRepository, @unchecked Sendable {
    private let connection: PostgresConnection

    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    public func notificationsPaused() throws -> NotificationPause? {
        let result = try connection.query(
            """
            SELECT notifications_paused_at, paused_by, reason FROM matcher_service_state
             WHERE notifications_paused_at IS NOT NULL
            """)
        return try result.rows.first.map(Self.pause)
    }

    @discardableResult
    public func pauseNotifications(by: String, reason: String) throws -> NotificationPause {
        let result = try connection.query(
            """
            INSERT INTO matcher_service_state AS s (singleton, notifications_paused_at, paused_by, reason)
            VALUES (true, now(), $1, $2)
            ON CONFLICT (singleton) DO UPDATE
               SET notifications_paused_at = coalesce(s.notifications_paused_at, now()),
                   paused_by = excluded.paused_by, reason = excluded.reason, updated_at = now()
            RETURNING notifications_paused_at, paused_by, reason
            """, [.text(by), .text(reason)])
        guard let row = result.rows.first else {
            throw PostgresError(kind: .usage, message: "matcher_service_state: the pause was not recorded")
        }
        return try Self.pause(row)
    }

    @discardableResult
    public func resumeNotifications() throws -> NotificationPause? {
        let result = try connection.query(
            """
            WITH before AS (
                SELECT notifications_paused_at, paused_by, reason FROM matcher_service_state
                 WHERE notifications_paused_at IS NOT NULL FOR UPDATE
            ), cleared AS (
                UPDATE matcher_service_state
                   SET notifications_paused_at = NULL, paused_by = NULL, reason = NULL, updated_at = now()
                 WHERE notifications_paused_at IS NOT NULL
                RETURNING singleton
            )
            SELECT before.* FROM before, cleared
            """)
        return try result.rows.first.map(Self.pause)
    }

    private static func pause(_ row: PostgresRow) throws -> NotificationPause {
        NotificationPause(pausedAt: try row.timestamp(0), pausedBy: try row.string(1), reason: try row.string(2))
    }
}
