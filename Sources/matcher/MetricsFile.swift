import Foundation
import Matching
import Prometheus

/// Prometheus text-format metrics for node_exporter's textfile collector (formatted by swift-prometheus's
/// registry), written after every run (success or not) to a temporary file in the same folder, made
/// world-readable and renamed into place, so the collector never reads half a file. Totals and the
/// last success's figures carry over from the previous file. Failure to write is logged by the caller
/// and never changes the exit status.
struct MetricsFile {
    enum Result: String, CaseIterable {
        case success
        case failure
        case locked
        case stopped
    }

    /// What the run knows beside its summary. nil: not known to this run (not written).
    struct Gauges {
        /// The service-wide notification pause (`matcher notifications pause`): .some(nil) when not paused.
        var notificationsPause: NotificationPause??
        /// Seconds from the clock of the shard's last successful run to now (change-capture lag).
        var lagSeconds: Double?
        /// The clock of the last successful run of the shard furthest behind, of every layout whose progress still
        /// covers owners (Unix time; `ServiceStatus.stalestShardSince`).
        var stalestShardSince: Double?
        /// Rows set aside as unusable (quarantined) and not yet repaired.
        var quarantinedRows: Int?
        /// Filters with matches waiting for a digest (their notify_every, or the pause).
        var digestsWaiting: Int?
        /// Age in seconds of the oldest match waiting for a digest.
        var oldestDigestWaitingSeconds: Double?
        /// Seconds since the most overdue waiting digest became due (`WaitingDigests.oldestDueSince`); 0 if none.
        var digestOverdueSeconds: Double?
        /// Notifications the push sender has not marked sent (service-wide), and the age of the oldest at the read.
        var unsentNotifications: Int?
        var oldestUnsentSeconds: Double?
        /// filter_matches' primary key and its packed size (a build at fillfactor 90), in bytes (`matcher reindex`).
        var primaryKeyBytes: Int64?
        var primaryKeyPackedBytes: Int64?
        /// Marks of waiting matches since the server's statistics were reset, and those made in place (HOT).
        var marks: Int64?
        var marksInPlace: Int64?
    }

    let path: String
    let kind: RunKind
    let shard: Shard

    /// `exitStatus`: the process's exit status for this outcome (0, 75, 64, 69, 78, 1, 143, 130).
    func write(
        _ result: Result, summary: RunSummary?, gauges: Gauges = Gauges(), exitStatus: Int32? = nil,
        now: Date = Date()
    ) throws {
        let previous = (try? String(contentsOfFile: path, encoding: .utf8)).map(Self.parse) ?? [:]
        let exposition = Exposition(
            base: [("kind", kind.rawValue), ("shard", "\(shard)")],
            labels: "kind=\"\(kind.rawValue)\",shard=\"\(shard)\"", previous: previous,
            succeeded: result == .success && summary != nil)
        try refuseAnotherRunsFile(previous, labels: exposition.labels)
        exposition.recordOutcome(result, exitStatus: exitStatus ?? Self.defaultExitStatus(result), now: now)
        exposition.recordLastSuccess(summary, now: now)
        exposition.record(gauges)
        try replace(with: exposition.registry.emitToString())
    }

    /// One file is one kind and shard's: replacing another's would drop the series its alerts watch, and
    /// carrying its samples over would write their kind and shard twice (a file the collector rejects).
    private func refuseAnotherRunsFile(_ previous: [String: Double], labels: String) throws {
        guard let foreign = previous.keys.sorted().first(where: { !Self.isOwn($0, labels: labels) }) else { return }
        throw MetricsFileError(
            description:
                "\(path) holds another run's metrics (\(foreign)); give each kind and shard its own "
                + "--metrics-file. This run's metrics were not written, and the file was left as it was; if the "
                + "file is this command's own (another kind or shard wrote it by mistake), remove it")
    }

