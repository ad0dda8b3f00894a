import Chronology

extension Report {
    /// The summary of a run or backfill.
    public static func runSummary(_ summary: RunSummary) -> Report {
        let c = summary.counters
        var title = "matcher \(summary.kind.rawValue)"
        if let id = summary.runId { title += " #\(id)" }
        title += summary.dryRun ? " (dry run: nothing written)" : ""
        var run: [(String, ReportValue)] = [
            ("Shard", .text(summary.shard.description)),
            ("Clock", .text(summary.clock.iso8601)),
        ]
        if let resumed = summary.resumedRunId, resumed != summary.runId {
            run.append(("Completed interrupted run", .integer(Int(resumed))))
        } else if let resumed = summary.resumedRunId {
            run.append(("Resumed", .integer(Int(resumed))))
        }
        var counts: [(String, ReportValue)] = [
            ("Candidates", .integer(c.candidates)),
            ("Filters evaluated", .integer(c.filtersEvaluated)),
            ("Filters invalid", .integer(c.filtersInvalid)),
            ("Filters with paid conditions ignored", .integer(c.filtersPaidIgnored)),
            ("Filters suspended", .integer(c.filtersSuspended)),
            ("Profiles quarantined", .integer(c.profilesQuarantined)),
            ("Filters quarantined", .integer(c.filtersQuarantined)),
            ("Rows with odd values", .integer(c.oddValues)),
        ]
        if summary.dryRun {
            counts.append(("Matches found", .integer(summary.matchesFound)))
        } else {
            counts.append(("Matches written", .integer(c.matchesWritten)))
            counts.append(("Mutual matches written", .integer(c.matchesMutual)))
            counts.append(("Notifications written", .integer(c.notificationsWritten)))
            counts.append(("Digests held back", .integer(c.digestsHeldBack)))
            counts.append(("Matches forgotten", .integer(c.matchesForgotten)))
        }
        let phases =
            RunPhase.allCases.map { phase in
                (phase.rawValue.capitalized, ReportValue.seconds(summary.phaseSeconds[phase] ?? 0))
            } + [("Total", ReportValue.seconds(summary.totalSeconds))]
        return Report(
            title: title,
            sections: [
                .fields("Run", run),
                .fields("Counts", counts),
                .fields("Time", phases),
            ])
    }

    /// `matcher explain`: eligibility checks and each condition with the profile's value.
    public static func explanation(_ result: ExplainMatch.Result) -> Report {
        let e = result.explanation
        let verdict = e.matches ? "MATCH" : "NO MATCH"
        let title = "matcher explain: filter \(result.filter.id) x profile \(result.profileId): \(verdict)"
        let context: [(String, ReportValue)] = [
            ("Filter", .text("\(result.filter.id) \(result.filter.name.map { "\"\($0)\"" } ?? "")")),
            ("Owner", .integer(Int(result.filter.ownerId))),
            ("Profile", .integer(Int(result.profileId))),
            ("Clock", .text(result.clock.now.iso8601)),
            ("Run date", .text("\(result.clock.runDate) (\(result.clock.timeZone.identifier))")),
            ("Already recorded", result.recorded.map { .text("matched at \($0.matchedAt.iso8601)") } ?? .text("no")),
            ("Mutual", .text(result.mutualVia.map { "yes, via filter \($0)" } ?? "no")),
        ]
        let checks = e.eligibility.map { check -> [ReportValue] in
            [.text(check.name), .text(check.passed ? "pass" : "FAIL"), .text(check.detail)]
        }
        let conditions = e.conditions.map { line -> [ReportValue] in
            let outcome: String
            switch line.outcome {
            case .pass: outcome = "pass"
            case .fail: outcome = "FAIL"
            case .ignoredNotOnPlan: outcome = "ignored (owner's plan)"
            }
            return [.text(line.itemKey), .text(line.profileValue), .text(line.condition), .text(outcome)]
        }
        return Report(
            title: title,
            sections: [
                .fields("Context", context),
                .table("Eligibility", columns: ["check", "result", "detail"], rows: checks),
                .table("Conditions", columns: ["item", "profile value", "condition", "result"], rows: conditions),
            ])
    }
}
