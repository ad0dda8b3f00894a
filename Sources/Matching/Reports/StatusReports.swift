import Chronology

extension Report {
    /// `matcher status` for people: one table of shards, the runs that went wrong since each shard's last
    /// success, then the service-wide figures.
    public static func serviceStatus(_ status: ServiceStatus) -> Report {
        let shards = status.shards.map { shard -> [ReportValue] in
            let success = shard.lastSuccess
            let progress: ReportValue
            switch shard.progress.map({ ChangeMark.Form($0.mark) }) {
            case nil: progress = .none
            case .snapshot?:
                progress = .text(
                    shard.progressAhead ? "snapshot ahead of the database: matcher progress reset" : "snapshot")
            case .time(let time)?: progress = .text("reset to \(time.iso8601)")
            }
            return [
                .text(shard.shard.description), .text(status.state(of: shard).rawValue),
                success.map { .text("#\($0.id)") } ?? .none, success.map { .text($0.clock.iso8601) } ?? .none,
                status.lagSeconds(of: shard).map { .text(Self.duration($0)) } ?? .none, progress,
                status.progressAgeSeconds(of: shard).map { .text(Self.duration($0)) } ?? .none,
            ]
        }
        let since = status.shards.flatMap { shard in
            shard.runsSince.map { run -> [ReportValue] in
                // A run stopped on request is stored as failed (with the stop as its error): shown as stopped, as
                // its shard is (review of session 37).
                var state = run.isStopped ? "stopped" : run.status.rawValue
                if run.status == .running {
                    state += run.lockHeld == true ? " (lock held)" : " (no process: interrupted)"
                }
                return [
                    .text(shard.shard.description), .text("#\(run.id)"), .text(state), .text(run.clock.iso8601),
                    run.startedAt.map { .text($0.iso8601) } ?? .none,
                    // An abandoned run's error said it "is resumed by the next run": no longer so (review of
                    // session 36). The JSON keeps the error as recorded beside the status.
                    run.error.map {
                        .text(
                            Self.oneLine(run.status == .abandoned ? "before it was abandoned: " + $0 : $0, limit: 100))
                    } ?? .none,
                ]
            }
        }
        let digests = status.digests
        let retention = status.retention
        var notifications: [ReportField] = [ReportField("paused", "Paused", .flag(status.notificationPause != nil))]
        if let pause = status.notificationPause {
            notifications += [
                ReportField(
                    "since", "Since",
                    .text("\(pause.pausedAt.iso8601) (\(Self.duration(status.seconds(since: pause.pausedAt))) ago)")
                ),
                ReportField("by", "By", .text(pause.pausedBy)), ReportField("reason", "Reason", .text(pause.reason)),
            ]
        }
        // Service-wide (every shard's): only sent ones are forgotten, so a push sender that stops shows here.
        notifications.append(
            ReportField(
                "unsent", "Unsent (push sender)",
                .text(
                    String(status.unsent.count)
                        + (status.unsent.oldestCreatedAt.map {
                            ", oldest \($0.iso8601) (\(Self.duration(status.seconds(since: $0))) ago)"
                        } ?? ""))))
        return Report(
            title: "matcher status at \(status.now.iso8601)",
            sections: [
                .table(
                    "shards", "Shards",
                    columns: [
                        ReportColumn("shard", "shard"), ReportColumn("state", "state"),
                        ReportColumn("last_success", "last success"), ReportColumn("clock", "clock"),
                        ReportColumn("lag", "lag"), ReportColumn("progress", "progress"),
                        ReportColumn("progress_age", "progress age"),
                    ],
                    rows: shards),
                .table(
                    "runs_since_the_last_success", "Runs since the last success",
                    columns: [
                        ReportColumn("shard", "shard"), ReportColumn("run", "run"), ReportColumn("status", "status"),
                        ReportColumn("clock", "clock"), ReportColumn("started", "started"),
                        ReportColumn("error", "error"),
                    ],
                    rows: since),
                .fields(
                    "digests_waiting", "Digests waiting",
                    [
                        ReportField("matches_waiting", "Matches waiting", .integer(digests.matches)),
                        ReportField(
                            "filters_with_waiting_matches", "Filters with waiting matches", .integer(digests.filters)),
                        ReportField(
                            "oldest_waiting", "Oldest waiting",
                            digests.oldestMatchedAt.map {
                                .text("\($0.iso8601) (\(Self.duration(status.seconds(since: $0))) ago)")
                            } ?? .none
                        ),
                        ReportField(
                            "earliest_due", "Earliest due",
                            digests.oldestDueSince.map { due in
                                let seconds = status.seconds(since: due)
                                return .text(
                                    seconds >= 0
                                        ? "\(due.iso8601) (overdue \(Self.duration(seconds)))"
                                        : "\(due.iso8601) (in \(Self.duration(-seconds)))")
                            } ?? .none),
                        ReportField(
                            "listed_not_waiting", "Listed, not waiting now",
                            .integer(digests.notNotifiable)),
                    ]),
                .fields(
                    "rows_set_aside", "Rows set aside",
                    [
                        ReportField("invalid_filters", "Invalid filters", .integer(status.invalidFilters)),
                        ReportField(
                            "quarantined_profiles", "Quarantined profiles", .integer(status.quarantinedProfiles)),
                        ReportField("quarantined_filters", "Quarantined filters", .integer(status.quarantinedFilters)),
                    ]),
                .fields(
                    "retention", "Retention",
                    [
                        ReportField(
                            "filter_matches_rows", "filter_matches rows",
                            .text((retention.rowsEstimated ? "about " : "") + String(retention.rows))
                        ),
                        ReportField(
                            "oldest_row", "Oldest row", retention.oldestMatchedAt.map { .text($0.iso8601) } ?? .none),
                        // Against --retention-days: the row above may be older by design (kept for a digest).
                        ReportField(
                            "oldest_to_forget", "Oldest the sweep may forget",
                            retention.oldestForgettableAt.map {
                                .text("\($0.iso8601) (\(Self.duration(status.seconds(since: $0))) ago)")
                            } ?? .none),
                        ReportField(
                            "retention_days_last_run", "Retention days (last run)",
                            retention.retentionDays.map { .integer($0) } ?? .none),
                        ReportField(
                            "primary_key", "Primary key",
                            retention.primaryKeyBytes.map { bytes in
                                .text(
                                    String(
                                        format: "%.1f MiB, %.2fx packed%@", Double(bytes) / 1_048_576,
                                        retention.primaryKeyRatio ?? 1,
                                        (retention.primaryKeyRatio ?? 1) >= RetentionState.rebuildRatio
                                            ? " (matcher reindex rebuilds it)" : ""))
                            } ?? .none),
                        ReportField(
                            "marks", "Marks of waiting matches", retention.marks.map { .text(Self.marks($0)) } ?? .none),
                    ]
                        + (retention.abandonedRebuilds.isEmpty
                            ? []
                            : [
                                ReportField(
                                    "abandoned_rebuilds", "Left by a stopped rebuild",
                                    .text(
                                        retention.abandonedRebuilds.joined(separator: ", ")
                                            + " (invalid; the next matcher reindex drops it)"))
                            ])),
                .fields("notifications", "Notifications", notifications),
            ])
    }

