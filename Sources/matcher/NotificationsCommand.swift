import ArgumentParser
import Foundation
import Logging
import Matching
import MatchingPostgres
import PostgresClient

/// `matcher notifications pause|resume`: a service-wide pause of notifications (a push outage) while
/// matching goes on (`matcher_service_state`, migration 0007).
struct Notifications: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pause or resume notifications service-wide (matching goes on; matches wait for the next digest).",
        subcommands: [Pause.self, Resume.self, Show.self])

    struct Pause: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop writing notifications until `matcher notifications resume`; runs keep recording matches.")

        @OptionGroup var database: DatabaseOptions
        @Option(help: "Why (shown by alerts and `matcher notifications show`).") var reason: String
        @Option(help: "Who pauses (default: $SUDO_USER, $USER or \"unknown\").") var by: String?
        @Option(help: "Output format: text or json.") var format: ReportFormat = .text

        func validate() throws {
            guard !reason.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw ValidationError("--reason must say why notifications are paused")
            }
        }

        func run() throws {
            try withConnection(database, "notifications pause") { connection, logger in
                let pause = try PostgresServiceState(connection: connection)
                    .pauseNotifications(by: by ?? Notifications.operatorName(), reason: reason)
                logger.notice(
                    "notifications paused",
                    metadata: [
                        "paused_at": "\(pause.pausedAt.iso8601)", "paused_by": "\(pause.pausedBy)",
                        "reason": "\(pause.reason)",
                    ])
                Notifications.print(pause, verb: "paused", format: format)
            }
        }
    }

    struct Resume: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write notifications again; the next runs send what waited during the pause.")

        @OptionGroup var database: DatabaseOptions
        @Option(help: "Output format: text or json.") var format: ReportFormat = .text

        func run() throws {
            try withConnection(database, "notifications resume") { connection, logger in
                let lifted = try PostgresServiceState(connection: connection).resumeNotifications()
                if let lifted {
                    logger.notice(
                        "notifications resumed",
                        metadata: [
                            "paused_at": "\(lifted.pausedAt.iso8601)", "paused_by": "\(lifted.pausedBy)",
                            "reason": "\(lifted.reason)",
                        ])
                }
                Notifications.print(
                    lifted, verb: lifted == nil ? "were not paused" : "resumed", format: format, lifting: true)
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Whether notifications are paused, since when, by whom and why.")

        @OptionGroup var database: DatabaseOptions
        @Option(help: "Output format: text or json.") var format: ReportFormat = .text

        func run() throws {
            try withConnection(database, "notifications show") { connection, _ in
                let pause = try PostgresServiceState(connection: connection).notificationsPaused()
                Notifications.print(
                    pause, verb: pause == nil ? "are flowing (not paused)" : "are paused", format: format)
            }
        }
    }

    static func operatorName(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        for key in ["SUDO_USER", "USER", "LOGNAME"] {
            if let name = environment[key], !name.isEmpty { return name }
        }
        return "unknown"
    }

    /// `pause` as the command's answer; `lifting`: it is the pause `resume` just lifted, not the state now.
    static func print(_ pause: NotificationPause?, verb: String, format: ReportFormat, lifting: Bool = false) {
        switch format {
        case .json:
            Swift.print(JSONText.encode(lifting ? PauseJSON(nil, lifted: pause) : PauseJSON(pause)))
        case .text:
            if let pause {
                Swift.print(
                    "matcher: notifications \(verb): paused since \(pause.pausedAt.iso8601) by "
                        + "\(ReportRenderer.printable(pause.pausedBy)): \(ReportRenderer.printable(pause.reason))")
            } else {
                Swift.print("matcher: notifications \(verb)")
            }
        }
    }
}

/// `matcher notifications … --format json`: the state after the command, `paused`, and when paused since when, by
/// whom and why (null when not); and `lifted`, the pause `resume` just lifted (null from the other commands, and
/// when there was none). A script reads `paused` the same way after each command (review of session 37: `resume`
/// printed the pause it lifted as `"paused": true`).
struct PauseJSON: Encodable {
    let pause: NotificationPause?
    let lifted: NotificationPause?

    init(_ pause: NotificationPause?, lifted: NotificationPause? = nil) {
        self.pause = pause
        self.lifted = lifted
    }

    enum CodingKeys: String, CodingKey {
        case paused
        case pausedAt = "paused_at"
        case pausedBy = "paused_by"
        case reason
        case lifted
    }

    enum LiftedKeys: String, CodingKey {
        case pausedAt = "paused_at"
        case pausedBy = "paused_by"
        case reason
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(pause != nil, forKey: .paused)
        try container.encode(pause?.pausedAt.iso8601, forKey: .pausedAt)
        try container.encode(pause?.pausedBy, forKey: .pausedBy)
        try container.encode(pause?.reason, forKey: .reason)
        if let lifted {
            var nested = container.nestedContainer(keyedBy: LiftedKeys.self, forKey: .lifted)
            try nested.encode(lifted.pausedAt.iso8601, forKey: .pausedAt)
            try nested.encode(lifted.pausedBy, forKey: .pausedBy)
            try nested.encode(lifted.reason, forKey: .reason)
        } else {
            try container.encodeNil(forKey: .lifted)
        }
    }
}

/// Reads the notification pause and the service's status for the run's metrics, after the run (failed
/// ones too), on the run's connection, best effort: what cannot be read is left out of the file (no gauge)
/// and never changes the run's exit status.
final class PauseProbe: @unchecked Sendable {
    var connection: PostgresConnection?
    /// The run's shard: its lag is the one exported.
    var shard: Shard = .all

    func gauges(_ logger: Logger) -> MetricsFile.Gauges {
        var gauges = MetricsFile.Gauges()
        guard let connection, connection.isHealthy else { return gauges }
        do {
            gauges.notificationsPause = .some(try PostgresServiceState(connection: connection).notificationsPaused())
        } catch {
            logger.debug(
                "notification pause not read for metrics", metadata: ["error": "\(redactingSecrets("\(error)"))"])
        }
        do {
            // The digests of the shard's own filters: what its run left (`StatusRepository.serviceStatus`).
            let status = try PostgresStatusRepository(connection: connection).serviceStatus(
                retention: false, digestsOf: shard)
            gauges.lagSeconds = status.shard(shard).flatMap { status.lagSeconds(of: $0) }.map(Double.init)
            gauges.stalestShardSince = status.stalestShardSince.map { Double($0.microsecondsSinceEpoch) / 1_000_000 }
            gauges.quarantinedRows = status.quarantinedRows
            gauges.digestsWaiting = status.digests.filters
            gauges.oldestDigestWaitingSeconds = Double(
                status.digests.oldestMatchedAt.map { status.seconds(since: $0) } ?? 0)
            gauges.digestOverdueSeconds = Double(
                status.digests.oldestDueSince.map { max(0, status.seconds(since: $0)) } ?? 0)
            gauges.unsentNotifications = status.unsent.count
            gauges.oldestUnsentSeconds = Double(
                status.unsent.oldestCreatedAt.map { max(0, status.seconds(since: $0)) } ?? 0)
            gauges.primaryKeyBytes = status.retention.primaryKeyBytes
            gauges.primaryKeyPackedBytes = status.retention.primaryKeyPackedBytes
            gauges.marks = status.retention.marks?.marks
            gauges.marksInPlace = status.retention.marks?.inPlace
        } catch {
            logger.debug("status not read for metrics", metadata: ["error": "\(redactingSecrets("\(error)"))"])
        }
        return gauges
    }
}
