import Chronology
import DeterministicRandom
import Foundation
import MatchingTestSupport
import Testing

@testable import Matching

/// A reproducible generator: the shared SplitMix64, with the draws these tests use.
typealias BitsetTestGenerator = SplitMix64

extension SplitMix64 {
    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &self) < probability }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
    mutating func pick<T>(_ values: [T]) -> T { values[int(0...values.count - 1)] }
}

/// Random profiles and filters over the whole catalogue: every kind and form, values at the bounds,
/// unanswered values, values outside the domains, ties in `last_login_at`.
struct BitsetTestWorld {
    static let now = Timestamp(iso8601: "2026-03-01T03:00:00Z")!  // 2026-03-01 12:00 in Tokyo
    static let clock = EvaluationClock(now: now)
    static let day = Timestamp.microsecondsPerDay
    /// Community ids filters and profiles share: a few popular small ones, and sparse large ones.
    static let communities: [Int32] =
        Array(1...12) + [1_000, 65_536, 99_999, 1 << 20, 123_456_789, Int32.max - 1, Int32.max]

    var random: BitsetTestGenerator
    /// Shared `last_login_at` values, so that ties are frequent.
    let logins: [Int64]

    init(seed: UInt64) {
        random = BitsetTestGenerator(seed: seed)
        var logins: [Int64] = []
        let now = BitsetTestWorld.now.microsecondsSinceEpoch
        for days in [0, 1, 7, 30, 90, 365] {  // exactly on thresholds, and a microsecond either side
            logins += [
                now - Int64(days) * BitsetTestWorld.day, now - Int64(days) * BitsetTestWorld.day - 1,
                now - Int64(days) * BitsetTestWorld.day + 1,
            ]
        }
        for _ in 0..<150 {
            logins.append(now - Int64.random(in: 0...(400 * BitsetTestWorld.day), using: &random))
        }
        logins.append(now + 3_600_000_000)  // in the future
        logins += [Int64.min, Int64.min + 1, Int64.max]  // hostile extremes
        self.logins = logins
    }

    mutating func profiles(_ count: Int, idBase: Int64 = 1) -> [Profile] {
        var ids = Set<Int64>()
        while ids.count < count { ids.insert(idBase + Int64(random.int(0...count * 5))) }
        return ids.shuffled(using: &random).map { profile(id: $0) }
    }

    mutating func profile(id: Int64) -> Profile {
        let status: Int16 = random.chance(0.85) ? 1 : random.pick([0, 2, 3, 4, 7])
        let values = MasterItem.all.map { value(for: $0) }
        return Profile(id: id, status: status, plan: random.pick([0, 1, 1, 5]), values: values)
    }

    mutating func value(for item: AnyMasterItem) -> ItemValue {
        switch item.storage {
        case .smallint:
            let top = Int(item.domain?.upperBound ?? 10)
            if random.chance(0.1) { return .code(0) }
            if random.chance(0.05) { return .code(random.pick([Int16(top + 1), 99, -1, -32768, 32767, 0])) }
            return .code(Int16(random.int(1...top)))
        case .nullableSmallint:
            if random.chance(0.15) { return .integer(nil) }
            let domain = item.domain ?? 1...9
            if random.chance(0.1) {
                return .integer(
                    random.pick([
                        domain.lowerBound, domain.upperBound, domain.lowerBound - 1,
                        domain.upperBound + 1, 0, -3, Int32(Int16.max), Int32.min, Int32.max,
                    ]))
            }
            return .integer(Int32(random.int(Int(domain.lowerBound)...Int(domain.upperBound))))
        case .nullableDate:
            if random.chance(0.15) { return .date(nil) }
            let run = BitsetTestWorld.clock.runDate
            if random.chance(0.05) {
                return .date(
                    CalendarDate(daysSinceEpoch: random.pick([Int32.min, Int32.max, -1_000_000, 2_000_000, 0])))
            }
            if random.chance(0.2) {  // on or next to a birthday
                let years = random.int(10...125)
                let date =
                    CalendarDate(year: run.year - years, month: run.month, day: run.day)
                    ?? CalendarDate(year: run.year - years, month: 3, day: 1)!
                return .date(date.adding(days: random.int(-1...1)))
            }
            if random.chance(0.05) {
                return .date(CalendarDate(year: random.pick([1996, 2000, 2004, 2008]), month: 2, day: 29))
            }
            return .date(run.adding(days: -random.int(15 * 365...130 * 365)))
        case .smallintArray, .integerArray:
            if random.chance(0.2) { return .codes([]) }
            let pool: [Int32] =
                item.storage == .integerArray
                ? BitsetTestWorld.communities
                : Array(1...(item.domain?.upperBound ?? 10))
            var codes: [Int32] = (0..<random.int(1...4)).map { _ in random.pick(pool) }
            if random.chance(0.1) { codes.append(random.pick([0, -1, 999, 31, 41, Int32.min])) }
            if random.chance(0.1), let first = codes.first { codes.append(first) }  // a repetition
            return .codes(codes)
        case .boolean:
            return .flag(random.chance(0.5))
        case .timestamptz:
            return .timestamp(Timestamp(microsecondsSinceEpoch: random.pick(logins)))
        }
    }

