import Chronology
import Foundation
import Testing

@testable import Matching

/// Builds profiles, filters and clocks for evaluator tests.
struct EvaluatorFixture {
    static func at(_ iso: String) throws -> Timestamp {
        try #require(Timestamp(iso8601: iso))
    }

    static func date(_ iso: String) throws -> CalendarDate {
        try #require(CalendarDate(iso8601: iso))
    }

    static func clock(_ iso: String, timeZone: TimeZone = .tokyo) throws -> EvaluationClock {
        EvaluationClock(now: try at(iso), timeZone: timeZone)
    }

    static func profile(
        id: Int64 = 10, status: Int16 = 1, plan: Int16 = 0,
        lastLoginAt: Timestamp = Timestamp(microsecondsSinceEpoch: 0),
        createdAt: Timestamp = Timestamp(microsecondsSinceEpoch: 0), _ values: [String: ItemValue] = [:]
    ) -> Profile {
        Profile.make(id: id, status: status, plan: plan, lastLoginAt: lastLoginAt, createdAt: createdAt, values)
    }

    static func filter(_ json: String, id: Int64 = 1, ownerId: Int64 = 99, deletedAt: Timestamp? = nil) -> SavedFilter {
        SavedFilter(
            id: id, ownerId: ownerId, name: "test", conditionsJSON: json,
            createdAt: Timestamp(microsecondsSinceEpoch: 0), updatedAt: Timestamp(microsecondsSinceEpoch: 0),
            deletedAt: deletedAt)
    }

    static func satisfies(
        _ profile: Profile, _ json: String, clock: EvaluationClock, ownerPlan: Int16 = 1
    ) throws -> Bool {
        let conditions = try FilterConditions.decode(json: json).effective(forOwnerPlan: ownerPlan).conditions
        return ReferenceEvaluator.satisfies(profile, conditions, clock: clock)
    }
}

@Suite struct ReferenceEvaluatorTests {
    typealias F = EvaluatorFixture

