import Chronology

extension Report {
    /// The summary of a run or backfill.
    public static func runSummary(_ summary: RunSummary) -> Report {
        let c = summary.counters
        var title = "matcher \(summary.kind.rawValue)"
        if let id = summary.runId { title += " #\(id)" }
        title += summary.dryRun ? " (dry run: nothing written)" : ""
        // Typed for scripts (review of the run summary: the id, the kind and whether it was a dry run were only in
        // the title's words, and the counts' keys differ with --dry-run).
        var run: [ReportField] = [
            ReportField("run_id", "Run id", summary.runId.map { .integer(Int($0)) } ?? .none),
            ReportField("kind", "Kind", .text(summary.kind.rawValue)),
            ReportField("dry_run", "Dry run", .flag(summary.dryRun)),
            ReportField("shard", "Shard", .text(summary.shard.description)),
            ReportField("clock", "Clock", .text(summary.clock.iso8601)),
        ]
        // Every key in every state, null where it does not apply (review of session 37: a script met keys that came
        // and went with the run's state); the text shows only those with a value.
        let completed = summary.resumedRunId.flatMap { $0 != summary.runId ? $0 : nil }
        let resumed = summary.resumedRunId.flatMap { $0 == summary.runId ? $0 : nil }
        run += [
            .ifAny(
                "completed_interrupted_run", "Completed interrupted run", completed.map { .integer(Int($0)) } ?? .none),
            .ifAny("resumed", "Resumed", resumed.map { .integer(Int($0)) } ?? .none),
        ]
        var counts: [ReportField] = [
            ReportField("candidates", "Candidates", .integer(c.candidates)),
            ReportField("filters_evaluated", "Filters evaluated", .integer(c.filtersEvaluated)),
            ReportField("filters_invalid", "Filters invalid", .integer(c.filtersInvalid)),
            ReportField(
                "filters_with_paid_conditions_ignored", "Filters with paid conditions ignored",
                .integer(c.filtersPaidIgnored)),
            ReportField("filters_suspended", "Filters suspended", .integer(c.filtersSuspended)),
            ReportField("profiles_quarantined", "Profiles quarantined", .integer(c.profilesQuarantined)),
            ReportField("filters_quarantined", "Filters quarantined", .integer(c.filtersQuarantined)),
            ReportField("rows_with_odd_values", "Rows with odd values", .integer(c.oddValues)),
        ]
        // A dry run writes nothing: in it, what a run writes is null; in a run, what a dry run finds is null.
        func written(_ count: Int) -> ReportValue { summary.dryRun ? .none : .integer(count) }
        counts += [
            summary.dryRun
                ? ReportField("matches_found", "Matches found", .integer(summary.matchesFound))
                : .ifAny("matches_found", "Matches found", .none),
            .ifAny("matches_written", "Matches written", written(c.matchesWritten)),
            .ifAny("mutual_matches_written", "Mutual matches written", written(c.matchesMutual)),
            .ifAny("notifications_written", "Notifications written", written(c.notificationsWritten)),
            .ifAny("digests_held_back", "Digests held back", written(c.digestsHeldBack)),
            .ifAny("matches_forgotten", "Matches forgotten", written(c.matchesForgotten)),
        ]
        // The run's retention sweep, when one ran: whether forgetting is behind (the metrics' backlog gauge), and
        // why it ended early or did not start.
        let sweep = summary.retention
        counts += [
            .ifAny("retention_backlog", "Retention backlog", sweep.map { .flag($0.backlog) } ?? .none),
            .ifAny(
                "retention_stopped", "Retention sweep stopped",
                (sweep?.notStartedBecause ?? sweep?.stoppedByRequest ?? sweep?.stoppedByConflict).map { .text($0) }
                    ?? .none),
        ]
        let phases =
            RunPhase.allCases.map { phase in
                ReportField(phase.rawValue, phase.rawValue.capitalized, .seconds(summary.phaseSeconds[phase] ?? 0))
            } + [ReportField("total", "Total", .seconds(summary.totalSeconds))]
        var sections: [ReportSection] = [
            .fields("run", "Run", run),
            .fields("counts", "Counts", counts),
            .fields("time", "Time", phases),
        ]
        // Completing the interrupted run came first, in the same process; the counts above are this run's. Null
        // fields, and no text, when there was none.
        let done = summary.completedRun
        sections.append(
            .fields(
                "completed_run",
                "Completed interrupted run #\(done.map { "\($0.runId)" } ?? "-") (its counts over all its attempts; not in "
                    + "the counts above)",
                [
                    .ifAny("run_id", "Run", done.map { .integer(Int($0.runId)) } ?? .none),
                    .ifAny(
                        "matches_written", "Matches written", done.map { .integer($0.counters.matchesWritten) } ?? .none
                    ),
                    .ifAny(
                        "notifications_written", "Notifications written",
                        done.map { .integer($0.counters.notificationsWritten) } ?? .none),
                    .ifAny(
                        "matches_forgotten", "Matches forgotten",
                        done.map { .integer($0.counters.matchesForgotten) } ?? .none),
                    // This process's time completing it, not its earlier attempts' (review of session 29).
                    .ifAny("total", "Completing it took", done.map { .seconds($0.totalSeconds) } ?? .none),
                ]))
        return Report(title: title, sections: sections)
    }