    mutating func conditions() -> FilterConditions {
        var items = MasterItem.all.shuffled(using: &random)
        items.removeLast(items.count - random.int(0...min(9, items.count)))
        let conditions = items.sorted { $0.index < $1.index }.map { FilterCondition(item: $0, form: form(for: $0)) }
        return FilterConditions(conditions: conditions)
    }

    mutating func form(for item: AnyMasterItem) -> ConditionForm {
        if random.chance(0.01) {  // a form of another kind: never satisfied
            return random.pick([.flag(true), .withinDays(3), .range(min: 1, max: 5), .anyOf([1]), .allOf([1])])
        }
        switch item.kind {
        case .range:
            let domain = item.domain ?? 1...9
            func bound() -> Int32 {
                random.chance(0.2)
                    ? random.pick([domain.lowerBound, domain.upperBound])
                    : Int32(random.int(Int(domain.lowerBound)...Int(domain.upperBound)))
            }
            if random.chance(0.01) { return .range(min: nil, max: nil) }
            if random.chance(0.01) { return .range(min: domain.upperBound, max: domain.lowerBound) }
            switch random.int(0...3) {
            case 0: return .range(min: bound(), max: nil)
            case 1: return .range(min: nil, max: bound())
            default:
                let a = bound(), b = bound()
                return .range(min: min(a, b), max: max(a, b))
            }
        case .single:
            let top = Int(item.domain?.upperBound ?? 10)
            var codes = Set((0..<random.int(1...4)).map { _ in Int32(random.int(0...top)) })
            if random.chance(0.05) { codes.insert(random.pick([99, 70_000, -1])) }
            return .anyOf(codes.sorted())
        case .multi:
            let pool: [Int32] =
                item.storage == .integerArray
                ? BitsetTestWorld.communities
                : Array(1...(item.domain?.upperBound ?? 10))
            let codes = Set((0..<random.int(1...3)).map { _ in random.pick(pool) }).sorted()
            if random.chance(0.02) { return .allOf([]) }
            return random.chance(0.5) ? .anyOf(codes) : .allOf(codes)
        case .flag:
            return .flag(random.chance(0.5))
        case .recency:
            return .withinDays(random.chance(0.5) ? random.pick([1, 7, 30, 90, 365]) : Int32(random.int(1...365)))
        }
    }

    /// Filters owned by candidates (or by members outside the batch), conditions drawn from a small
    /// pool at times, so that shared anyOf lists occur.
    mutating func filters(_ count: Int, owners: [Int64]) -> [PreparedFilter] {
        let pool = (0..<20).map { _ in conditions() }
        return (0..<count).map { index in
            let conditions = random.chance(0.3) ? random.pick(pool) : self.conditions()
            let ownerId = random.chance(0.8) ? random.pick(owners) : -Int64(index) - 1
            let filter = SavedFilter(
                id: Int64(index) + 1, ownerId: ownerId, conditionsJSON: conditions.canonicalJSON,
                createdAt: BitsetTestWorld.now, updatedAt: BitsetTestWorld.now)
            return PreparedFilter(
                filter: filter, owner: FilterOwner(id: ownerId, status: 1, plan: 1),
                conditions: conditions)
        }
    }

