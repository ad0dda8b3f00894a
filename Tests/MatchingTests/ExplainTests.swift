import Chronology
import Foundation
import MatchingTestSupport
import Testing

@testable import Matching

@Suite struct ExplainTests {
    typealias F = EvaluatorFixture

    private let owner = FilterOwner(id: 99, status: 1, plan: 0)

    @Test func listsEveryCheckAndConditionForAMatch() throws {
        let clock = try F.clock("2026-03-01T03:00:00Z")
        let filter = F.filter(
            #"""
            {"last_login": {"withinDays": 7}, "gender": {"anyOf": [2]}, "age": {"min": 25, "max": 32},
             "residence": {"anyOf": [0, 13, 14]}, "personality": {"anyOf": [9, 2]}, "has_photo": true,
             "income": {"min": 5}, "height": {"max": 170}}
            """#, id: 5, ownerId: 99)
        let profile = F.profile(
            id: 10, lastLoginAt: try F.at("2026-02-28T00:00:00Z"),
            [
                "gender": .code(2), "age": .date(try F.date("1996-05-02")), "residence": .code(13),
                "personality": .codes([2, 4]), "has_photo": .flag(true), "income": .integer(5), "height": .integer(160),
            ])
        let explanation = ReferenceEvaluator.explain(profile, filter, owner: owner, blocks: BlockSet.none, clock: clock)
        #expect(explanation.matches)
        #expect(
            explanation.eligibility == [
                .init(name: "profile active", passed: true, detail: "profile 10 status 1 (active)"),
                .init(name: "owner active", passed: true, detail: "owner 99 status 1 (active), plan 0 (free)"),
                .init(name: "filter not deleted", passed: true, detail: "filter 5 not deleted"),
                .init(name: "filter readable", passed: true, detail: "readable"),
                .init(name: "filter valid", passed: true, detail: "valid"),
                .init(name: "filter not suspended", passed: true, detail: "not suspended"),
                .init(name: "not the owner", passed: true, detail: "profile 10, owner 99"),
                .init(name: "no block either way", passed: true, detail: "no block between profile 10 and owner 99"),
            ])
        #expect(
            explanation.conditions == [
                .init(itemKey: "gender", profileValue: "2 (女性)", condition: "any of 2 (女性)", outcome: .pass),
                .init(
                    itemKey: "age", profileValue: "29 years (born 1996-05-02)", condition: "between 25 and 32 years",
                    outcome: .pass
                ),
                .init(itemKey: "height", profileValue: "160 cm", condition: "at most 170 cm", outcome: .pass),
                .init(
                    itemKey: "income", profileValue: "5 (800-1000万)", condition: "at least 5 (800-1000万)",
                    outcome: .pass),
                .init(
                    itemKey: "residence", profileValue: "13 (東京都)",
                    condition: "any of 0 (unanswered), 13 (東京都), 14 (神奈川県)", outcome: .pass),
                .init(itemKey: "personality", profileValue: "2, 4", condition: "any of 2, 9", outcome: .pass),
                .init(itemKey: "has_photo", profileValue: "true", condition: "true", outcome: .pass),
                .init(
                    itemKey: "last_login", profileValue: "2026-02-28T00:00:00Z",
                    condition: "within 7 days (at or after 2026-02-22T03:00:00Z)", outcome: .pass),
            ])
    }

    @Test func showsUnansweredValuesAndFailures() throws {
        let clock = try F.clock("2026-03-01T03:00:00Z")
        let filter = F.filter(
            #"""
            {"age": {"min": 25}, "height": {"min": 150}, "smoking": {"anyOf": [1]}, "languages": {"allOf": [1, 2]},
             "verified": true, "registered": {"withinDays": 1}}
            """#)
        let profile = F.profile(createdAt: try F.at("2026-01-01T00:00:00Z"))
        let explanation = ReferenceEvaluator.explain(profile, filter, owner: owner, blocks: BlockSet.none, clock: clock)
        #expect(!explanation.matches)
        #expect(explanation.eligibility.allSatisfy { $0.passed })
        #expect(
            explanation.conditions == [
                .init(
                    itemKey: "age", profileValue: "unanswered (birth_date NULL, or ±infinity, which counts as NULL)",
                    condition: "at least 25 years", outcome: .fail),
                .init(itemKey: "height", profileValue: "unanswered", condition: "at least 150 cm", outcome: .fail),
                .init(itemKey: "smoking", profileValue: "0 (unanswered)", condition: "any of 1 (吸わない)", outcome: .fail),
                .init(
                    itemKey: "languages", profileValue: "none (unanswered)", condition: "all of 1, 2", outcome: .fail),
                .init(itemKey: "verified", profileValue: "false", condition: "true", outcome: .fail),
                .init(
                    itemKey: "registered", profileValue: "2026-01-01T00:00:00Z",
                    condition: "within 1 day (at or after 2026-02-28T03:00:00Z)", outcome: .fail),
            ])
    }

    @Test func paidConditionIsShownIgnoredForAFreeOwner() throws {
        let clock = try F.clock("2026-03-01T03:00:00Z")
        let filter = F.filter(#"{"communities": {"anyOf": [5, 7]}, "has_photo": false}"#)
        let profile = F.profile(["communities": .codes([1])])
        let free = ReferenceEvaluator.explain(profile, filter, owner: owner, blocks: BlockSet.none, clock: clock)
        #expect(free.matches)
        #expect(
            free.conditions.first
                == .init(
                    itemKey: "communities", profileValue: "1", condition: "any of 5, 7", outcome: .ignoredNotOnPlan))
        let paid = ReferenceEvaluator.explain(
            profile, filter, owner: FilterOwner(id: 99, status: 1, plan: 1), blocks: BlockSet.none, clock: clock)
        #expect(!paid.matches)
        #expect(paid.conditions.first?.outcome == .fail)
    }

    @Test func invalidFilterShowsItsErrorAndNoConditions() throws {
        let clock = try F.clock("2026-03-01T03:00:00Z")
        let filter = F.filter(#"{"age": {"min": 40, "max": 30}}"#)
        let explanation = ReferenceEvaluator.explain(
            F.profile(), filter, owner: owner, blocks: BlockSet.none, clock: clock)
        #expect(!explanation.matches)
        #expect(explanation.conditions.isEmpty)
        let check = try #require(explanation.eligibility.first { $0.name == "filter valid" })
        #expect(!check.passed)
        #expect(check.detail == "age: min 40 is greater than max 30")
        // Not "filter not suspended: pass" (session 34): an invalid filter has no conditions to hold against a plan.
        let suspended = try #require(explanation.eligibility.first { $0.name == "filter not suspended" })
        #expect(!suspended.checked)
        #expect(suspended.detail == "the filter is invalid: no conditions to hold against the owner's plan")
    }

    @Test func failedChecksSayWhy() throws {
        let clock = try F.clock("2026-03-01T03:00:00Z")
        let deletedAt = try F.at("2026-02-01T00:00:00Z")
        let filter = F.filter(#"{"has_photo": true}"#, id: 5, ownerId: 99, deletedAt: deletedAt)
        let selfProfile = F.profile(id: 99, status: 3, ["has_photo": .flag(true)])
        let explanation = ReferenceEvaluator.explain(
            selfProfile, filter, owner: FilterOwner(id: 99, status: 4, plan: 1),
            blocks: BlockSet([(blocker: 99, blocked: 99)]), clock: clock)
        #expect(!explanation.matches)
        #expect(
            explanation.eligibility == [
                .init(name: "profile active", passed: false, detail: "profile 99 status 3 (suspended)"),
                .init(name: "owner active", passed: false, detail: "owner 99 status 4 (deleted), plan 1 (paid)"),
                .init(name: "filter not deleted", passed: false, detail: "filter 5 deleted at 2026-02-01T00:00:00Z"),
                .init(name: "filter readable", passed: true, detail: "readable"),
                .init(name: "filter valid", passed: true, detail: "valid"),
                .init(name: "filter not suspended", passed: true, detail: "not suspended"),
                .init(name: "not the owner", passed: false, detail: "profile 99 is the filter's owner"),
                .init(
                    name: "no block either way", passed: false,
                    detail: "profile 99 and owner 99 are blocked (one way or both)"),
            ])
        #expect(explanation.conditions.map(\.outcome) == [.pass])
    }

    @Test func blockEitherWayFailsTheCheck() throws {
        let clock = try F.clock("2026-03-01T03:00:00Z")
        let filter = F.filter("{}", ownerId: 99)
        for blocks in [BlockSet([(blocker: 10, blocked: 99)]), BlockSet([(blocker: 99, blocked: 10)])] {
            let explanation = ReferenceEvaluator.explain(
                F.profile(id: 10), filter, owner: owner, blocks: blocks, clock: clock)
            #expect(!explanation.matches)
            #expect(explanation.eligibility.filter { !$0.passed }.map(\.name) == ["no block either way"])
        }
    }

    @Test func missingProfileAndOwner() throws {
        let clock = try F.clock("2026-03-01T03:00:00Z")
        let filter = F.filter(#"{"has_photo": true}"#, ownerId: 99)
        let explanation = ReferenceEvaluator.explain(nil, filter, owner: nil, blocks: BlockSet.none, clock: clock)
        #expect(!explanation.matches)
        #expect(explanation.eligibility.map(\.passed) == [false, false, true, true, true, true, false, false])
        #expect(explanation.eligibility[0].detail == "profile not found")
        #expect(explanation.eligibility[1].detail == "owner 99 not found")
        #expect(
            explanation.conditions == [
                .init(itemKey: "has_photo", profileValue: "no profile", condition: "true", outcome: .fail)
            ])
        // Another member's record is not the owner's.
        let other = ReferenceEvaluator.explain(
            F.profile(id: 10), filter, owner: FilterOwner(id: 98, status: 1, plan: 0), blocks: BlockSet.none,
            clock: clock)
        #expect(other.eligibility[1] == .init(name: "owner active", passed: false, detail: "owner 99 not found"))
    }

    /// A filter whose row a run could not read is quarantined and never evaluated; explain says so, and the
    /// reference evaluator agrees with the run.
    @Test func aQuarantinedFilterFailsItsReadableCheck() throws {
        let clock = try F.clock("2026-03-01T03:00:00Z")
        let filter = SavedFilter(
            id: 5, ownerId: 99, name: "test", conditionsJSON: #"{"has_photo": true}"#,
            createdAt: Timestamp(microsecondsSinceEpoch: 0), updatedAt: Timestamp(microsecondsSinceEpoch: 0),
            quarantineReason: "notify holds text, not boolean")
        let owner = FilterOwner(id: 99, status: 1, plan: 0)
        let profile = F.profile(id: 10, ["has_photo": .flag(true)])
        let explanation = ReferenceEvaluator.explain(profile, filter, owner: owner, blocks: BlockSet.none, clock: clock)
        #expect(!explanation.matches)
        #expect(
            explanation.eligibility.filter { !$0.passed } == [
                .init(
                    name: "filter readable", passed: false,
                    detail: "quarantined, never evaluated: notify holds text, not boolean")
            ])
        #expect(!ReferenceEvaluator.matches(profile, filter, owner: owner, blocks: BlockSet.none, clock: clock))
    }

    /// Review of the explain output: a quarantined filter's row was not read, and a run never evaluates it. Explain
    /// showed an invented "filter valid FAIL conditions: not a JSON object" for the `null` stand-in of a `conditions`
    /// column retyped to bytea, and, with `notify` retyped instead, "Conditions evaluated yes" and condition lines.
    /// Its validity and suspension are now not checked, and no condition is evaluated.
    @Test func aQuarantinedFiltersValidityAndConditionsAreNotChecked() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10)])
        func quarantined(_ id: Int64, _ json: String, _ reason: String) -> SavedFilter {
            SavedFilter(
                id: id, ownerId: 1, name: "q", conditionsJSON: json, createdAt: World.day1, updatedAt: World.day1,
                quarantineReason: reason)
        }
        store.save([
            quarantined(100, "null", "conditions holds bytea, not jsonb"),
            quarantined(101, #"{"gender": {"anyOf": [2]}}"#, "notify holds int4, not boolean"),
        ])
        let explain = ExplainMatch(MatchingRepositories(store: store))
        for filterId: Int64 in [100, 101] {
            let result = try explain.execute(.init(filterId: filterId, profileId: 10, now: World.day1))
            #expect(!result.explanation.matches)
            #expect(result.explanation.conditions.isEmpty, "filter \(filterId)")
            #expect(
                result.explanation.eligibility.filter { !$0.passed }.map(\.name) == ["filter readable"],
                "filter \(filterId): \(result.explanation.eligibility)")
            let valid = try #require(result.explanation.eligibility.first { $0.name == "filter valid" })
            #expect(!valid.checked && valid.detail == "the filter is quarantined: a run never evaluates it")
            let json = ReportRenderer.render(.explanation(result), as: .json)
            #expect(json.contains(#""conditions_evaluated":false"#) && json.contains(#""conditions":[]"#), "\(json)")
            #expect(json.contains("not checked") && !json.contains("not a JSON object"), "\(json)")
        }
    }

    /// Review of the explain output: "Mutual: yes, via filter 200" was shown for a pair that does not match;
    /// runs.md defines mutual for a matching pair only.
    @Test func mutualIsShownOnlyForAMatchingPair() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1, residence: 13), World.profile(10, residence: 13)])
        store.save([
            World.filter(100, owner: 1, #"{"gender": {"anyOf": [2]}, "residence": {"anyOf": [27]}}"#),
            World.filter(101, owner: 1, #"{"gender": {"anyOf": [2]}}"#),
            World.filter(200, owner: 10, #"{"gender": {"anyOf": [1]}, "residence": {"anyOf": [13]}}"#),
        ])
        let explain = ExplainMatch(MatchingRepositories(store: store))
        let noMatch = try explain.execute(.init(filterId: 100, profileId: 10, now: World.day1))
        #expect(!noMatch.explanation.matches)
        #expect(noMatch.mutualVia == nil)
        let json = ReportRenderer.render(.explanation(noMatch), as: .json)
        #expect(json.contains(#""mutual_via":null"#) && !json.contains("via filter 200"), "\(json)")
        #expect(ReportRenderer.render(.explanation(noMatch), as: .text).contains("not applicable"))
        let match = try explain.execute(.init(filterId: 101, profileId: 10, now: World.day1))
        #expect(match.explanation.matches && match.mutualVia == 200)
        #expect(ReportRenderer.render(.explanation(match), as: .json).contains(#""mutual_via":200"#))
    }

    /// Review of the explain output: a pair a run never records (a filter created after the profile last changed,
    /// a pair beyond --max-per-filter) was "MATCH, Recorded no" with no reason. It now says why a run may not have
    /// recorded it and what records it; what it says holds: the next run does not record it, the backfill does.
    @Test func aMatchNoRunRecordedSaysWhyAndWhatRecordsIt() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10)])
        store.save([World.filter(100, owner: 1)])
        _ = try World.run(store, now: World.day1)
        store.save([World.filter(101, owner: 1)])  // after the profile's last change
        _ = try World.run(store, now: World.day2)
        let explain = ExplainMatch(MatchingRepositories(store: store))
        func text(_ filterId: Int64) throws -> String {
            let result = try explain.execute(.init(filterId: filterId, profileId: 10, now: World.day2))
            #expect(result.explanation.matches)
            return ReportRenderer.render(.explanation(result), as: .text)
        }
        let unrecorded = try text(101)
        #expect(!World.pairs(store).contains(MatchPair(filterId: 101, profileId: 10)), "no run recorded it")
        #expect(unrecorded.contains("Not recorded because"), "\(unrecorded)")
        #expect(unrecorded.contains("created or edited after the profile last changed"), "\(unrecorded)")
        #expect(unrecorded.contains("--max-per-filter"), "\(unrecorded)")
        #expect(unrecorded.contains("`matcher backfill --filter 101`"), "\(unrecorded)")
        #expect(!(try text(100)).contains("Not recorded because"), "recorded by the first run")
        _ = try World.backfill(store, .init(filters: .ids([101]), now: World.day2))
        #expect(World.pairs(store).contains(MatchPair(filterId: 101, profileId: 10)), "the backfill records it")
        #expect(!(try text(101)).contains("Not recorded because"))
    }

    /// Review of the explain output: values outside their item's domain (master-items.md) were shown as ordinary
    /// ones: height 500 as "500", residence 99 as "99", gender 0 as "0 (unanswered)" (gender is never 0), and an
    /// infinite birth date as plain "unanswered" beside an impossible birth's "counts as NULL". Each now says it is
    /// outside the domain, written as the spec writes it, and how a run compares it; and the outcome shown is the
    /// run's (a stored range value is compared as stored; a code outside the domain matches no listed code).
    @Test func oddValuesSayTheyAreOutsideTheDomainAndHowTheyCompare() throws {
        let clock = try F.clock("2026-03-01T03:00:00Z")
        let filter = F.filter(
            #"""
            {"gender": {"anyOf": [1, 2]}, "age": {"max": 30}, "height": {"min": 150}, "residence": {"anyOf": [13]},
             "languages": {"anyOf": [1]}}
            """#)
        let profile = F.profile([
            "gender": .code(0), "age": .date(try F.date("2016-01-01")), "height": .integer(500),
            "residence": .code(99), "languages": .codes([1, 31]),
        ])
        let explanation = ReferenceEvaluator.explain(profile, filter, owner: owner, blocks: BlockSet.none, clock: clock)
        let lines = Dictionary(uniqueKeysWithValues: explanation.conditions.map { ($0.itemKey, $0) })
        #expect(lines["gender"]?.profileValue == "0 (outside 1..2, never 0: an odd value, matches no listed code)")
        #expect(lines["gender"]?.outcome == .fail)
        #expect(lines["residence"]?.profileValue == "99 (outside 1..48: an odd value, matches no listed code)")
        #expect(lines["residence"]?.outcome == .fail)
        #expect(lines["height"]?.profileValue == "500 cm (outside 120..230: an odd value, compared as stored)")
        #expect(lines["height"]?.outcome == .pass, "500 is at least 150, as stored")
        #expect(lines["age"]?.profileValue == "10 years (born 2016-01-01; outside 18..120: compared as computed)")
        #expect(lines["age"]?.outcome == .pass)
        #expect(
            lines["languages"]?.profileValue == "1, 31 (31 outside 1..30: an odd value, matches no listed code)")
        // A birth date of ±infinity reads as NULL, as a run reads it: said so, beside the impossible dates'.
        #expect(
            MasterItem.Age.describe(value: .date(nil), clock: clock)
                == "unanswered (birth_date NULL, or ±infinity, which counts as NULL)")
        #expect(MasterItem.Residence.describe(value: .code(0), clock: clock) == "0 (unanswered)")
        #expect(MasterItem.Height.describe(value: .integer(160), clock: clock) == "160 cm")
    }

    /// The report renderer is explain's one text (review of the explain output: `Explanation.description` was a
    /// second renderer, used only by tests): each check and condition on a line, a paid condition ignored because
    /// the owner lacks the plan, and a suspended filter's owner named with its plan.
    @Test func rendersAsText() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(99, gender: 1), World.profile(10)])
        store.save([
            World.filter(5, owner: 99, #"{"gender": {"anyOf": [1]}, "communities": {"anyOf": [3]}}"#),
            World.filter(6, owner: 99, #"{"communities": {"anyOf": [3]}}"#),
            World.filter(7, owner: 555, #"{"communities": {"anyOf": [3]}}"#),
        ])
        let explain = ExplainMatch(MatchingRepositories(store: store))
        func lines(_ filterId: Int64) throws -> [String] {
            let result = try explain.execute(.init(filterId: filterId, profileId: 10, now: World.day1))
            return ReportRenderer.render(.explanation(result), as: .text).split(separator: "\n").map {
                $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            }
        }
        let text = try lines(5)
        #expect(text.first == "matcher explain: filter 5 x profile 10: NO MATCH", "\(text)")
        for line in [
            "profile active pass profile 10 status 1 (active)",
            "owner active pass owner 99 status 1 (active), plan 0 (free)",
            "filter valid pass valid", "filter not suspended pass not suspended",
            "gender 2 (女性) any of 1 (男性) FAIL",
            "communities none (unanswered) any of 3 ignored: the owner lacks the plan it needs",
        ] {
            #expect(text.contains(line), "\(line): \(text)")
        }
        let suspended = try lines(6)
        #expect(
            suspended.contains(
                "filter not suspended FAIL owner 99 is on plan 0 (free), and every condition needs a plan it lacks: "
                    + "suspended, it matches nothing until the owner pays again"), "\(suspended)")
        // No owner row: no plan is invented for it (it said "the owner (0 (free)) lacks").
        let ownerless = try lines(7)
        #expect(ownerless.contains("owner active FAIL owner 555 not found"), "\(ownerless)")
        #expect(
            ownerless.contains(
                "filter not suspended not checked owner 555 not found: no plan to check, and a run does not evaluate "
                    + "the filter"
            ), "\(ownerless)")
        #expect(ownerless.contains("communities none (unanswered) any of 3 ignored: no owner, so no plan"))
        #expect(!ownerless.joined().contains("(free)"), "\(ownerless)")
    }

    /// Review of session 23: a filter's name is the app's user's text, and `explain` printed it raw; an escape
    /// sequence or a newline in it reached the operator's terminal. The text renderer writes every control
    /// character as `\u{…}`; JSON escapes them as JSON does.
    @Test func aFilterNameWithControlCharactersIsPrintedAsOneInertLine() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10)])
        store.save([
            SavedFilter(
                id: 100, ownerId: 1, name: "x\u{1B}[2J\u{1B}]52;c;aGk=\u{07}\nfake line\u{202E}",
                conditionsJSON: #"{"gender": {"anyOf": [2]}}"#, createdAt: World.day1, updatedAt: World.day1)
        ])
        let result = try ExplainMatch(MatchingRepositories(store: store))
            .execute(.init(filterId: 100, profileId: 10, now: World.day1))
        let text = ReportRenderer.render(.explanation(result), as: .text)
        #expect(!text.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x202E })
        #expect(text.contains(#"x\u{1b}[2J\u{1b}]52;c;aGk=\u{7}\u{a}fake line\u{202e}"#), "\(text)")
        #expect(!text.split(separator: "\n").contains { $0.hasPrefix("fake line") })
        let json = ReportRenderer.render(.explanation(result), as: .json)
        #expect(!json.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 })
    }

    /// Review of session 26: a pair recorded past the retention is forgotten at the run's clock, swept or not, and
    /// a run records it again if it matches; `explain` said only "already recorded". It now says so, by the
    /// runs' own rule (the latest run's retention; a pair waiting for a digest is kept).
    @Test func aPairPastTheRetentionIsExplainedAsForgotten() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10)])
        store.save([
            SavedFilter(
                id: 100, ownerId: 1, name: "f", conditionsJSON: #"{"gender": {"anyOf": [2]}}"#,
                notify: false, createdAt: World.day1, updatedAt: World.day1),
            SavedFilter(
                id: 200, ownerId: 1, name: "monthly", conditionsJSON: #"{"gender": {"anyOf": [2]}}"#,
                notifyEvery: NotifyInterval(days: 30), createdAt: World.day1, updatedAt: World.day1),
        ])
        _ = try RunMatching(MatchingRepositories(store: store)).execute(.init(now: World.day1, retentionDays: 7))
        let explain = ExplainMatch(MatchingRepositories(store: store))
        let early = try explain.execute(.init(filterId: 100, profileId: 10, now: World.day1.adding(days: 7)))
        #expect(early.recorded?.matchedAt == World.day1)
        #expect(!early.recordedForgotten, "seven days: at the cutoff, not before it")
        let late = try explain.execute(.init(filterId: 100, profileId: 10, now: World.day1.adding(days: 8)))
        #expect(late.recordedForgotten && late.retentionDays == 7)
        let text = ReportRenderer.render(.explanation(late), as: .text)
        #expect(text.contains("forgotten at this clock (past the 7-day retention"), "\(text)")

        // A pair as old that waits for its digest (a monthly filter, its digest on day 1, a new match on day 2)
        // is kept past the retention, by explain as by the sweep.
        store.setClock(World.day2)
        store.save([World.profile(11, at: World.day2)])
        _ = try RunMatching(MatchingRepositories(store: store)).execute(.init(now: World.day2, retentionDays: 7))
        #expect(store.waitingPairs.contains(MatchPair(filterId: 200, profileId: 11)))
        let waiting = try explain.execute(.init(filterId: 200, profileId: 11, now: World.day2.adding(days: 8)))
        #expect(waiting.recorded?.matchedAt == World.day2)
        #expect(!waiting.recordedForgotten, "it waits for the filter's digest")
    }

    /// Review of session 29: "Already recorded" said only when; a backfill's silent pair, a notified one and one
    /// waiting for its digest read the same. It now says which, and by which run.
    @Test func aRecordedPairSaysWhetherItWasNotifiedOrIsSilent() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(10), World.profile(11)])
        store.save([
            World.filter(100, owner: 1),
            World.filter(200, owner: 1, every: NotifyInterval(days: 7)),
            World.filter(300, owner: 1, notify: false),
        ])
        // Filter 200 had its digest the day before: its match waits.
        try store.withUnitTransaction { tx in try tx.recordNotified([200], at: World.day1.adding(days: -1)) }
        let run = try RunMatching(MatchingRepositories(store: store)).execute(.init(now: World.day1, maxPerFilter: 1))
        _ = try Matching.Backfill(MatchingRepositories(store: store))
            .execute(.init(filters: .ids([100]), now: World.day1.adding(microseconds: 1)))
        let explain = ExplainMatch(MatchingRepositories(store: store))
        func recorded(_ filterId: Int64, _ profileId: Int64) throws -> String {
            let result = try explain.execute(.init(filterId: filterId, profileId: profileId, now: World.day2))
            let text = ReportRenderer.render(.explanation(result), as: .text)
            return text.split(separator: "\n").first { $0.contains("Already recorded") }.map(String.init) ?? text
        }
        let notification = try #require(try store.notifications(filterId: 100).first?.id)
        let runId = try #require(run.runId)
        #expect(
            try recorded(100, 10).hasSuffix(
                "matched at \(World.day1.iso8601) by run \(runId), notified by notification \(notification)"))
        #expect(try recorded(100, 11).contains(", silent (a backfill's without --notify: never in a digest)"))
        #expect(
            try recorded(200, 10).hasSuffix(
                ", not notified (waiting for its filter's digest, or passed over by one)"))
        #expect(
            try recorded(300, 10).hasSuffix(
                ", not notified (the filter's notify is off now: once it is on, a digest may count it, if it is still"
                    + " a candidate then and within the retention)"))
    }
}
