import Chronology
import Foundation
import Testing

@testable import Matching

/// Issue 14, in memory: interval arithmetic saturates, extreme instants print, the columnar builder can
/// set a row aside, read issues are counted, and NULL recency never satisfies `withinDays`.
@Suite struct HostileValuesTests {
    static let now = Timestamp(iso8601: "2026-03-01T03:00:00Z")!
    static let clock = EvaluationClock(now: now, timeZone: .tokyo)

    @Test(arguments: [
        NotifyInterval(days: .max), NotifyInterval(months: .max),
        NotifyInterval(months: .max, days: .max, microseconds: .max),
        NotifyInterval(microseconds: .max), NotifyInterval(months: 12 * 300_000),
    ])
    func hugeIntervalsSaturateToNeverDue(_ interval: NotifyInterval) {
        let due = interval.added(to: Self.now, in: .tokyo)
        #expect(due > Self.now.adding(days: 365 * 1_000))
    }

    @Test(arguments: [
        NotifyInterval(days: .min), NotifyInterval(months: .min),
        NotifyInterval(months: .min, days: .min, microseconds: .min),
        NotifyInterval(microseconds: .min), NotifyInterval(days: -5),
    ])
    func negativeIntervalsAreDueAtOnce(_ interval: NotifyInterval) {
        #expect(interval.added(to: Self.now, in: .tokyo) < Self.now)
    }

    @Test func ordinaryIntervalsAreUnchanged() {
        #expect(NotifyInterval.oneDay.added(to: Self.now, in: .tokyo) == Self.now.adding(days: 1))
        let jan31 = Timestamp(iso8601: "2026-01-31T03:00:00Z")!
        #expect(NotifyInterval(months: 1).added(to: jan31, in: .tokyo) == Timestamp(iso8601: "2026-02-28T03:00:00Z")!)
        // From the extremes of the clock too.
        for instant in [
            Timestamp(microsecondsSinceEpoch: .max), Timestamp(microsecondsSinceEpoch: .min), Timestamp.missing,
        ] {
            _ = NotifyInterval(months: 1, days: 1, microseconds: 1).added(to: instant, in: .tokyo)
            _ = NotifyInterval(months: -1, days: -1, microseconds: -1).added(to: instant, in: .tokyo)
            _ = instant.iso8601
            _ = instant.calendarDate(in: .tokyo)
            _ = instant.adding(days: .max)
            _ = instant.adding(days: .min)
        }
        #expect(Timestamp(microsecondsSinceEpoch: .max).adding(microseconds: 1).microsecondsSinceEpoch == .max)
        #expect(CalendarDate(daysSinceEpoch: .max).adding(days: 1).daysSinceEpoch == .max)
    }

    @Test func aDiscardedRowLeavesNoTrace() throws {
        let a = Profile.make(id: 1, lastLoginAt: Self.now, createdAt: Self.now, ["personality": .codes([1, 2])])
        let c = Profile.make(id: 3, lastLoginAt: Self.now, createdAt: Self.now, ["height": .integer(170)])
        var builder = ProfileColumns.Builder()
        builder.append(a)
        // Row 2: half written (a set left open, a flag, a nullable), then set aside.
        builder.beginRow(id: 2, status: 1, plan: 0)
        builder.noteOddValue()
        let personality = MasterItem.item(forKey: "personality")!.index
        builder.appendCodeElement(7, item: personality)
        builder.appendFlag(true, item: MasterItem.item(forKey: "has_photo")!.index)
        builder.appendInteger(150, item: MasterItem.item(forKey: "height")!.index)
        builder.discardRow(quarantining: "personality: corrupt")
        builder.quarantine(id: nil, reason: "id unreadable")
        builder.append(c)
        builder.beginRow(id: 4, status: 7, plan: 0)
        builder.noteOddValue()
        builder.noteOddValue()
        for (index, value) in Profile.make(id: 4, lastLoginAt: Self.now, createdAt: Self.now).values.enumerated() {
            switch value {
            case .code(let code): builder.appendCode(code, item: index)
            case .integer(let integer): builder.appendInteger(integer, item: index)
            case .date(let date): builder.appendDate(days: date?.daysSinceEpoch, item: index)
            case .codes(let codes): builder.appendCodes(codes, item: index)
            case .flag(let flag): builder.appendFlag(flag, item: index)
            case .timestamp:
                builder.appendTimestamp(microseconds: Timestamp.missing.microsecondsSinceEpoch, item: index)
            }
        }
        let table = builder.build()
        #expect(table.ids == [1, 3, 4])
        #expect(table.profile(at: 0) == a)
        #expect(table.profile(at: 1) == c)
        #expect(table.readReport.oddIds == [4])
        #expect(
            table.readReport.quarantined == [
                QuarantinedRow(kind: .profile, rowId: 2, reason: "personality: corrupt"),
                QuarantinedRow(kind: .profile, rowId: nil, reason: "id unreadable"),
            ])
        // NULL last_login_at: never within any number of days, and last in the cap's order.
        let clock = EvaluationClock(now: Self.now, timeZone: .tokyo)
        let lastLogin = MasterItem.item(forKey: "last_login")!
        #expect(!lastLogin.evaluate(.withinDays(365), on: table.profile(at: 2).value(of: lastLogin), clock: clock))
        #expect(lastLogin.describe(value: .timestamp(.missing), clock: clock).contains("NULL"))
        let missing = table.profile(at: 2)
        let ordered = ProfileColumns([Profile(id: 4, status: 1, plan: 0, values: missing.values), a, c])
            .activeRowsInCapOrder()
        #expect(ordered.last == 0)

