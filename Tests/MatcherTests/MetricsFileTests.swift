import Chronology
import Foundation
import Testing

@testable import Matching
@testable import matcher

@Suite struct MetricsFileTests {
    static func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("matcher-metrics-\(UUID().uuidString).prom").path
    }

    static func summary(
        clock: Timestamp = Timestamp(secondsSinceEpoch: 1_772_334_000),
        retention: RetentionOutcome? = RetentionOutcome(forgotten: 0, backlog: false)
    ) -> RunSummary {
        RunSummary(
            runId: 7, kind: .run, shard: .all, clock: clock, dryRun: false, resumedRunId: nil,
            counters: RunCounters(
                candidates: 120, filtersEvaluated: 30, filtersInvalid: 1, filtersPaidIgnored: 2,
                matchesWritten: 40, notificationsWritten: 5, matchesForgotten: retention?.forgotten ?? 0),
            matchesFound: 40, phaseSeconds: [.read: 0.25, .evaluate: 0.5, .write: 1.5], totalSeconds: 2.5,
            retention: retention, completedRun: nil)
    }

    /// What the retention sweep left, for MatcherRetentionBacklog, and the stalest shard's last success, for
    /// MatcherShardBehind (review of session 23: neither a backlog nor a shard no timer starts had a series).
    @Test func theSweepsBacklogAndTheStalestShardAreWritten() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = MetricsFile(path: path, kind: .run, shard: .all)
        var gauges = MetricsFile.Gauges()
        gauges.stalestShardSince = 1_772_334_000
        try file.write(
            .success,
            summary: Self.summary(
                retention: RetentionOutcome(forgotten: 5_000_000, backlog: true, stoppedByConflict: "lock timeout")),
            gauges: gauges)
        let labels = #"{kind="run",shard="0/1"}"#
        var values = try Self.values(path)
        #expect(values["matcher_run_matches_forgotten" + labels] == 5_000_000)
        #expect(values["matcher_run_retention_backlog" + labels] == 1)
        #expect(values["matcher_run_retention_stopped_early" + labels] == 1)
        #expect(values["matcher_stalest_shard_success_clock_timestamp_seconds" + labels] == 1_772_334_000)
        // A failed run keeps the last success's; the next success without a backlog clears it.
        try file.write(.failure, summary: nil)
        values = try Self.values(path)
        #expect(values["matcher_run_retention_backlog" + labels] == 1)
        try file.write(.success, summary: Self.summary())
        values = try Self.values(path)
        #expect(values["matcher_run_retention_backlog" + labels] == 0)
        #expect(values["matcher_run_retention_stopped_early" + labels] == 0)
    }

    static func values(_ path: String) throws -> [String: Double] {
        MetricsFile.parse(try String(contentsOfFile: path, encoding: .utf8))
    }

    @Test func aFailedRunKeepsTheLastSuccessAndCountsAsAFailure() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = MetricsFile(path: path, kind: .run, shard: .all)
        let day1 = Date(timeIntervalSince1970: 1_772_334_100)
        try file.write(.success, summary: Self.summary(), exitStatus: 0, now: day1)
        try file.write(.failure, summary: nil, exitStatus: 69, now: day1.addingTimeInterval(86_400))
        let v = try Self.values(path)
        let l = "kind=\"run\",shard=\"0/1\""
        #expect(v["matcher_last_success_timestamp_seconds{\(l)}"] == 1_772_334_100)
        #expect(v["matcher_last_run_timestamp_seconds{\(l)}"] == 1_772_420_500)
        #expect(v["matcher_last_run_success{\(l)}"] == 0)
        #expect(v["matcher_last_run_exit_status{\(l)}"] == 69)
        #expect(v["matcher_runs_total{\(l),result=\"success\"}"] == 1)
        #expect(v["matcher_runs_total{\(l),result=\"failure\"}"] == 1)
        // The last success's figures stay.
        #expect(v["matcher_run_candidates{\(l)}"] == 120)
        #expect(v["matcher_run_phase_seconds{\(l),phase=\"write\"}"] == 1.5)
        #expect(v["matcher_last_success_clock_timestamp_seconds{\(l)}"] == 1_772_334_000)
    }

    /// Review of session 29: a previous file edited by hand (a negative or NaN counter) made the next run trap in
    /// swift-prometheus (a negative increment) after it had succeeded. Such values are not carried over.
    @Test func aHandEditedPreviousFileDoesNotStopTheRun() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = MetricsFile(path: path, kind: .run, shard: .all)
        try file.write(.success, summary: Self.summary())
        let l = "kind=\"run\",shard=\"0/1\""
        var text = try String(contentsOfFile: path, encoding: .utf8)
        text = text.replacingOccurrences(
            of: "matcher_runs_total{\(l),result=\"success\"} 1", with: "matcher_runs_total{\(l),result=\"success\"} -5")
        text = text.replacingOccurrences(
            of: "matcher_runs_total{\(l),result=\"failure\"} 0", with: "matcher_runs_total{\(l),result=\"failure\"} NaN"
        )
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try Self.values(path)["matcher_runs_total{\(l),result=\"success\"}"] == -5)
        try file.write(.success, summary: Self.summary())
        let v = try Self.values(path)
        #expect(v["matcher_runs_total{\(l),result=\"success\"}"] == 1)
        #expect(v["matcher_runs_total{\(l),result=\"failure\"}"] == 0)
    }

    /// A file another kind or shard wrote is left as it is: a backfill given the run's file would have dropped
    /// the run's series (its alerts blind), and a failure after it wrote `kind` and `shard` twice on a line.
    @Test func aFileOfAnotherKindOrShardIsLeftAsItIs() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try MetricsFile(path: path, kind: .run, shard: .all).write(.success, summary: Self.summary())
        let written = try String(contentsOfFile: path, encoding: .utf8)
        for other in [
            MetricsFile(path: path, kind: .backfill, shard: .all),
            MetricsFile(path: path, kind: .run, shard: try Shard(index: 1, count: 4)),
        ] {
            for result in [MetricsFile.Result.success, .failure] {
                let refused = #expect(throws: MetricsFileError.self) {
                    try other.write(result, summary: result == .success ? Self.summary() : nil)
                }
                #expect(
                    refused?.description.contains("its own --metrics-file") == true, "\(String(describing: refused))")
                #expect(try String(contentsOfFile: path, encoding: .utf8) == written)
            }
        }
        // The file's own kind and shard still write it.
        try MetricsFile(path: path, kind: .run, shard: .all).write(.failure, summary: nil)
        #expect(try Self.values(path)["matcher_runs_total{kind=\"run\",shard=\"0/1\",result=\"failure\"}"] == 1)
    }

    @Test func aRunThatFoundTheLockHeldIsNotASuccess() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = MetricsFile(path: path, kind: .run, shard: .all)
        try file.write(.locked, summary: nil, exitStatus: 75)
        let v = try Self.values(path)
        let l = "kind=\"run\",shard=\"0/1\""
        #expect(v["matcher_last_run_success{\(l)}"] == 0)
        #expect(v["matcher_last_run_exit_status{\(l)}"] == 75)
        #expect(v["matcher_runs_total{\(l),result=\"locked\"}"] == 1)
        #expect(v["matcher_last_success_timestamp_seconds{\(l)}"] == nil)
    }

    @Test func buildInfoAndPauseGauges() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = MetricsFile(path: path, kind: .run, shard: .all)
        var gauges = MetricsFile.Gauges()
        gauges.notificationsPause = .some(
            NotificationPause(
                pausedAt: Timestamp(secondsSinceEpoch: 1_772_000_000), pausedBy: "oncall", reason: "push outage"))
        try file.write(.success, summary: Self.summary(), gauges: gauges)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(
            text.contains(
                "matcher_build_info{kind=\"run\",shard=\"0/1\",version=\"\(BuildInfo.version)\",commit=\"\(BuildInfo.commit)\"} 1"
            ))
        let v = MetricsFile.parse(text)
        #expect(v["matcher_notifications_paused{kind=\"run\",shard=\"0/1\"}"] == 1)
        #expect(v["matcher_notifications_paused_since_timestamp_seconds{kind=\"run\",shard=\"0/1\"}"] == 1_772_000_000)

        gauges.notificationsPause = .some(nil)
        try file.write(.success, summary: Self.summary(), gauges: gauges)
        let after = try Self.values(path)
        #expect(after["matcher_notifications_paused{kind=\"run\",shard=\"0/1\"}"] == 0)
        #expect(after["matcher_notifications_paused_since_timestamp_seconds{kind=\"run\",shard=\"0/1\"}"] == nil)
    }

    /// deploy/prometheus/metrics.txt lists every metric the job can export; the Grafana dashboard and
    /// the alert rules may name only those (scripts/check-deploy checks them against the list).
    @Test func exportedMetricNamesMatchTheDeployList() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = MetricsFile(path: path, kind: .run, shard: .all)
        let gauges = MetricsFile.Gauges(
            notificationsPause: .some(
                NotificationPause(pausedAt: Timestamp(secondsSinceEpoch: 1), pausedBy: "a", reason: "b")),
            lagSeconds: 1, stalestShardSince: 1, quarantinedRows: 1, digestsWaiting: 1, oldestDigestWaitingSeconds: 1,
            digestOverdueSeconds: 1, unsentNotifications: 1, oldestUnsentSeconds: 1,
            primaryKeyBytes: 3, primaryKeyPackedBytes: 1, marks: 10, marksInPlace: 9)
        try file.write(.success, summary: Self.summary(), gauges: gauges)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let written = Set(
            text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) })
        let listURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("deploy/prometheus/metrics.txt")
        let listed = Set(
            try String(contentsOf: listURL, encoding: .utf8).split(separator: "\n")
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") })
        #expect(written == listed, "update deploy/prometheus/metrics.txt: written \(written.sorted())")
    }
}