    mutating func exclusions(filters: [PreparedFilter], profiles: [Profile]) -> MatchExclusions {
        var blocks: [(blocker: Int64, blocked: Int64)] = []
        var existing = Set<MatchPair>()
        for filter in filters where random.chance(0.3) {
            for _ in 0..<random.int(1...20) {
                let profile = random.pick(profiles).id
                if random.chance(0.3) {
                    blocks.append(random.chance(0.5) ? (filter.owner.id, profile) : (profile, filter.owner.id))
                } else {
                    existing.insert(MatchPair(filterId: filter.filter.id, profileId: profile))
                }
            }
        }
        return MatchExclusions(existing: existing, blocks: BlockSet(blocks))
    }
}

@Suite struct BitsetEngineTests {
    static let limits = [0, 1, 2, 5, 100, Int.max]

    static let engineVariants: [BitsetMatchEngine] = {
        var plain = BitsetMatchEngine.Options()
        var allDense = plain
        allDense.sparseDivisor = Int.max
        allDense.filtersPerBlock = 7
        var mostlySparse = plain
        mostlySparse.sparseDivisor = 2
        mostlySparse.sharedGroupBudgetBytes = 0
        mostlySparse.filtersPerBlock = 1
        var tinyBudget = plain
        tinyBudget.sharedGroupBudgetBytes = 300
        tinyBudget.filtersPerBlock = 33
        plain.filtersPerBlock = 512
        return [plain, allDense, mostlySparse, tinyBudget].map { BitsetMatchEngine(options: $0) }
    }()

    /// The reference answer with no limit; the answer at limit L is its first L ids.
    static func reference(
        _ filters: [PreparedFilter], _ batch: CandidateBatch, _ exclusions: MatchExclusions,
        clock: EvaluationClock = BitsetTestWorld.clock
    ) -> [FilterResult] {
        ReferenceMatchEngine().evaluate(
            filters, against: batch, limit: Int.max, clock: clock,
            exclusions: exclusions)
    }

    static func expectSame(
        _ engine: BitsetMatchEngine, _ filters: [PreparedFilter], _ batch: CandidateBatch,
        _ exclusions: MatchExclusions, _ unlimited: [FilterResult], label: String,
        clock: EvaluationClock = BitsetTestWorld.clock
    ) {
        for limit in limits {
            let results = engine.evaluate(
                filters, against: batch, limit: limit, clock: clock,
                exclusions: exclusions)
            #expect(results.count == filters.count)
            var mismatches = 0
            for (result, expected) in zip(results, unlimited) {
                let wanted = Array(expected.profileIds.prefix(limit))
                if result.filterId != expected.filterId || result.profileIds != wanted {
                    mismatches += 1
                    if mismatches <= 3 {
                        let filter = filters.first { $0.filter.id == expected.filterId }!
                        Issue.record(
                            """
                            \(label) limit \(limit) filter \(expected.filterId) \(filter.conditions.canonicalJSON): \
                            got \(result.profileIds.prefix(12)) (\(result.profileIds.count)), \
                            want \(wanted.prefix(12)) (\(wanted.count))
                            """)
                    }
                }
            }
            #expect(mismatches == 0, "\(label) limit \(limit)")
        }
    }

