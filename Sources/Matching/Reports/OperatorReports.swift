import Chronology
import Foundation

extension Report {
    /// What `matcher runs abandon` did.
    public static func abandoned(_ outcome: AbandonRun.Outcome?, target: AbandonRun.Target) -> Report {
        guard let outcome else {
            let what: String
            switch target {
            case .shard(let shard): what = "shard \(shard) has no interrupted run"
            case .run(let id): what = "run #\(id) is not interrupted"
            }
            return Report(title: "matcher runs abandon: \(what); nothing to abandon", sections: [])
        }
        let run = outcome.run
        let c = run.counters
        let title =
            outcome.alreadyAbandoned
            ? "matcher runs abandon: run #\(run.id) was abandoned already; nothing changed"
            : "matcher runs abandon: run #\(run.id) abandoned: it will never be resumed; what it committed stays; "
                + "the next run of shard \(run.shard) starts from the shard's last successful progress"
        return Report(
            title: title,
            sections: [
                .fields(
                    "run", "Run",
                    [
                        ReportField("run", "Run", .integer(Int(run.id))),
                        ReportField("kind", "Kind", .text(run.kind.rawValue)),
                        ReportField("shard", "Shard", .text(run.shard.description)),
                        ReportField("clock", "Clock", .text(run.clock.iso8601)),
                        ReportField("status_before", "Status before", .text(run.status.rawValue)),
                        ReportField(
                            "resume_after_filter", "Resume after filter",
                            run.resumeAfterFilter.map { .integer(Int($0)) } ?? .none),
                        ReportField("matches_committed", "Matches committed", .integer(c.matchesWritten)),
                        ReportField(
                            "notifications_committed", "Notifications committed", .integer(c.notificationsWritten)),
                    ])
            ])
    }

    /// What `matcher progress reset` did: the coverage before and after.
    public static func progressReset(_ outcome: ResetProgress.Outcome) -> Report {
        func rows(_ coverage: Coverage) -> [[ReportValue]] {
            coverage.entries.map { entry in
                let mark: String
                switch ChangeMark.Form(entry.mark) {
                case .snapshot(let text): mark = "snapshot \(text.count > 40 ? String(text.prefix(39)) + "…" : text)"
                case .time(let time): mark = "reset to \(time.iso8601)"
                }
                return [.text(entry.shard.description), .text(mark), .text(entry.takenAt.iso8601)]
            }
        }
        let columns = [
            ReportColumn("shard", "shard"), ReportColumn("mark", "mark"), ReportColumn("taken_at", "taken at"),
        ]
        var run: [ReportField] = [
            ReportField("shard", "Shard", .text(outcome.shard.description)),
            ReportField("changes_new_from", "Changes new from", .text(outcome.time.iso8601)),
        ]
        if let id = outcome.abandonedRunId {
            run.append(ReportField("interrupted_run_abandoned", "Interrupted run abandoned", .integer(Int(id))))
        }
        if outcome.changesSettled > 0 {
            run.append(
                ReportField(
                    "changes_from_another_server_settled", "Changes from another server's transactions settled",
                    .integer(outcome.changesSettled)))
        }
        return Report(
            title:
                "matcher progress reset: shard \(outcome.shard) reset to \(outcome.time.iso8601); its next run takes "
                + "profile changes recorded at or after that time as new",
            sections: [
                .fields("reset", "Reset", run),
                .table("progress_before", "Progress before", columns: columns, rows: rows(outcome.before)),
                .table("progress_after", "Progress after", columns: columns, rows: rows(outcome.after)),
            ])
    }

    /// What `matcher reindex` did.
    public static func primaryKeyRebuild(_ outcome: PrimaryKeyRebuild) -> Report {
        func bytes(_ count: Int64) -> ReportValue { .integer(Int(count)) }
        func ratio(_ size: PrimaryKeySize) -> ReportValue { .ratio(size.ratio) }
        let before = outcome.before
        let title =
            outcome.after == nil
            ? String(
                format: "matcher reindex: %@ is %.2fx its packed size, below --min-ratio %.2f; left as it is",
                outcome.index, before.ratio, outcome.minimumRatio)
            : String(
                format: "matcher reindex: %@ rebuilt, %.1f -> %.1f MiB", outcome.index,
                Double(before.bytes) / 1_048_576, Double(outcome.after?.bytes ?? 0) / 1_048_576)
        var fields = [
            ReportField("index", "Index", .text(outcome.index)),
            ReportField("entries", "Entries (last VACUUM or ANALYZE)", .integer(Int(before.entries))),
            ReportField("packed_bytes", "Packed size, bytes", bytes(before.packedBytes)),
            ReportField("before_bytes", "Before, bytes", bytes(before.bytes)),
            ReportField("ratio_before", "Before / packed", ratio(before)),
        ]
        // Null when nothing was rebuilt: the same keys either way (review of session 37).
        fields += [
            .ifAny("after_bytes", "After, bytes", outcome.after.map { bytes($0.bytes) } ?? .none),
            .ifAny("ratio_after", "After / packed", outcome.after.map(ratio) ?? .none),
        ]
        fields += [
            ReportField("rebuilt", "Rebuilt", .flag(outcome.after != nil)),
            ReportField("min_ratio", "Rebuilds from", .ratio(outcome.minimumRatio)),
            ReportField(
                "leftovers_dropped", "Dropped (left by an interrupted rebuild)", .names(outcome.droppedLeftovers)),
            ReportField("seconds", "Took", .seconds(outcome.seconds)),
        ]
        return Report(title: title, sections: [.fields("primary_key", "Primary key of filter_matches", fields)])
    }
}