    /// `1234567 since statistics reset, 99.3 % in place (HOT), fillfactor 90`, and what to do when most move.
    static func marks(_ marks: MarkPlacement) -> String {
        guard let share = marks.inPlaceShare else {
            return "none since statistics reset, fillfactor \(marks.fillfactor)"
        }
        let counts = String(
            format: "%lld since statistics reset, %.1f %% in place (HOT), fillfactor %d", marks.marks, share * 100,
            marks.fillfactor)
        guard marks.mostMove else { return counts }
        guard marks.fillfactor <= 50 else {
            return counts
                + "; most move their row: with runs more often than the digests, set fillfactor 50 (deploy/README.md)"
        }
        // Already lowered: the counts since the reset still hold the marks made before.
        return counts
            + "; most moved their row, counted since statistics reset (marks before the fillfactor change included: "
            + "pg_stat_reset_single_table_counters('filter_matches'::regclass) starts afresh)"
    }

    /// `12s`, `5m 3s`, `26h 5m`, `3d 2h`; a negative span (a clock ahead of the store's) keeps its sign.
    static func duration(_ seconds: Int64) -> String {
        if seconds < 0 { return "-" + duration(seconds == .min ? .max : -seconds) }
        switch seconds {
        case ..<60: return "\(seconds)s"
        case ..<3_600: return "\(seconds / 60)m \(seconds % 60)s"
        case ..<(72 * 3_600): return "\(seconds / 3_600)h \(seconds % 3_600 / 60)m"
        default: return "\(seconds / 86_400)d \(seconds % 86_400 / 3_600)h"
        }
    }

    static func oneLine(_ text: String, limit: Int) -> String {
        let flat = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        return flat.count > limit ? String(flat.prefix(limit - 1)) + "…" : flat
    }
}