    /// Written to a temporary file in the same folder, made world-readable, flushed to disk and renamed into
    /// place, so the collector never reads half a file, and after a power loss the file is the old one or the
    /// new one, not an empty one (which lost the counters and the last success: the next failure would have
    /// read as "never succeeded"; review of session 33).
    private func replace(with text: String) throws {
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent()
        let temporary = folder.appendingPathComponent(
            ".\(url.lastPathComponent).\(ProcessInfo.processInfo.processIdentifier).tmp")
        try Data(text.utf8).write(to: temporary)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: temporary.path)
        do {
            let handle = try FileHandle(forWritingTo: temporary)
            defer { try? handle.close() }
            try handle.synchronize()
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw MetricsFileError(description: "cannot flush \(temporary.path) to disk: \(error)")
        }
        if rename(temporary.path, url.path) != 0 {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw MetricsFileError(description: "cannot rename \(temporary.path) to \(path): \(reason)")
        }
        // The rename itself, durable: the folder's entry.
        let descriptor = open(folder.path, O_RDONLY)
        if descriptor >= 0 {
            _ = fsync(descriptor)
            close(descriptor)
        }
    }

    static func defaultExitStatus(_ result: Result) -> Int32 {
        switch result {
        case .success: return 0
        case .failure: return ExitStatus.failure
        case .locked: return ExitStatus.locked
        case .stopped: return 143
        }
    }

    /// Whether a sample key `name{kind="run",shard="0/1",...}` is of this file's kind and shard.
    static func isOwn(_ key: String, labels: String) -> Bool {
        guard let open = key.firstIndex(of: "{") else { return false }
        let inner = key[key.index(after: open)...]
        return inner.hasPrefix(labels + ",") || inner.hasPrefix(labels + "}")
    }

    /// The labels of a sample key `name{kind="run",shard="0/1",phase="read"}` after the base ones.
    static func extraLabels(of key: String, after base: String) -> [(String, String)] {
        guard let open = key.firstIndex(of: "{"), key.hasSuffix("}") else { return [] }
        var inner = String(key[key.index(after: open)..<key.index(before: key.endIndex)])
        if inner.hasPrefix(base) { inner.removeFirst(base.count) }
        return inner.matches(of: #/,?([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/#).map {
            (String($0.output.1), String($0.output.2))
        }
    }

    /// `name{labels} value` lines of a previous file.
    static func parse(_ text: String) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]),
                value.isFinite
            else {
                continue  // a NaN or infinite value (a file edited by hand) is not carried over
            }
            values[String(line[..<space])] = value
        }
        return values
    }
}

/// One metrics file's families as swift-prometheus formats them, with what a batch job adds: the last success's
/// figures and the totals carried over from the previous file.
private struct Exposition {
    /// A sample's labels beside the file's own (kind, shard), and its value.
    typealias Sample = (labels: [(String, String)], value: Double)

    enum Kind {
        case counter
        case gauge
    }

    let registry = PrometheusCollectorRegistry()
    /// The file's own labels, first in every sample.
    let base: [(String, String)]
    /// The same as they stand in a sample's key (`kind="run",shard="0/1"`).
    let labels: String
    /// The previous file's samples by key.
    let previous: [String: Double]
    /// Whether this run's last-success figures replace the previous file's.
    let succeeded: Bool

    func record(_ name: String, _ kind: Kind, _ help: String, _ samples: [Sample]) {
        // The whole name as metricName, the unit ("" adds nothing) already part of it.
        let descriptor = MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
        for (extra, value) in samples {
            switch kind {
            case .counter:
                // A counter only goes up from 0: swift-prometheus traps on a negative increment, and a previous
                // file edited by hand may hold anything (review of session 29).
                registry.makeCounter(descriptor: descriptor, labels: base + extra).increment(by: max(0, value))
            case .gauge:
                registry.makeGauge(descriptor: descriptor, labels: base + extra).set(value)
            }
        }
    }