    /// 3 worlds × 2,000 profiles × 500 filters: 3,000,000 (profile, filter) pairs, each answer compared
    /// at six limits and under four engine configurations.
    @Test(arguments: [UInt64(1), 2, 3])
    func matchesTheReferenceEngine(seed: UInt64) {
        var world = BitsetTestWorld(seed: seed)
        let profiles = world.profiles(2_000)
        let batch = CandidateBatch(profiles)
        let filters = world.filters(500, owners: profiles.map(\.id))
        // The last world has no recorded pair nor block (only the owner is skipped).
        let exclusions =
            seed == 3
            ? MatchExclusions(existing: [], blocks: .none)
            : world.exclusions(filters: filters, profiles: profiles)
        let unlimited = Self.reference(filters, batch, exclusions)
        #expect(unlimited.contains { !$0.profileIds.isEmpty })
        #expect(unlimited.contains { $0.profileIds.isEmpty })
        for (variant, engine) in Self.engineVariants.enumerated() {
            Self.expectSame(engine, filters, batch, exclusions, unlimited, label: "seed \(seed) variant \(variant)")
        }
    }

    /// The same worlds at other clocks: the bitset engine's per-day age cache and its recency thresholds
    /// against the reference on a leap day, on the day after 28 February in a common year (a 29 February
    /// birthday ages then), at Tokyo's midnight (15:00 UTC, the run's date changes there), and in other zones.
    @Test(arguments: [
        ("2028-02-29T03:00:00Z", "Asia/Tokyo"), ("2027-03-01T00:00:00Z", "Asia/Tokyo"),
        ("2026-02-28T14:59:59.999999Z", "Asia/Tokyo"), ("2026-02-28T15:00:00Z", "Asia/Tokyo"),
        ("2026-03-01T04:59:59Z", "America/New_York"), ("2026-03-01T12:00:00Z", "UTC"),
    ])
    func matchesTheReferenceEngineAtOtherClocks(now: String, zone: String) throws {
        let instant = try #require(Timestamp(iso8601: now))
        let timeZone = try #require(TimeZone(identifier: zone))
        let clock = EvaluationClock(now: instant, timeZone: timeZone)
        var world = BitsetTestWorld(seed: 4)
        let profiles = world.profiles(1_500)
        let batch = CandidateBatch(profiles)
        let filters = world.filters(400, owners: profiles.map(\.id))
        let exclusions = world.exclusions(filters: filters, profiles: profiles)
        let unlimited = Self.reference(filters, batch, exclusions, clock: clock)
        #expect(unlimited.contains { !$0.profileIds.isEmpty })
        for (variant, engine) in Self.engineVariants.enumerated() {
            Self.expectSame(
                engine, filters, batch, exclusions, unlimited, label: "\(now) \(zone) variant \(variant)", clock: clock)
        }
    }

    /// Batches around word and chunk boundaries, and tiny ones.
    @Test(arguments: [1, 2, 63, 64, 65, 127, 4_095, 4_096, 4_097, 4_160])
    func matchesTheReferenceEngineAtBoundaries(size: Int) {
        var world = BitsetTestWorld(seed: UInt64(size) &* 7919)
        let profiles = world.profiles(size)
        let batch = CandidateBatch(profiles)
        let filters = world.filters(size > 1_000 ? 60 : 150, owners: profiles.map(\.id))
        let exclusions = world.exclusions(filters: filters, profiles: profiles)
        let unlimited = Self.reference(filters, batch, exclusions)
        for (variant, engine) in Self.engineVariants.enumerated() {
            Self.expectSame(engine, filters, batch, exclusions, unlimited, label: "size \(size) variant \(variant)")
        }
    }

    @Test func countsEveryCandidateSatisfyingTheConditions() {
        var world = BitsetTestWorld(seed: 42)
        let profiles = world.profiles(1_500)
        let batch = CandidateBatch(profiles)
        let filters = world.filters(300, owners: profiles.map(\.id))
        let exclusions = world.exclusions(filters: filters, profiles: profiles)
        let candidates = batch.profiles
        for engine in Self.engineVariants {
            let counted = engine.evaluateCounting(
                filters, against: batch, limit: 3, clock: BitsetTestWorld.clock,
                exclusions: exclusions)
            let expectedResults = ReferenceMatchEngine().evaluate(
                filters, against: batch, limit: 3,
                clock: BitsetTestWorld.clock, exclusions: exclusions)
            #expect(counted.results == expectedResults)
            #expect(counted.matchCounts.count == filters.count)
            for (filter, count) in zip(filters, counted.matchCounts) {
                let expected = candidates.filter {
                    ReferenceEvaluator.satisfies($0, filter.conditions, clock: BitsetTestWorld.clock)
                }.count
                #expect(count == expected, "filter \(filter.filter.id) \(filter.conditions.canonicalJSON)")
            }
        }
    }