extension ServiceStatus {
    /// `matcher status --format json`: stable snake_case keys (never display labels), times in ISO 8601 UTC,
    /// ages in whole seconds, null where a fact is unknown. Keys are only ever added.
    public var json: String {
        func time(_ t: Timestamp?) -> JSONOutput { t.map { .string($0.iso8601) } ?? .null }
        func int(_ n: Int64?) -> JSONOutput { n.map { .integer($0) } ?? .null }
        func run(_ r: RunBrief) -> JSONOutput {
            .object([
                ("run_id", .integer(r.id)), ("status", .string(r.status.rawValue)), ("clock", time(r.clock)),
                ("started_at", time(r.startedAt)), ("finished_at", time(r.finishedAt)),
                ("error", r.error.map { .string($0) } ?? .null), ("lock_held", r.lockHeld.map { .bool($0) } ?? .null),
                // `status` as stored (a stop is stored as failed); `stopped`: it was stopped on request (SIGTERM,
                // SIGINT), not a failure (review of session 37: a script counting failures counted shutdowns).
                ("stopped", .bool(r.isStopped)),
            ])
        }
        let shards = shards.map { shard -> JSONOutput in
            let progress: JSONOutput =
                shard.progress.map { entry in
                    let resetTo: Timestamp?
                    if case .time(let t) = ChangeMark.Form(entry.mark) { resetTo = t } else { resetTo = nil }
                    return .object([
                        ("mark", .string(resetTo == nil ? "snapshot" : "reset")), ("reset_to", time(resetTo)),
                        ("taken_at", time(entry.takenAt)), ("age_seconds", int(seconds(since: entry.takenAt))),
                        ("time_zone", entry.timeZone.map { .string($0) } ?? .null),
                    ])
                } ?? .null
            return .object([
                ("shard", .string(shard.shard.description)), ("shard_index", .integer(Int64(shard.shard.index))),
                ("shard_count", .integer(Int64(shard.shard.count))), ("state", .string(state(of: shard).rawValue)),
                ("last_success", shard.lastSuccess.map(run) ?? .null), ("lag_seconds", int(lagSeconds(of: shard))),
                ("progress", progress), ("runs_since", .array(shard.runsSince.map(run))),
            ])
        }
        let pause = notificationPause
        let document = JSONOutput.object([
            ("now", time(now)),
            ("shards", .array(shards)),
            (
                "digests_waiting",
                .object([
                    ("matches", .integer(Int64(digests.matches))), ("filters", .integer(Int64(digests.filters))),
                    ("oldest_matched_at", time(digests.oldestMatchedAt)),
                    ("oldest_age_seconds", int(digests.oldestMatchedAt.map { seconds(since: $0) })),
                    ("earliest_due", time(digests.oldestDueSince)),
                    ("overdue_seconds", .integer(digests.oldestDueSince.map { max(0, seconds(since: $0)) } ?? 0)),
                    ("not_notifiable", .integer(Int64(digests.notNotifiable))),
                ])
            ),
            ("invalid_filters", .integer(Int64(invalidFilters))),
            (
                "quarantined",
                .object([
                    ("profiles", .integer(Int64(quarantinedProfiles))),
                    ("filters", .integer(Int64(quarantinedFilters))),
                ])
            ),
            (
                "retention",
                .object([
                    ("filter_matches_rows", .integer(Int64(retention.rows))),
                    ("rows_estimated", .bool(retention.rowsEstimated)),
                    ("oldest_matched_at", time(retention.oldestMatchedAt)),
                    ("oldest_forgettable_matched_at", time(retention.oldestForgettableAt)),
                    ("retention_days", int(retention.retentionDays.map(Int64.init))),
                    ("primary_key_bytes", int(retention.primaryKeyBytes)),
                    ("primary_key_packed_bytes", int(retention.primaryKeyPackedBytes)),
                    ("abandoned_rebuilds", .array(retention.abandonedRebuilds.map { .string($0) })),
                    ("marks", int(retention.marks?.marks)),
                    ("marks_in_place", int(retention.marks?.inPlace)),
                    ("fillfactor", int(retention.marks.map { Int64($0.fillfactor) })),
                ])
            ),
            (
                "notifications",
                .object([
                    ("paused", .bool(pause != nil)), ("paused_at", time(pause?.pausedAt)),
                    ("paused_by", pause.map { .string($0.pausedBy) } ?? .null),
                    ("reason", pause.map { .string($0.reason) } ?? .null),
                    ("unsent", .integer(Int64(unsent.count))),
                    ("oldest_unsent_created_at", time(unsent.oldestCreatedAt)),
                    ("oldest_unsent_age_seconds", int(unsent.oldestCreatedAt.map { seconds(since: $0) })),
                ])
            ),
        ])
        return document.rendered(indent: 0)
    }
}

/// An ordered JSON document (keys in the order given), pretty-printed two spaces an indent. `matcher status
/// --format json` keeps this fixed order and layout (the goldens, the operator tests and scripts/fault-scenarios
/// read it); every string in it is written by `JSONText`, the one JSON encoder.
enum JSONOutput {
    case object([(String, JSONOutput)])
    case array([JSONOutput])
    case string(String)
    case integer(Int64)
    case bool(Bool)
    case null

    func rendered(indent: Int) -> String {
        let pad = String(repeating: "  ", count: indent + 1)
        let close = String(repeating: "  ", count: indent)
        switch self {
        case .object(let members):
            guard !members.isEmpty else { return "{}" }
            return "{\n"
                + members.map { pad + JSONText.string($0.0) + ": " + $0.1.rendered(indent: indent + 1) }
                .joined(separator: ",\n") + "\n" + close + "}"
        case .array(let elements):
            guard !elements.isEmpty else { return "[]" }
            return "[\n" + elements.map { pad + $0.rendered(indent: indent + 1) }.joined(separator: ",\n") + "\n"
                + close + "]"
        case .string(let s): return JSONText.string(s)
        case .integer(let n): return String(n)
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        }
    }
}