    /// A gauge of the last successful run: this run's samples when it succeeded, otherwise the previous file's.
    func recordLastSuccess(_ name: String, _ help: String, _ samples: @autoclosure () -> [Sample]) {
        let chosen =
            succeeded
            ? samples()
            : previous.filter { $0.key.hasPrefix(name + "{") }.sorted { $0.key < $1.key }
                .map { (MetricsFile.extraLabels(of: $0.key, after: labels), $0.value) }
        record(name, .gauge, help, chosen)
    }

    /// The build, the totals by result, and how the last run ended.
    func recordOutcome(_ result: MetricsFile.Result, exitStatus: Int32, now: Date) {
        record(
            "matcher_build_info", .gauge, "The matcher build: version and git commit (always 1).",
            [([("version", BuildInfo.version), ("commit", BuildInfo.commit)], 1)])
        let totals = MetricsFile.Result.allCases.map { each -> Sample in
            let key = "matcher_runs_total{\(labels),result=\"\(each.rawValue)\"}"
            return ([("result", each.rawValue)], max(0, previous[key] ?? 0) + (each == result ? 1 : 0))
        }
        record(
            "matcher_runs_total", .counter, "Runs finished, by result (locked: another run held the shard's lock).",
            totals)
        record(
            "matcher_last_run_timestamp_seconds", .gauge, "When the last run ended (Unix time).",
            [([], now.timeIntervalSince1970)])
        record(
            "matcher_last_run_success", .gauge,
            "1 if the last run succeeded, else 0 (a run that found the lock held did not succeed).",
            [([], result == .success ? 1 : 0)])
        record(
            "matcher_last_run_exit_status", .gauge,
            "Exit status of the last run: 0 ok, 75 locked, 64 usage, 69 database unreachable, 78 configuration, 1 other, 143/130 stopped.",
            [([], Double(exitStatus))])
    }

    /// The last successful run's time, clock, phases and counters (kept from the previous file when this run
    /// did not succeed).
    func recordLastSuccess(_ summary: RunSummary?, now: Date) {
        recordLastSuccess(
            "matcher_last_success_timestamp_seconds", "When a run last succeeded (Unix time).",
            [([], now.timeIntervalSince1970)])
        recordLastSuccess(
            "matcher_last_success_clock_timestamp_seconds",
            "The clock (--now or the database's) of the last successful run (Unix time).",
            summary.map { [([], Double($0.clock.microsecondsSinceEpoch) / 1_000_000)] } ?? [])
        recordLastSuccess(
            "matcher_run_phase_seconds", "Seconds the last successful run spent per phase.",
            RunPhase.allCases.map { ([("phase", $0.rawValue)], summary?.phaseSeconds[$0] ?? 0) })
        recordLastSuccess(
            "matcher_run_duration_seconds", "Wall-clock seconds of the last successful run.",
            [([], summary?.totalSeconds ?? 0)])
        let c = summary?.counters ?? .zero
        for (name, help, value) in [
            ("matcher_run_candidates", "Profiles considered by the last successful run.", c.candidates),
            ("matcher_run_filters_evaluated", "Filters evaluated by the last successful run.", c.filtersEvaluated),
            ("matcher_run_filters_invalid", "Invalid filters skipped by the last successful run.", c.filtersInvalid),
            (
                "matcher_run_filters_paid_ignored", "Filters whose paid conditions were ignored (owner's plan).",
                c.filtersPaidIgnored
            ),
            ("matcher_run_matches_written", "Matches written by the last successful run.", c.matchesWritten),
            (
                "matcher_run_notifications_written", "Notifications written by the last successful run.",
                c.notificationsWritten
            ),
            (
                "matcher_run_filters_suspended", "Filters suspended (every condition paid, owner without the plan).",
                c.filtersSuspended
            ),
            (
                "matcher_run_digests_held_back", "Digests due but held back: no waiting match qualified any more.",
                c.digestsHeldBack
            ),
            ("matcher_run_matches_mutual", "Mutual matches written by the last successful run.", c.matchesMutual),
            (
                "matcher_run_matches_forgotten",
                "Pairs past retention the last successful run's sweep forgot (not those its units forgot to record them again).",
                c.matchesForgotten
            ),
            (
                "matcher_run_retention_backlog",
                "1 when the last successful run's retention sweep left expired pairs for the next runs, else 0.",
                summary?.retention?.backlog == true ? 1 : 0
            ),
            (
                "matcher_run_retention_stopped_early",
                "1 when that sweep stopped early because a batch kept conflicting with another writer, else 0.",
                summary?.retention?.stoppedByConflict != nil ? 1 : 0
            ),
        ] {
            recordLastSuccess(name, help, [([], Double(value))])
        }
    }