@Suite struct LoggingTests {
    @Test func jsonValuesAreTyped() {
        let handler = LineLogHandler(label: "t", format: .json)
        let line = handler.line(
            level: .info, message: "run finished",
            metadata: [
                "candidates": .stringConvertible(120), "dry_run": .stringConvertible(false),
                "total_s": .stringConvertible(2.5), "shard": "0/4", "count_text": "12",
            ])
        #expect(line.contains("\"candidates\":120"))
        #expect(line.contains("\"dry_run\":false"))
        #expect(line.contains("\"total_s\":2.5"))
        #expect(line.contains("\"shard\":\"0/4\""))
        #expect(line.contains("\"count_text\":\"12\""))
    }

    @Test func journalPriorities() {
        var handler = LineLogHandler(label: "t", format: .logfmt)
        handler.priorityPrefix = true
        #expect(handler.line(level: .error, message: "x", metadata: nil).hasPrefix("<3>ts="))
        #expect(handler.line(level: .warning, message: "x", metadata: nil).hasPrefix("<4>"))
        #expect(handler.line(level: .info, message: "x", metadata: nil).hasPrefix("<6>"))
        #expect(handler.line(level: .debug, message: "x", metadata: nil).hasPrefix("<7>"))
        handler.priorityPrefix = false
        #expect(handler.line(level: .error, message: "x", metadata: nil).hasPrefix("ts="))
    }