    @Test(arguments: [(Int32(119), false), (120, true), (150, true), (180, true), (181, false)])
    func rangeBoundsAreInclusive(height: Int32, passes: Bool) throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        let profile = F.profile(["height": .integer(height)])
        #expect(try F.satisfies(profile, #"{"height": {"min": 120, "max": 180}}"#, clock: clock) == passes)
    }

    @Test(arguments: [(Int32(169), false), (170, true), (171, false)])
    func equalBoundsMatchExactlyOneValue(height: Int32, passes: Bool) throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        let profile = F.profile(["height": .integer(height)])
        #expect(try F.satisfies(profile, #"{"height": {"min": 170, "max": 170}}"#, clock: clock) == passes)
    }

    @Test(arguments: [
        #"{"height": {"min": 120}}"#, #"{"height": {"max": 230}}"#, #"{"height": {"min": 120, "max": 230}}"#,
        #"{"income": {"min": 1}}"#, #"{"age": {"min": 18}}"#, #"{"age": {"max": 120}}"#,
    ])
    func unansweredRangeFailsEveryCondition(json: String) throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        #expect(try F.satisfies(F.profile(), json, clock: clock) == false)
    }

    @Test func ageCountsFullYearsOnTheRunDate() throws {
        let clock = try F.clock("2026-06-15T03:00:00Z")  // 2026-06-15 in Tokyo
        let profile = F.profile(["age": .date(try F.date("1996-06-16"))])  // 29, 30 tomorrow
        #expect(try F.satisfies(profile, #"{"age": {"min": 29, "max": 29}}"#, clock: clock))
        #expect(try F.satisfies(profile, #"{"age": {"min": 30}}"#, clock: clock) == false)
        let birthday = F.profile(["age": .date(try F.date("1996-06-15"))])
        #expect(try F.satisfies(birthday, #"{"age": {"min": 30}}"#, clock: clock))
    }

    @Test(arguments: [
        ("2023-02-28", Int32(22)), ("2023-03-01", 23), ("2024-02-28", 23), ("2024-02-29", 24), ("2025-02-28", 24),
        ("2025-03-01", 25),
    ])
    func leapDayBirthdaysTurnOnFirstOfMarch(runDate: String, age: Int32) throws {
        // Noon in Tokyo on the run date.
        let clock = try F.clock(runDate + "T03:00:00Z")
        #expect(clock.runDate.description == runDate)
        let profile = F.profile(["age": .date(try F.date("2000-02-29"))])
        #expect(try F.satisfies(profile, #"{"age": {"min": \#(age), "max": \#(age)}}"#, clock: clock))
        #expect(try F.satisfies(profile, #"{"age": {"min": \#(age + 1)}}"#, clock: clock) == false)
    }

    @Test func tokyoDateChangesAtFifteenUTC() throws {
        // Born 2001-03-01: 25 from Tokyo midnight, which is 2026-02-28T15:00:00Z.
        let profile = F.profile(["age": .date(try F.date("2001-03-01"))])
        let condition = #"{"age": {"min": 25}}"#
        let before = try F.clock("2026-02-28T14:59:59.999999Z")
        let after = try F.clock("2026-02-28T15:00:00Z")
        #expect(before.runDate.description == "2026-02-28")
        #expect(after.runDate.description == "2026-03-01")
        #expect(try F.satisfies(profile, condition, clock: before) == false)
        #expect(try F.satisfies(profile, condition, clock: after))
        // In UTC it is still 28 February.
        let utc = try #require(TimeZone(identifier: "UTC"))
        #expect(try F.satisfies(profile, condition, clock: F.clock("2026-02-28T15:00:00Z", timeZone: utc)) == false)
        #expect(try F.satisfies(profile, condition, clock: F.clock("2026-03-01T00:00:00Z", timeZone: utc)))
    }

    /// runs.md: "an infinite or impossible date ... counts as NULL". A birth after the run's date has not
    /// happened: unanswered, so it satisfies no age condition (PostgreSQL's `age()` would give -3).
    @Test func birthAfterTheRunDateIsUnanswered() throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        let profile = F.profile(["age": .date(try F.date("2030-01-01"))])
        #expect(try F.satisfies(profile, #"{"age": {"min": 18}}"#, clock: clock) == false)
        #expect(try F.satisfies(profile, #"{"age": {"max": 120}}"#, clock: clock) == false)
        #expect(MasterItem.Age.rangeValue(of: .date(try F.date("2030-01-01")), clock: clock) == nil)
        // Born on the run's date: age 0, answered.
        #expect(MasterItem.Age.rangeValue(of: .date(try F.date("2026-03-01")), clock: clock) == 0)
    }

    /// Found by review in session 32: a birth more years before the run's date than the age item's domain holds
    /// (120) is impossible too; a birth in 4713 BC was an age of 6,738, which passed every minimum-only condition.
    @Test func birthMoreThanTheDomainsYearsBeforeTheRunDateIsUnanswered() throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        let oldest = try F.date("1905-03-01")  // 121 on the run's date
        #expect(MasterItem.Age.rangeValue(of: .date(oldest), clock: clock) == nil)
        #expect(try F.satisfies(F.profile(["age": .date(oldest)]), #"{"age": {"min": 25}}"#, clock: clock) == false)
        let possible = try F.date("1905-03-02")  // 120
        #expect(MasterItem.Age.rangeValue(of: .date(possible), clock: clock) == 120)
        #expect(try F.satisfies(F.profile(["age": .date(possible)]), #"{"age": {"min": 25}}"#, clock: clock))
        let text = MasterItem.Age.describe(value: .date(oldest), clock: clock)
        #expect(text.contains("more than 120 years before the run's date: impossible"), "\(text)")
    }

    @Test(arguments: [
        (Int16(0), #"{"smoking": {"anyOf": [1]}}"#, false),
        (0, #"{"smoking": {"anyOf": [0]}}"#, true),
        (0, #"{"smoking": {"anyOf": [0, 1]}}"#, true),
        (1, #"{"smoking": {"anyOf": [0, 1]}}"#, true),
        (1, #"{"smoking": {"anyOf": [0]}}"#, false),
        (5, #"{"smoking": {"anyOf": [1, 5]}}"#, true),
        (6, #"{"smoking": {"anyOf": [1, 5]}}"#, false),
    ])
    func singleAcceptsUnansweredOnlyWhenListed(code: Int16, json: String, passes: Bool) throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        #expect(try F.satisfies(F.profile(["smoking": .code(code)]), json, clock: clock) == passes)
    }

    @Test(arguments: [
        ([Int32](), #"{"personality": {"anyOf": [1]}}"#, false),
        ([], #"{"personality": {"allOf": [1]}}"#, false),
        ([3, 7], #"{"personality": {"anyOf": [7, 9]}}"#, true),
        ([3, 7], #"{"personality": {"anyOf": [8, 9]}}"#, false),
        ([3, 7], #"{"personality": {"allOf": [3]}}"#, true),
        ([3, 7], #"{"personality": {"allOf": [3, 7]}}"#, true),
        ([3, 7], #"{"personality": {"allOf": [3, 7, 9]}}"#, false),
        ([7, 3, 3], #"{"personality": {"allOf": [3, 7]}}"#, true),
        ([9], #"{"personality": {"allOf": [9]}}"#, true),
        ([9], #"{"personality": {"anyOf": [9]}}"#, true),
    ])
    func multiAnyOfAndAllOf(held: [Int32], json: String, passes: Bool) throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        #expect(try F.satisfies(F.profile(["personality": .codes(held)]), json, clock: clock) == passes)
    }

    @Test func communitiesUseFullIntegerIds() throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        let profile = F.profile(["communities": .codes([2_147_483_647, 70_000])])
        #expect(try F.satisfies(profile, #"{"communities": {"allOf": [70000, 2147483647]}}"#, clock: clock))
        #expect(try F.satisfies(profile, #"{"communities": {"anyOf": [4464]}}"#, clock: clock) == false)
    }

    @Test(arguments: [(true, "true", true), (true, "false", false), (false, "false", true), (false, "true", false)])
    func flagsEqualTheirCondition(value: Bool, json: String, passes: Bool) throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        #expect(
            try F.satisfies(F.profile(["verified": .flag(value)]), #"{"verified": \#(json)}"#, clock: clock) == passes)
    }

    @Test func withinDaysIncludesItsBoundaryExactly() throws {
        let clock = try F.clock("2026-03-08T12:00:00Z")
        let boundary = try F.at("2026-03-01T12:00:00Z")  // exactly 7 × 24 h before
        let justBefore = boundary.adding(microseconds: -1)
        #expect(try F.satisfies(F.profile(lastLoginAt: boundary), #"{"last_login": {"withinDays": 7}}"#, clock: clock))
        #expect(
            try F.satisfies(F.profile(lastLoginAt: justBefore), #"{"last_login": {"withinDays": 7}}"#, clock: clock)
                == false)
        #expect(
            try F.satisfies(F.profile(lastLoginAt: justBefore), #"{"last_login": {"withinDays": 8}}"#, clock: clock))
        #expect(try F.satisfies(F.profile(createdAt: boundary), #"{"registered": {"withinDays": 7}}"#, clock: clock))
        #expect(
            try F.satisfies(F.profile(createdAt: justBefore), #"{"registered": {"withinDays": 7}}"#, clock: clock)
                == false)
        // A timestamp after the clock (a later login replayed with an earlier --now) is within any window.
        #expect(
            try F.satisfies(
                F.profile(lastLoginAt: try F.at("2026-03-09T00:00:00Z")), #"{"last_login": {"withinDays": 1}}"#,
                clock: clock))
    }

    @Test func withinDaysIsTwentyFourHourDaysWhateverTheZone() throws {
        // Days are 24 h, never calendar days: the same instants pass in any time zone.
        let newYork = try #require(TimeZone(identifier: "America/New_York"))
        let clock = try F.clock("2026-03-09T12:00:00Z", timeZone: newYork)  // the day after DST began there
        let boundary = try F.at("2026-03-08T12:00:00Z")
        #expect(try F.satisfies(F.profile(lastLoginAt: boundary), #"{"last_login": {"withinDays": 1}}"#, clock: clock))
        #expect(
            try F.satisfies(
                F.profile(lastLoginAt: boundary.adding(microseconds: -1)), #"{"last_login": {"withinDays": 1}}"#,
                clock: clock) == false)
    }

    @Test func emptyConditionsAcceptEveryProfile() throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        #expect(ReferenceEvaluator.satisfies(F.profile(), .none, clock: clock))
    }

    @Test func everyConditionMustHold() throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        let profile = F.profile(["gender": .code(2), "residence": .code(13), "has_photo": .flag(true)])
        #expect(
            try F.satisfies(
                profile, #"{"gender": {"anyOf": [2]}, "residence": {"anyOf": [13]}, "has_photo": true}"#, clock: clock))
        #expect(
            try F.satisfies(
                profile, #"{"gender": {"anyOf": [2]}, "residence": {"anyOf": [14]}, "has_photo": true}"#, clock: clock)
                == false)
    }

    @Test func paidConditionIsIgnoredForAFreeOwnerAndAppliedForAPaidOne() throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        let filter = F.filter(#"{"communities": {"anyOf": [5]}, "gender": {"anyOf": [1]}}"#)
        let profile = F.profile(["gender": .code(1), "communities": .codes([6])])
        let free = FilterOwner(id: 99, status: 1, plan: 0)
        let paid = FilterOwner(id: 99, status: 1, plan: 1)
        #expect(ReferenceEvaluator.matches(profile, filter, owner: free, blocks: BlockSet.none, clock: clock))
        #expect(!ReferenceEvaluator.matches(profile, filter, owner: paid, blocks: BlockSet.none, clock: clock))
        let member = F.profile(["gender": .code(1), "communities": .codes([5])])
        #expect(ReferenceEvaluator.matches(member, filter, owner: paid, blocks: BlockSet.none, clock: clock))
        // The other conditions still count for a free owner.
        let woman = F.profile(["gender": .code(2), "communities": .codes([5])])
        #expect(!ReferenceEvaluator.matches(woman, filter, owner: free, blocks: BlockSet.none, clock: clock))
    }

    @Test func eligibility() throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        let json = #"{"gender": {"anyOf": [2]}}"#
        let filter = F.filter(json, ownerId: 99)
        let profile = F.profile(id: 10, ["gender": .code(2)])
        let owner = FilterOwner(id: 99, status: 1, plan: 0)
        func matches(_ profile: Profile, _ filter: SavedFilter, owner: FilterOwner?, blocks: BlockSet = .none) -> Bool {
            ReferenceEvaluator.matches(profile, filter, owner: owner, blocks: blocks, clock: clock)
        }
        #expect(matches(profile, filter, owner: owner))
        for status: Int16 in [0, 2, 3, 4, 5] {
            #expect(
                !matches(F.profile(id: 10, status: status, ["gender": .code(2)]), filter, owner: owner),
                "profile status \(status)")
            #expect(
                !matches(profile, filter, owner: FilterOwner(id: 99, status: status, plan: 0)), "owner status \(status)"
            )
        }
        #expect(!matches(profile, filter, owner: nil), "no owner")
        #expect(!matches(profile, filter, owner: FilterOwner(id: 98, status: 1, plan: 0)), "another member's record")
        #expect(!matches(profile, F.filter(json, ownerId: 99, deletedAt: clock.now), owner: owner), "deleted")
        #expect(!matches(profile, F.filter(#"{"gender": {"anyOf": [3]}}"#), owner: owner), "invalid")
        #expect(!matches(profile, F.filter("not json"), owner: owner), "not JSON")
        #expect(!matches(F.profile(id: 99, ["gender": .code(2)]), filter, owner: owner), "self-match")
        #expect(
            !matches(profile, filter, owner: owner, blocks: BlockSet([(blocker: 99, blocked: 10)])),
            "owner blocked profile")
        #expect(
            !matches(profile, filter, owner: owner, blocks: BlockSet([(blocker: 10, blocked: 99)])),
            "profile blocked owner")
        #expect(
            matches(
                profile, filter, owner: owner,
                blocks: BlockSet([(blocker: 10, blocked: 98), (blocker: 97, blocked: 99)])), "unrelated blocks")
        #expect(!matches(F.profile(id: 10, ["gender": .code(1)]), filter, owner: owner), "conditions")
    }

    @Test func matchesWithPredecodedConditions() throws {
        let clock = try F.clock("2026-03-01T00:00:00Z")
        let filter = F.filter(#"{"has_photo": true}"#)
        let owner = FilterOwner(id: 99, status: 1, plan: 0)
        let decoded = Result { () throws(FilterValidationError) in try filter.decodedConditions() }
        #expect(
            ReferenceEvaluator.matches(
                F.profile(["has_photo": .flag(true)]), filter, conditions: decoded, owner: owner, blocks: BlockSet.none,
                clock: clock))
        let invalid = Result<FilterConditions, FilterValidationError>.failure(
            FilterValidationError(itemKey: nil, problem: "not a JSON object"))
        #expect(
            !ReferenceEvaluator.matches(
                F.profile(["has_photo": .flag(true)]), filter, conditions: invalid, owner: owner, blocks: BlockSet.none,
                clock: clock))
    }

    @Test func sqlPredicateDerivesFromColumns() throws {
        let decoded = try FilterConditions.decode(
            json: #"""
                {"gender": {"anyOf": [2]}, "age": {"min": 25, "max": 32}, "height": {"max": 180},
                 "residence": {"anyOf": [0, 13]}, "personality": {"anyOf": [2, 9]}, "languages": {"allOf": [1]},
                 "communities": {"allOf": [7, 2147483647]}, "has_photo": true, "verified": false,
                 "last_login": {"withinDays": 7}, "registered": {"withinDays": 1}}
                """#)
        let expected = [
            "(gender IN (2))",
            "(birth_date <= $2::date AND date_part('year', age($2::date::timestamp, birth_date::timestamp)) <= 120"
                + " AND date_part('year', age($2::date::timestamp, birth_date::timestamp)) >= 25"
                + " AND date_part('year', age($2::date::timestamp, birth_date::timestamp)) <= 32)",
            "(height_cm IS NOT NULL AND height_cm <= 180)",
            "(residence IN (0, 13))",
            "(languages @> '{1}'::smallint[])",
            "(personality && '{2,9}'::smallint[])",
            "(communities @> '{7,2147483647}'::integer[])",
            "(has_photo = true)",
            "(verified = false)",
            "(last_login_at >= $1::timestamptz - interval '168 hours')",
            "(created_at >= $1::timestamptz - interval '24 hours')",
        ].joined(separator: " AND ")
        #expect(decoded.sqlPredicate() == expected)
        #expect(FilterConditions.none.sqlPredicate() == "true")
    }
}