    @Test func ownerBlocksAndRecordedPairsAreSkippedWithoutShorteningTheAnswer() throws {
        let now = BitsetTestWorld.now
        let profiles = (1...10).map { id in
            Profile.make(
                id: Int64(id), lastLoginAt: now.adding(microseconds: -Int64(id)), createdAt: now,
                ["gender": .code(2)])
        }
        let conditions = try FilterConditions.decode(json: #"{"gender": {"anyOf": [2]}}"#)
        let filter = PreparedFilter(
            filter: SavedFilter(id: 7, ownerId: 1, conditionsJSON: "{}", createdAt: now, updatedAt: now),
            owner: FilterOwner(id: 1, status: 1, plan: 0), conditions: conditions)
        let exclusions = MatchExclusions(
            existing: [MatchPair(filterId: 7, profileId: 3)],
            blocks: BlockSet([(blocker: 1, blocked: 2), (blocker: 4, blocked: 1)]))
        let results = BitsetMatchEngine().evaluate(
            [filter], against: CandidateBatch(profiles), limit: 3,
            clock: BitsetTestWorld.clock, exclusions: exclusions)
        #expect(results == [FilterResult(filterId: 7, profileIds: [5, 6, 7])])
    }

    /// An engine with only the single limit: the protocol's per-filter path (one call per distinct limit).
    struct SingleLimitEngine: MatchEngine {
        let base: BitsetMatchEngine
        func evaluate(
            _ filters: [PreparedFilter], against batch: CandidateBatch, limit: Int, clock: EvaluationClock,
            exclusions: MatchExclusions
        ) -> [FilterResult] {
            base.evaluate(filters, against: batch, limit: limit, clock: clock, exclusions: exclusions)
        }
    }

    /// A limit per filter answers, for each filter, what the single-limit path answers at its limit: the bitset
    /// engine in every configuration, the reference engine and the protocol's default, with limits 0 to
    /// `Int.max` mixed within blocks, and all-equal limits.
    @Test(arguments: [UInt64(11), 12])
    func perFilterLimitsAnswerAsEachLimitAlone(seed: UInt64) {
        var world = BitsetTestWorld(seed: seed)
        let profiles = world.profiles(5_000)
        let batch = CandidateBatch(profiles)
        let filters = world.filters(300, owners: profiles.map(\.id))
        let exclusions = world.exclusions(filters: filters, profiles: profiles)
        let choices = [0, 1, 2, 5, 100, 101, 3_000, Int.max]
        let mixed = filters.map { _ in world.random.pick(choices) }
        let clock = BitsetTestWorld.clock
        for limits in [mixed, Array(repeating: 7, count: filters.count)] {
            var expected = [FilterResult?](repeating: nil, count: filters.count)
            for limit in Set(limits) {
                let answers = BitsetMatchEngine().evaluate(
                    filters, against: batch, limit: limit, clock: clock, exclusions: exclusions)
                for (index, answer) in answers.enumerated() where limits[index] == limit { expected[index] = answer }
            }
            if limits == mixed { #expect(expected.contains { ($0?.profileIds.count ?? 0) > 101 }) }
            let engines: [(String, any MatchEngine)] =
                Self.engineVariants.enumerated().map { ("variant \($0.offset)", $0.element) } + [
                    ("reference", ReferenceMatchEngine()), ("default", SingleLimitEngine(base: BitsetMatchEngine())),
                ]
            for (label, engine) in engines {
                let results = engine.evaluate(
                    filters, against: batch, limits: limits, clock: clock, exclusions: exclusions)
                #expect(results == expected.map { $0! }, "seed \(seed) \(label)")
            }
        }
    }

    @Test func noFiltersOrNoCandidates() {
        var world = BitsetTestWorld(seed: 9)
        let profiles = world.profiles(10)
        let filters = world.filters(5, owners: profiles.map(\.id))
        let engine = BitsetMatchEngine()
        #expect(
            engine.evaluate(
                [], against: CandidateBatch(profiles), limit: 10, clock: BitsetTestWorld.clock,
                exclusions: MatchExclusions(existing: [], blocks: .none)
            ).isEmpty)
        let empty = engine.evaluate(
            filters, against: CandidateBatch([Profile]()), limit: 10, clock: BitsetTestWorld.clock,
            exclusions: MatchExclusions(existing: [], blocks: .none))
        #expect(empty.map(\.filterId) == filters.map(\.filter.id))
        #expect(empty.allSatisfy { $0.profileIds.isEmpty })
    }
}

@Suite struct ProfileColumnsTests {
    @Test func profilesRoundTripExactly() {
        var world = BitsetTestWorld(seed: 5)
        let profiles = world.profiles(3_000)
        let columns = ProfileColumns(profiles)
        #expect(columns.count == profiles.count)
        #expect(columns.ids == profiles.map(\.id))
        for (row, profile) in profiles.enumerated() {
            #expect(columns.profile(at: row) == profile)
        }
        #expect(columns.lastLoginAt == profiles.map(\.lastLoginAt.microsecondsSinceEpoch))
    }