        // An infinite login (`Int64.max`, which only a profile built in memory can hold: the PostgreSQL read makes it
        // NULL) is NULL too (found by review in session 32: it passed withinDays and came first in the cap's order).
        let infinite = Profile(
            id: 5, status: 1, plan: 0,
            values: missing.values.enumerated().map { index, value in
                index == lastLogin.index ? .timestamp(Timestamp(microsecondsSinceEpoch: .max)) : value
            })
        #expect(infinite.value(of: lastLogin) == .timestamp(.missing))
        #expect(infinite.heldOddValues)
        let withInfinite = ProfileColumns([infinite, a, c])
        #expect(withInfinite.activeRowsInCapOrder().last == 0)
        #expect(!lastLogin.evaluate(.withinDays(365), on: infinite.value(of: lastLogin), clock: clock))
        #expect(
            !lastLogin.evaluate(.withinDays(365), on: .timestamp(Timestamp(microsecondsSinceEpoch: .max)), clock: clock)
        )
    }

    @Test func readIssuesCountOddAndQuarantinedRows() {
        let report = ReadReport(oddIds: [5, 6], quarantined: [QuarantinedRow(kind: .profile, rowId: 9, reason: "x")])
        let candidates = ProfileColumns(
            ids: [5], statuses: [1], plans: [0],
            columns: ProfileColumns([Profile.make(id: 5, lastLoginAt: Self.now, createdAt: Self.now)]).columns,
            readReport: report)
        let filters = [
            SavedFilter(id: 1, ownerId: 5, conditionsJSON: "{}", createdAt: Self.now, updatedAt: Self.now),
            SavedFilter(id: 2, ownerId: 77, conditionsJSON: "{}", createdAt: Self.now, updatedAt: Self.now),
            SavedFilter(
                id: 3, ownerId: 5, conditionsJSON: "{}", createdAt: Self.now, updatedAt: Self.now, heldOddValues: true),
            SavedFilter(
                id: 4, ownerId: 5, conditionsJSON: "{}", createdAt: Self.now, updatedAt: Self.now,
                quarantineReason: "notify holds text"),
        ]
        let issues = ReadIssues(
            candidates: candidates, filters: filters,
            owners: [5: FilterOwner(id: 5, status: 1, plan: 0)], clock: Self.clock)
        #expect(issues.oddFilterIds == [2, 3])
        #expect(issues.counters == RunCounters(profilesQuarantined: 1, filtersQuarantined: 1, oddValues: 4))
        #expect(RunCounters(oddValues: 9).withReadIssues(issues.counters).oddValues == 9)

        // Owners with an odd plan or status are counted once each, a candidate among them once in all.
        let owned =
            filters.prefix(3).map {
                SavedFilter(
                    id: $0.id, ownerId: $0.id == 1 ? 6 : 8, conditionsJSON: "{}", createdAt: Self.now,
                    updatedAt: Self.now)
            } + [SavedFilter(id: 5, ownerId: 9, conditionsJSON: "{}", createdAt: Self.now, updatedAt: Self.now)]
        let withOwners = ReadIssues(
            candidates: candidates, filters: owned,
            owners: [
                6: FilterOwner(id: 6, status: 9, plan: 0), 8: FilterOwner(id: 8, status: 1, plan: 7),
                9: FilterOwner(id: 9, status: 1, plan: 1),
            ], clock: Self.clock)
        #expect(withOwners.oddProfileIds == [5, 6, 8])
        #expect(withOwners.counters.oddValues == 3)

        // The waiting matches' profiles, read for the digests: what the candidates' read met is not counted twice.
        let waiting = ReadReport(
            oddIds: [5, 7, 7],
            quarantined: [
                QuarantinedRow(kind: .profile, rowId: 9, reason: "x"),
                QuarantinedRow(kind: .profile, rowId: 12, reason: "height_cm: text"),
            ])
        let merged = issues.including(waiting, read: [5, 7])
        #expect(merged.oddProfileIds == [5, 6, 7])
        #expect(merged.quarantined.compactMap(\.rowId) == [9, 4, 12])
        #expect(merged.profileIdsRead == [5, 5, 7])
        #expect(merged.counters == RunCounters(profilesQuarantined: 2, filtersQuarantined: 1, oddValues: 5))
    }

    /// The mutual check's reads of filters (session 28): a filter the pass read is not counted twice, an odd or
    /// unreadable one is, as is one whose owner has no profile row, and an odd owner once among the profiles.
    @Test func filtersReadByTheMutualCheckAreCountedOnce() {
        let now = Self.now
        func filter(_ id: Int64, owner: Int64, odd: Bool = false, reason: String? = nil) -> SavedFilter {
            SavedFilter(
                id: id, ownerId: owner, conditionsJSON: "{}", createdAt: now, updatedAt: now, quarantineReason: reason,
                heldOddValues: odd)
        }
        let pass = ReadIssues(
            candidates: ProfileColumns([Profile.make(id: 5, status: 9, lastLoginAt: now, createdAt: now)]),
            filters: [filter(1, owner: 5, odd: true)], owners: [5: FilterOwner(id: 5, status: 9, plan: 0)],
            clock: Self.clock)
        #expect(pass.oddProfileIds == [5] && pass.oddFilterIds == [1])
        let merged = pass.including(
            filters: [
                filter(1, owner: 5, odd: true), filter(2, owner: 6, odd: true), filter(3, owner: 7),
                filter(4, owner: 8, reason: "notify holds text"), filter(5, owner: 6), filter(6, owner: 5),
            ],
            owners: [
                5: FilterOwner(id: 5, status: 9, plan: 0), 6: FilterOwner(id: 6, status: 1, plan: 3),
                8: FilterOwner(id: 8, status: 1, plan: 0),
            ])
        #expect(merged.oddFilterIds == [1, 2, 3])
        #expect(merged.quarantined.map(\.rowId) == [4])
        #expect(merged.oddProfileIds == [5, 6])
        #expect(merged.filterIdsRead == [1, 2, 3, 4, 5, 6])
        #expect(merged.counters == RunCounters(profilesQuarantined: 0, filtersQuarantined: 1, oddValues: 5))
    }

    /// Profiles made into columns (the in-memory store's reads) report their odd rows as the database's read does.
    @Test func profilesMadeIntoColumnsReportTheirOddRows() {
        let now = Self.now
        func make(_ id: Int64, status: Int16 = 1, plan: Int16 = 0, _ values: [String: ItemValue] = [:]) -> Profile {
            // Gender answered: its 0 is odd (no one is unanswered there).
            Profile.make(
                id: id, status: status, plan: plan, lastLoginAt: now, createdAt: now,
                values.merging(["gender": .code(1)]) { given, _ in given })
        }
        let profiles = [
            make(1), make(2, status: 7), make(3, plan: 2), make(4, ["gender": .code(0)]),
            make(5, ["smoking": .code(0)]),
            make(6, ["smoking": .code(99)]), make(7, ["height": .integer(0)]), make(8, ["height": .integer(170)]),
            make(9, ["languages": .codes([1, 0])]), make(10, ["last_login": .timestamp(.missing)]),
            make(11, ["gender": .code(2), "languages": .codes([1, 2])]),
        ]
        #expect(ProfileColumns(profiles).readReport.oddIds == [2, 3, 4, 6, 7, 9, 10])
        #expect(profiles.filter(\.heldOddValues).map(\.id) == [2, 3, 4, 6, 7, 9, 10])
    }

    @Test func codeListsAreBoundedAndSearchedInLogTime() throws {
        // 15,000 repetitions of 30 codes (40 KB): deduplicated to the domain.
        let codes = (0..<15_000).map { String($0 % 30 + 1) }.joined(separator: ",")
        let decoded = try FilterConditions.decode(json: #"{"languages": {"anyOf": [\#(codes)]}}"#)
        #expect(decoded.conditions.first?.form == .anyOf(Array(1...30)))
        // A profile with a huge set against a long list: O(held × log listed).
        let listed = (1...6_000).map { Int32($0) * 1_000 }
        let held = Array(repeating: Int32(7), count: 200_000) + [6_000_000]
        let communities = MasterItem.item(forKey: "communities")!
        let clock = EvaluationClock(now: Self.now, timeZone: .tokyo)
        #expect(communities.evaluate(.anyOf(listed), on: .codes(held), clock: clock))
        #expect(!communities.evaluate(.anyOf(listed), on: .codes(Array(held.dropLast())), clock: clock))
        #expect(communities.evaluate(.allOf([7, 6_000_000]), on: .codes(held), clock: clock))
    }
}