    @Test func journalDetection() {
        #expect(!Log.standardErrorIsJournal(environment: [:]))
        // A JOURNAL_STREAM that is not standard error's own stream (inherited by a redirected child).
        #expect(!Log.standardErrorIsJournal(environment: ["JOURNAL_STREAM": "1:1"]))
        #expect(Log.standardErrorIsJournal(environment: ["MATCHER_LOG_PRIORITY_PREFIX": "1"]))
        #expect(
            !Log.standardErrorIsJournal(environment: ["MATCHER_LOG_PRIORITY_PREFIX": "0", "JOURNAL_STREAM": "1:1"]))
    }
}

@Suite struct ServiceStateTests {
    @Test func pauseKeepsItsStartAndResumeLiftsIt() throws {
        let clock = Timestamp(secondsSinceEpoch: 1_772_000_000)
        let state = InMemoryServiceState(clock: { clock })
        #expect(try state.notificationsPaused() == nil)
        let first = try state.pauseNotifications(by: "a", reason: "push outage")
        #expect(first.pausedAt == clock)
        let again = try state.pauseNotifications(by: "b", reason: "still out")
        #expect(again.pausedAt == clock && again.pausedBy == "b" && again.reason == "still out")
        #expect(try state.resumeNotifications() == again)
        #expect(try state.resumeNotifications() == nil)
        #expect(try state.notificationsPaused() == nil)
    }
}