    @Test func theBuilderTakesFieldsInAnyOrderAndSetsElementByElement() {
        var world = BitsetTestWorld(seed: 6)
        let profiles = world.profiles(500)
        var builder = ProfileColumns.Builder(reservingCapacity: 10)
        for profile in profiles {
            builder.beginRow(id: profile.id, status: profile.status, plan: profile.plan)
            for item in MasterItem.all.reversed() {
                switch profile.values[item.index] {
                case .code(let code): builder.appendCode(code, item: item.index)
                case .integer(let value): builder.appendInteger(value, item: item.index)
                case .date(let date): builder.appendDate(days: date?.daysSinceEpoch, item: item.index)
                case .codes(let codes):
                    for code in codes { builder.appendCodeElement(code, item: item.index) }
                    builder.endCodes(item: item.index)
                case .flag(let flag): builder.appendFlag(flag, item: item.index)
                case .timestamp(let stamp):
                    builder.appendTimestamp(microseconds: stamp.microsecondsSinceEpoch, item: item.index)
                }
            }
        }
        #expect(builder.count == profiles.count)
        let columns = builder.build()
        #expect((0..<columns.count).map(columns.profile(at:)) == profiles)
        #expect(ProfileColumns.Builder().build().count == 0)
        #expect(ProfileColumns.empty.count == 0)
    }

    @Test func selectingRowsKeepsTheirProfiles() {
        var world = BitsetTestWorld(seed: 7)
        let profiles = world.profiles(700)
        let columns = ProfileColumns(profiles)
        let rows = [699, 0, 5, 5, 64, 63, 65, 128, 300]
        let selected = columns.selecting(rows: rows)
        #expect((0..<selected.count).map(selected.profile(at:)) == rows.map { profiles[$0] })
        #expect(columns.selecting(rows: []).count == 0)
    }

    @Test func theCapOrderIsLatestLoginThenSmallestIdOfActiveProfiles() {
        var world = BitsetTestWorld(seed: 8)
        let profiles = world.profiles(2_000)
        let expected = profiles.filter(\.isActive).sorted(by: CandidateBatch.capOrder)
        let columns = ProfileColumns(profiles)
        #expect(columns.activeRowsInCapOrder().map { profiles[$0] } == expected)
        let batch = CandidateBatch(columns)
        #expect(batch.profiles == expected)
        #expect(batch.ids == expected.map(\.id))
        #expect(CandidateBatch(profiles).profiles == expected)
        #expect(batch.columns.isActiveInCapOrder)
        #expect(!columns.isActiveInCapOrder)
        // Already in order: kept as is.
        #expect(CandidateBatch(batch.columns).profiles == expected)
    }
}