    /// `matcher explain`: eligibility checks and each condition with the profile's value.
    public static func explanation(_ result: ExplainMatch.Result) -> Report {
        let e = result.explanation
        let verdict = e.matches ? "MATCH" : "NO MATCH"
        let title = "matcher explain: filter \(result.filter.id) x profile \(result.profileId): \(verdict)"
        // The verdict and the ids as typed values too (review of session 32: a script had only the title's words).
        var context: [ReportField] = [
            ReportField("match", "Match", .flag(e.matches)),
            ReportField(
                "filter", "Filter", .text("\(result.filter.id)\(result.filter.name.map { " \"\($0)\"" } ?? "")")),
            ReportField("filter_id", "Filter id", .integer(Int(result.filter.id))),
            ReportField("recorded", "Recorded", .flag(result.recorded != nil && !result.recordedForgotten)),
            ReportField("mutual_via", "Mutual via filter", result.mutualVia.map { .integer(Int($0)) } ?? .none),
            // An invalid or quarantined filter's conditions are not evaluated: its empty table would otherwise read
            // as a `{}` filter's, which matches everyone (review of session 32).
            ReportField("conditions_evaluated", "Conditions evaluated", .flag(e.conditionsEvaluated)),
            ReportField("owner", "Owner", .integer(Int(result.filter.ownerId))),
            ReportField("profile", "Profile", .integer(Int(result.profileId))),
            ReportField("clock", "Clock", .text(result.clock.now.iso8601)),
            ReportField("run_date", "Run date", .text("\(result.clock.runDate) (\(result.clock.timeZone.identifier))")),
            ReportField(
                "already_recorded", "Already recorded",
                result.recorded.map { match in
                    .text(
                        "matched at \(match.matchedAt.iso8601)"
                            + (match.runId.map { " by run \($0)" } ?? "")
                            + (match.silent
                                ? ", silent (a backfill's without --notify: never in a digest)"
                                : match.notificationId.map { ", notified by notification \($0)" }
                                    ?? (result.filter.notify
                                        ? ", not notified (waiting for its filter's digest, or passed over by one)"
                                        : ", not notified (the filter's notify is off now: once it is on, a digest may count it, if it"
                                            + " is still a candidate then and within the retention)"))
                            + (result.recordedForgotten
                                ? "; forgotten at this clock (past the \(result.retentionDays)-day retention, not "
                                    + "waiting for a digest): it may be recorded again"
                                    + (result.explanation.matches ? " (see below)" : "") : ""))
                } ?? .text("no")),
            // runs.md defines mutual for a matching pair only (review of the explain output: "yes, via filter 200"
            // was shown for pairs that do not match).
            ReportField(
                "mutual", "Mutual",
                .text(
                    e.matches
                        ? result.mutualVia.map { "yes, via filter \($0)" } ?? "no"
                        : "not applicable (only a matching pair can be mutual)")),
        ]
        if e.matches && (result.recorded == nil || result.recordedForgotten) {
            // A match with no pair recorded (review of the explain output: "MATCH, Recorded no" said nothing of why).
            // runs.md "Incremental run" and "Backfill": what a run evaluates and records, and what records more.
            context.append(
                ReportField(
                    "not_recorded_because", "Not recorded because",
                    .text(
                        "a run records a match only among the profiles it evaluates: those new or changed (a "
                            + "column a non-recency item reads, or status) since the last run that covered the filter. A filter "
                            + "created or edited after the profile last changed is not evaluated against it by a run; "
                            + "and a run records at most --max-per-filter new pairs a filter (the latest logins "
                            + "first), the others not at all. A dry run records nothing. "
                            + "`matcher backfill --filter \(result.filter.id)` evaluates the filter against every "
                            + "profile at its clock and records this pair if it matches then and is within the "
                            + "backfill's --max-per-filter; without --notify it is recorded silent (never in a "
                            + "digest)")))
        }
        let checks = e.eligibility.map { check -> [ReportValue] in
            [
                .text(check.name), .text(!check.checked ? "not checked" : check.passed ? "pass" : "FAIL"),
                .text(check.detail),
            ]
        }
        let conditions = e.conditions.map { line -> [ReportValue] in
            let outcome: String
            switch line.outcome {
            case .pass: outcome = "pass"
            case .fail: outcome = "FAIL"
            // filter-language.md: a paid condition counts only while the owner has the plan (review of the explain
            // output: "ignored (owner's plan)" did not say that the owner lacks it).
            case .ignoredNotOnPlan:
                outcome =
                    result.owner?.id == result.filter.ownerId
                    ? "ignored: the owner lacks the plan it needs" : "ignored: no owner, so no plan"
            }
            return [.text(line.itemKey), .text(line.profileValue), .text(line.condition), .text(outcome)]
        }
        return Report(
            title: title,
            sections: [
                .fields("context", "Context", context),
                .table(
                    "eligibility", "Eligibility",
                    columns: [
                        ReportColumn("check", "check"), ReportColumn("result", "result"),
                        ReportColumn("detail", "detail"),
                    ],
                    rows: checks),
                .table(
                    "conditions", "Conditions",
                    columns: [
                        ReportColumn("item", "item"), ReportColumn("profile_value", "profile value"),
                        ReportColumn("condition", "condition"), ReportColumn("result", "result"),
                    ],
                    rows: conditions),
            ])
    }
}