    /// What the run knows beside its summary, each only when known.
    func record(_ gauges: MetricsFile.Gauges) {
        if let pause = gauges.notificationsPause {
            record(
                "matcher_notifications_paused", .gauge,
                "1 while notifications are paused service-wide (matcher notifications pause), else 0.",
                [([], pause == nil ? 0 : 1)])
            if let pause {
                record(
                    "matcher_notifications_paused_since_timestamp_seconds", .gauge,
                    "When the notification pause in force began (Unix time).",
                    [([], Double(pause.pausedAt.microsecondsSinceEpoch) / 1_000_000)])
            }
        }
        let readings: [(name: String, help: String, value: Double?)] = [
            (
                "matcher_lag_seconds",
                "Seconds from the clock of the shard's last successful run to now (changes wait at most this long).",
                gauges.lagSeconds
            ),
            (
                "matcher_stalest_shard_success_clock_timestamp_seconds",
                "The clock of the last successful run of the shard furthest behind (any layout whose progress still "
                    + "covers owners), Unix time.",
                gauges.stalestShardSince
            ),
            (
                "matcher_quarantined_rows", "Rows set aside as unusable and not yet repaired.",
                gauges.quarantinedRows.map(Double.init)
            ),
            (
                "matcher_digests_waiting",
                "Filters with matches waiting for a digest (notify_every not elapsed, or notifications paused).",
                gauges.digestsWaiting.map(Double.init)
            ),
            (
                "matcher_oldest_digest_waiting_seconds", "Age in seconds of the oldest match waiting for a digest.",
                gauges.oldestDigestWaitingSeconds
            ),
            (
                "matcher_digest_overdue_seconds",
                "Seconds since the most overdue waiting digest became due (0: none is due): notify_every after "
                    + "the filter's last digest, less the due rule's tolerance, and not before its oldest waiting match.",
                gauges.digestOverdueSeconds
            ),
            (
                "matcher_notifications_unsent",
                "Notifications the push sender has not marked sent (sent_at NULL), service-wide, when the run ended.",
                gauges.unsentNotifications.map(Double.init)
            ),
            (
                "matcher_notifications_oldest_unsent_seconds",
                "Age in seconds of the oldest notification not marked sent, when the run ended (0: none).",
                gauges.oldestUnsentSeconds
            ),
        ]
        for reading in readings {
            if let value = reading.value { record(reading.name, .gauge, reading.help, [([], value)]) }
        }
        if let bytes = gauges.primaryKeyBytes, let packed = gauges.primaryKeyPackedBytes {
            record(
                "matcher_filter_matches_primary_key_bytes", .gauge,
                "Size of filter_matches' primary key (matcher reindex rebuilds it past twice its packed size).",
                [([], Double(bytes))])
            record(
                "matcher_filter_matches_primary_key_packed_bytes", .gauge,
                "filter_matches' primary key packed: a build of the same entries at fillfactor 90.",
                [([], Double(packed))])
        }
        if let marks = gauges.marks, let inPlace = gauges.marksInPlace {
            record(
                "matcher_filter_matches_marks_total", .counter,
                "Marks of waiting matches (their digest's notification set on the row), since the server's statistics were reset.",
                [([], Double(marks))])
            record(
                "matcher_filter_matches_marks_in_place_total", .counter,
                "Marks of waiting matches made in place (HOT: the new version on the row's page, no new index entry).",
                [([], Double(inPlace))])
        }
    }
}

struct MetricsFileError: Error, CustomStringConvertible {
    let description: String
}
