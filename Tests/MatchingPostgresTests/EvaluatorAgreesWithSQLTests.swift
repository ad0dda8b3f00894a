import Chronology
import DeterministicRandom
import Foundation
import Matching
import MatchingPostgres
import PostgresClient
import PostgresTestSupport
import Testing

/// The reference evaluator held against a second formulation: PostgreSQL evaluating the same conditions
/// as SQL (`FilterConditions.sqlPredicate()`) over the same rows. Profiles and filters are generated from
/// the catalogue's kinds, storages and domains alone, so every item (and any item added later) is covered,
/// with values at and beyond the bounds, unanswered values, leap-day births and clocks at the Asia/Tokyo
/// date change.
@Suite struct EvaluatorAgreesWithSQLTests {
    static let profileCount = 1_000
    static let filterCount = 120  // 120,000 (profile, filter) pairs

    @Test func everyPairAgrees() throws {
        var random = SplitMix64(seed: 20261122)
        let base = try #require(Timestamp(iso8601: "2026-02-28T14:59:59.999999Z"))
        let clocks = [base, base.adding(microseconds: 1), base.adding(days: 1), base.adding(days: 366)]
        let profiles = (1...Int64(Self.profileCount)).map { Self.randomProfile($0, clocks: clocks, &random) }
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        try AppTableWriter(connection: connection).insertProfiles(profiles, updatedAt: base)

        var pairs = 0
        var disagreements: [String] = []
        for f in 0..<Self.filterCount {
            let json = Self.randomConditions(&random)
            let conditions = try FilterConditions.decode(json: json)
            let clock = EvaluationClock(now: clocks[f % clocks.count])
            let sql = try connection.query(
                "SELECT id FROM profiles WHERE \(conditions.sqlPredicate())",
                [.timestamptz(clock.now), .date(clock.runDate)])
            let bySQL = Set(try sql.rows.map { try $0.int64(0) })
            for profile in profiles {
                pairs += 1
                let byEvaluator = ReferenceEvaluator.satisfies(profile, conditions, clock: clock)
                if byEvaluator != bySQL.contains(profile.id), disagreements.count < 10 {
                    disagreements.append("profile \(profile.id) \(json) at \(clock.now): evaluator \(byEvaluator)")
                }
            }
        }
        #expect(pairs == Self.profileCount * Self.filterCount)
        #expect(disagreements.isEmpty, "\(disagreements.joined(separator: "\n"))")
    }

    /// `withinDays` values whose exact thresholds profiles are placed on.
    static let boundaryDays = [1, 7, 30, 365]

    static func randomProfile(_ id: Int64, clocks: [Timestamp], _ random: inout SplitMix64) -> Profile {
        let now = clocks[random.next(clocks.count)]
        let values = MasterItem.all.map { item -> ItemValue in
            let domain = item.domain ?? 0...1
            switch item.storage {
            case .smallint:
                return .code(Int16(random.next(6) == 0 ? 0 : near(domain, &random)))
            case .nullableSmallint:
                return .integer(random.next(6) == 0 ? nil : near(domain, &random))
            case .nullableDate:
                if random.next(8) == 0 { return .date(nil) }
                if random.next(6) == 0 {  // born on 29 February of a leap year
                    return .date(CalendarDate(year: 1960 + 4 * random.next(12), month: 2, day: 29))
                }
                if random.next(2) == 0 {  // a birthday on, or a day either side of, a run date: age boundaries
                    let runDate = now.calendarDate(in: .tokyo).components
                    let born = CalendarDate(
                        year: runDate.year - 17 - random.next(105), month: runDate.month,
                        day: min(runDate.day, 28))
                    return .date(born?.adding(days: random.next(3) - 1))
                }
                return .date(now.calendarDate(in: .tokyo).adding(days: -(random.next(125 * 366))))
            case .smallintArray, .integerArray:
                let count = random.next(5)
                return .codes(Array(Set((0..<count).map { _ in near(domain.clamped(to: 1...60), &random) })).sorted())
            case .boolean:
                return .flag(random.next(2) == 0)
            case .timestamptz:
                if random.next(2) == 0 {  // exactly on a withinDays threshold, or one microsecond either side
                    let days = boundaryDays[random.next(boundaryDays.count)]
                    return .timestamp(now.adding(days: -days).adding(microseconds: Int64(random.next(3)) - 1))
                }
                return .timestamp(now.adding(microseconds: -Int64(random.next(400 * 24)) * 3_600_000_000))
            }
        }
        return Profile(id: id, status: 1, plan: 0, values: values)
    }

    /// A value near the domain: mostly inside, sometimes at or just beyond a bound.
    static func near(_ domain: ClosedRange<Int32>, _ random: inout SplitMix64) -> Int32 {
        switch random.next(10) {
        case 0: return domain.lowerBound
        case 1: return domain.upperBound
        case 2: return domain.lowerBound - 1
        case 3: return domain.upperBound &+ 1
        default:
            let span = Int(min(Int64(domain.upperBound) - Int64(domain.lowerBound), 200))
            return domain.lowerBound + Int32(random.next(span + 1))
        }
    }

    /// 1 to 6 valid conditions over random items, every form of every kind.
    static func randomConditions(_ random: inout SplitMix64) -> String {
        var chosen: [String: String] = [:]
        for _ in 0..<(1 + random.next(6)) {
            let item = MasterItem.all[random.next(MasterItem.all.count)]
            let domain = item.domain ?? 1...1
            func code() -> Int32 {
                let span = Int(min(Int64(domain.upperBound) - Int64(domain.lowerBound), 60))
                return domain.lowerBound + Int32(random.next(span + 1))
            }
            func codes(allowZero: Bool) -> String {
                let list = (0..<(1 + random.next(4))).map { _ in allowZero && random.next(5) == 0 ? 0 : code() }
                return "[" + list.map(String.init).joined(separator: ", ") + "]"
            }
            let condition: String
            switch item.kind {
            case .range:
                let a = code(), b = code()
                switch random.next(3) {
                case 0: condition = "{\"min\": \(min(a, b)), \"max\": \(max(a, b))}"
                case 1: condition = "{\"min\": \(a)}"
                default: condition = "{\"max\": \(a)}"
                }
            case .single:
                condition = "{\"anyOf\": \(codes(allowZero: item.key != "gender"))}"
            case .multi:
                condition =
                    random.next(2) == 0
                    ? "{\"anyOf\": \(codes(allowZero: false))}" : "{\"allOf\": \(codes(allowZero: false))}"
            case .flag:
                condition = random.next(2) == 0 ? "true" : "false"
            case .recency:
                let days = random.next(2) == 0 ? boundaryDays[random.next(boundaryDays.count)] : 1 + random.next(365)
                condition = "{\"withinDays\": \(days)}"
            }
            chosen[item.key] = condition
        }
        return "{" + chosen.keys.sorted().map { "\"\($0)\": \(chosen[$0]!)" }.joined(separator: ", ") + "}"
    }
}
