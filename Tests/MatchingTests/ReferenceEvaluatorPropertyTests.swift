import Chronology
import DeterministicRandom
import Foundation
import Testing

@testable import Matching

// MARK: - A second, independent formulation of the filter language

/// A profile as plain fields, written from master-items.md without the catalogue code.
private struct PlainProfile {
    var id: Int64
    var status: Int16
    var gender: Int16
    var birthDate: CalendarDate?
    var heightCm: Int32?
    var incomeBand: Int32?
    var singles: [String: Int16]
    var languages: [Int32]
    var personality: [Int32]
    var communities: [Int32]
    var hasPhoto: Bool
    var hasIntroduction: Bool
    var verified: Bool
    var lastLoginMicros: Int64
    var createdMicros: Int64
}

private enum PlainSetCondition {
    case any([Int32])
    case all([Int32])
}

private struct PlainRange {
    var min: Int32?
    var max: Int32?
}

/// A filter as plain optional fields, one per item.
private struct PlainFilter {
    var gender: [Int32]?
    var age: PlainRange?
    var height: PlainRange?
    var income: PlainRange?
    var singles: [String: [Int32]] = [:]
    var languages: PlainSetCondition?
    var personality: PlainSetCondition?
    var communities: PlainSetCondition?
    var hasPhoto: Bool?
    var hasIntroduction: Bool?
    var verified: Bool?
    var lastLoginDays: Int32?
    var registeredDays: Int32?
}

/// master-items.md's single-choice items other than gender, with their codes.
private let plainSingles: [(key: String, codes: ClosedRange<Int32>)] = [
    ("residence", 1...48), ("hometown", 1...48), ("body_type", 1...7), ("blood_type", 1...4),
    ("education", 1...5), ("occupation", 1...60), ("holiday", 1...4), ("smoking", 1...6), ("drinking", 1...3),
    ("marital_status", 1...3), ("has_children", 1...3), ("marriage_intent", 1...5), ("wants_children", 1...4),
    ("housework", 1...5), ("meeting_preference", 1...3), ("date_cost", 1...7), ("sibling_order", 1...5),
    ("housemate", 1...5),
]

private let microsPerDay: Int64 = 86_400_000_000

private func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
    let q = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
}

/// Year, month, day of a day number (days since 1970-01-01), through Foundation's Gregorian calendar.
private func civil(_ days: Int64) -> (year: Int, month: Int, day: Int) {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(secondsFromGMT: 0) ?? .gmt
    let parts = calendar.dateComponents(
        [.year, .month, .day], from: Date(timeIntervalSince1970: Double(days) * 86_400))
    return (parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
}

/// The Tokyo calendar day of an instant: Japan is UTC+9 with no daylight saving since 1951.
private func tokyoDay(_ micros: Int64) -> Int64 {
    floorDivide(micros + 9 * 3_600_000_000, microsPerDay)
}

/// Full years from birth to the day, as PostgreSQL's age(): a year is complete on the same month and day.
private func plainAge(birthDay: Int64, onDay day: Int64) -> Int32 {
    let birth = civil(birthDay), on = civil(day)
    var years = on.year - birth.year
    if (on.month, on.day) < (birth.month, birth.day) { years -= 1 }
    return Int32(years)
}

/// Each present condition of `filter` and whether `profile` satisfies it, keyed by item key.
private func plainOutcomes(
    _ profile: PlainProfile, _ filter: PlainFilter, nowMicros: Int64, ownerPaid: Bool
) -> [String: Bool] {
    func inRange(_ value: Int32?, _ range: PlainRange) -> Bool {
        guard let value else { return false }
        if let min = range.min, value < min { return false }
        if let max = range.max, value > max { return false }
        return true
    }
    func holds(_ held: [Int32], _ condition: PlainSetCondition) -> Bool {
        switch condition {
        case .any(let listed): listed.contains { held.contains($0) }
        case .all(let listed): listed.allSatisfy { held.contains($0) }
        }
    }
    var outcomes: [String: Bool] = [:]
    if let listed = filter.gender { outcomes["gender"] = listed.contains(Int32(profile.gender)) }
    if let range = filter.age {
        // A birth after the day, or more than 120 years before it, is impossible: unanswered (runs.md, "Eligibility").
        let today = tokyoDay(nowMicros)
        let age = profile.birthDate.flatMap {
            Int64($0.daysSinceEpoch) <= today ? plainAge(birthDay: Int64($0.daysSinceEpoch), onDay: today) : nil
        }.flatMap { $0 <= 120 ? $0 : nil }
        outcomes["age"] = inRange(age, range)
    }
    if let range = filter.height { outcomes["height"] = inRange(profile.heightCm, range) }
    if let range = filter.income { outcomes["income"] = inRange(profile.incomeBand, range) }
    for (key, listed) in filter.singles { outcomes[key] = listed.contains(Int32(profile.singles[key] ?? 0)) }
    if let condition = filter.languages { outcomes["languages"] = holds(profile.languages, condition) }
    if let condition = filter.personality { outcomes["personality"] = holds(profile.personality, condition) }
    if let condition = filter.communities, ownerPaid { outcomes["communities"] = holds(profile.communities, condition) }
    if let wanted = filter.hasPhoto { outcomes["has_photo"] = profile.hasPhoto == wanted }
    if let wanted = filter.hasIntroduction { outcomes["has_introduction"] = profile.hasIntroduction == wanted }
    if let wanted = filter.verified { outcomes["verified"] = profile.verified == wanted }
    if let days = filter.lastLoginDays {
        outcomes["last_login"] = profile.lastLoginMicros >= nowMicros - Int64(days) * microsPerDay
    }
    if let days = filter.registeredDays {
        outcomes["registered"] = profile.createdMicros >= nowMicros - Int64(days) * microsPerDay
    }
    return outcomes
}

// MARK: - Generation, near the bounds

private struct Generator {
    var random: SplitMix64

    mutating func chance(_ probability: Double) -> Bool {
        Double.random(in: 0..<1, using: &random) < probability
    }

    mutating func int(_ range: ClosedRange<Int32>) -> Int32 {
        Int32.random(in: range, using: &random)
    }

    mutating func int64(_ range: ClosedRange<Int64>) -> Int64 {
        Int64.random(in: range, using: &random)
    }

    mutating func pick<T>(_ choices: [T]) -> T {
        choices[Int.random(in: 0..<choices.count, using: &random)]
    }

    /// A clock between 2025 and 2029, often on the leap-day and Tokyo-midnight edges.
    mutating func nowMicros() -> Int64 {
        let firstDay: Int64 = 20089  // 2025-01-01
        var day = int64(firstDay...(firstDay + 5 * 365))
        if chance(0.15) {
            // 28 February, 29 February (2028) or 1 March, in Tokyo.
            let year = pick([2025, 2026, 2027, 2028, 2029])
            let month = pick([2, 2, 3])
            let dayOfMonth = month == 3 ? 1 : pick(year == 2028 ? [28, 29] : [28])
            day = Int64(CalendarDate(year: year, month: month, day: dayOfMonth)?.daysSinceEpoch ?? 0)
        }
        // The Tokyo day `day` runs from (day - 1) 15:00 UTC to day 15:00 UTC.
        let tokyoMidnight = day * microsPerDay - 9 * 3_600_000_000
        let offset = chance(0.3) ? pick([0, 1, microsPerDay - 1, microsPerDay - 2]) : int64(0...(microsPerDay - 1))
        return tokyoMidnight + offset
    }

    mutating func rangeValue(near bounds: ClosedRange<Int32>, outside: [Int32]) -> Int32? {
        if chance(0.12) { return nil }
        if chance(0.35) {
            return pick(
                [
                    bounds.lowerBound - 1, bounds.lowerBound, bounds.lowerBound + 1,
                    bounds.upperBound - 1, bounds.upperBound, bounds.upperBound + 1,
                ] + outside)
        }
        return int(bounds)
    }

    mutating func profile(nowMicros: Int64) -> (PlainProfile, loginDays: Int32, createdDays: Int32) {
        let runDay = tokyoDay(nowMicros)
        var birthDate: CalendarDate?
        if !chance(0.1) {
            if chance(0.08) {
                birthDate = CalendarDate(year: pick([1960, 1988, 1996, 2000, 2004, 2008]), month: 2, day: 29)
            } else {
                let run = civil(runDay)
                let years = chance(0.5) ? pick([17, 18, 19, 25, 30, 45, 119, 120, 121]) : Int(int(0...125))
                let sameDay =
                    CalendarDate(year: run.year - years, month: run.month, day: run.day)
                    ?? CalendarDate(year: run.year - years, month: 3, day: 1)
                let shift = chance(0.6) ? pick([-1, 0, 0, 1]) : Int(int(-400...400))
                birthDate = sameDay?.adding(days: shift)
            }
        }
        var singles: [String: Int16] = [:]
        for (key, codes) in plainSingles {
            singles[key] = chance(0.2) ? 0 : Int16(chance(0.04) ? codes.upperBound + 1 : int(codes))
        }
        let loginDays = chance(0.5) ? pick([1, 7, 30, 365]) : int(1...400)
        let createdDays = chance(0.5) ? pick([1, 7, 30, 365]) : int(1...400)
        func stamp(_ days: Int32) -> Int64 {
            nowMicros - Int64(days) * microsPerDay + pick([0, 0, -1, 1, int64(-microsPerDay...microsPerDay)])
        }
        let profile = PlainProfile(
            id: int64(1...60),
            status: chance(0.85) ? 1 : Int16(int(0...5)),
            gender: chance(0.04) ? 0 : Int16(int(1...2)),
            birthDate: birthDate,
            heightCm: rangeValue(near: 120...230, outside: [100, 250]),
            incomeBand: rangeValue(near: 1...9, outside: [0, 12]),
            singles: singles,
            languages: (0..<int(0...4)).map { _ in int(1...30) },
            personality: (0..<int(0...5)).map { _ in int(1...40) },
            communities: (0..<int(0...4)).map { _ in pick([1, 2, 3, 4, 5, 100, 2_147_483_647]) },
            hasPhoto: chance(0.5), hasIntroduction: chance(0.5), verified: chance(0.5),
            lastLoginMicros: stamp(loginDays), createdMicros: stamp(createdDays))
        return (profile, loginDays, createdDays)
    }

    /// A range condition in `domain` whose bounds sit near the domain's edges and near `value`.
    mutating func range(domain: ClosedRange<Int32>, near value: Int32?) -> PlainRange {
        func bound(_ generator: inout Generator) -> Int32 {
            let v = value ?? generator.int(domain)
            let candidate = generator.pick([
                domain.lowerBound, domain.lowerBound + 1, domain.upperBound - 1,
                domain.upperBound, v - 1, v, v, v + 1, generator.int(domain),
            ])
            return min(max(candidate, domain.lowerBound), domain.upperBound)
        }
        switch int(0...2) {
        case 0: return PlainRange(min: bound(&self), max: nil)
        case 1: return PlainRange(min: nil, max: bound(&self))
        default:
            let a = bound(&self), b = bound(&self)
            return PlainRange(min: min(a, b), max: max(a, b))
        }
    }

    mutating func codes(domain: ClosedRange<Int32>, zero: Bool, including held: [Int32]) -> [Int32] {
        (0..<int(1...3)).map { _ in
            if !held.isEmpty, chance(0.5) { return pick(held) }
            return zero && chance(0.15) ? 0 : int(domain)
        }
    }

    mutating func setCondition(domain: ClosedRange<Int32>, held: [Int32], pool: [Int32]? = nil) -> PlainSetCondition {
        let listed = (0..<int(1...3)).map { _ in
            !held.isEmpty && chance(0.6) ? pick(held) : (pool.map { pick($0) } ?? int(domain))
        }
        return chance(0.5) ? .any(listed) : .all(listed)
    }

    mutating func days(near days: Int32) -> Int32 {
        min(max(pick([days, days, days - 1, days + 1, int(1...365)]), 1), 365)
    }

    mutating func filter(
        for profile: PlainProfile, nowMicros: Int64, loginDays: Int32, createdDays: Int32
    ) -> PlainFilter {
        var filter = PlainFilter()
        let keys =
            [
                "gender", "age", "height", "income", "languages", "personality", "communities", "has_photo",
                "has_introduction", "verified", "last_login", "registered",
            ] + plainSingles.map(\.key)
        let count = pick([1, 1, 2, 2, 3, 5])
        for key in (0..<count).map({ _ in pick(keys) }) {
            switch key {
            case "gender":
                filter.gender = (0..<int(1...2)).map { _ in
                    chance(0.6) && profile.gender != 0 ? Int32(profile.gender) : int(1...2)
                }
            case "age":
                let age = profile.birthDate.map {
                    plainAge(birthDay: Int64($0.daysSinceEpoch), onDay: tokyoDay(nowMicros))
                }
                filter.age = range(domain: 18...120, near: age)
            case "height": filter.height = range(domain: 120...230, near: profile.heightCm)
            case "income": filter.income = range(domain: 1...9, near: profile.incomeBand)
            case "languages": filter.languages = setCondition(domain: 1...30, held: profile.languages)
            case "personality": filter.personality = setCondition(domain: 1...40, held: profile.personality)
            case "communities":
                filter.communities = setCondition(
                    domain: 1...Int32.max, held: profile.communities, pool: [1, 2, 3, 6, 100, 2_147_483_647])
            case "has_photo": filter.hasPhoto = chance(0.5)
            case "has_introduction": filter.hasIntroduction = chance(0.5)
            case "verified": filter.verified = chance(0.5)
            case "last_login": filter.lastLoginDays = days(near: loginDays)
            case "registered": filter.registeredDays = days(near: createdDays)
            default:
                let codes = plainSingles.first { $0.key == key }?.codes ?? 1...1
                let held = profile.singles[key] ?? 0
                filter.singles[key] = self.codes(
                    domain: codes, zero: true, including: [Int32(held)].filter { $0 == 0 || codes.contains($0) })
            }
        }
        return filter
    }

    // MARK: JSON, written by hand with varied spelling

    mutating func integer(_ value: Int32) -> String {
        chance(0.05) ? "\(value)e0" : chance(0.03) ? "\(value)E+0" : "\(value)"
    }

    mutating func list(_ values: [Int32]) -> String {
        "[" + values.map { integer($0) }.joined(separator: pick([",", ", ", " ,\n"])) + "]"
    }

    mutating func json(_ filter: PlainFilter) -> String {
        var members: [(String, String)] = []
        func rangeJSON(_ range: PlainRange, _ generator: inout Generator) -> String {
            var parts: [String] = []
            if let min = range.min { parts.append("\"min\": " + generator.integer(min)) }
            if let max = range.max { parts.append("\"max\": " + generator.integer(max)) }
            if generator.chance(0.5) { parts.reverse() }
            return "{" + parts.joined(separator: ", ") + "}"
        }
        func setJSON(_ condition: PlainSetCondition, _ generator: inout Generator) -> String {
            switch condition {
            case .any(let listed): "{\"anyOf\": \(generator.list(listed))}"
            case .all(let listed): "{\"allOf\": \(generator.list(listed))}"
            }
        }
        if let listed = filter.gender { members.append(("gender", "{\"anyOf\": \(list(listed))}")) }
        if let range = filter.age { members.append(("age", rangeJSON(range, &self))) }
        if let range = filter.height { members.append(("height", rangeJSON(range, &self))) }
        if let range = filter.income { members.append(("income", rangeJSON(range, &self))) }
        for (key, listed) in filter.singles.sorted(by: { $0.key < $1.key }) {
            members.append((key, "{\"anyOf\": \(list(listed))}"))
        }
        if let condition = filter.languages { members.append(("languages", setJSON(condition, &self))) }
        if let condition = filter.personality { members.append(("personality", setJSON(condition, &self))) }
        if let condition = filter.communities { members.append(("communities", setJSON(condition, &self))) }
        if let wanted = filter.hasPhoto { members.append(("has_photo", "\(wanted)")) }
        if let wanted = filter.hasIntroduction { members.append(("has_introduction", "\(wanted)")) }
        if let wanted = filter.verified { members.append(("verified", "\(wanted)")) }
        if let days = filter.lastLoginDays { members.append(("last_login", "{\"withinDays\": \(integer(days))}")) }
        if let days = filter.registeredDays { members.append(("registered", "{\"withinDays\": \(integer(days))}")) }
        members.shuffle(using: &random)
        if let first = members.first, chance(0.05) {
            // An earlier, invalid duplicate: the last value of a name wins, as in jsonb.
            members.insert((first.0, "{\"bogus\": 1}"), at: 0)
        }
        return "{" + members.map { "\"\($0.0)\": \($0.1)" }.joined(separator: pick([",", ", ", ",\n  "])) + "}"
    }
}

private func makeProfile(_ plain: PlainProfile, plan: Int16) -> Profile {
    var values: [String: ItemValue] = [
        "gender": .code(plain.gender),
        "age": .date(plain.birthDate),
        "height": .integer(plain.heightCm),
        "income": .integer(plain.incomeBand),
        "languages": .codes(plain.languages),
        "personality": .codes(plain.personality),
        "communities": .codes(plain.communities),
        "has_photo": .flag(plain.hasPhoto),
        "has_introduction": .flag(plain.hasIntroduction),
        "verified": .flag(plain.verified),
    ]
    for (key, code) in plain.singles { values[key] = .code(code) }
    return Profile.make(
        id: plain.id, status: plain.status, plan: plan,
        lastLoginAt: Timestamp(microsecondsSinceEpoch: plain.lastLoginMicros),
        createdAt: Timestamp(microsecondsSinceEpoch: plain.createdMicros), values)
}

// MARK: - The property

@Suite struct ReferenceEvaluatorPropertyTests {
    /// 100,000 random (profile, valid filter) pairs: the reference evaluator agrees with the plain
    /// formulation on every one, and the generator reaches every item both passing and deciding a failure.
    @Test func agreesWithAnIndependentFormulation() throws {
        var generator = Generator(random: SplitMix64(seed: 20_260_301))
        var mismatches: [String] = []
        var passes: [String: Int] = [:]
        var decisiveFailures: [String: Int] = [:]
        var forms: Set<String> = []
        var matched = 0
        for pair in 0..<100_000 {
            let now = generator.nowMicros()
            let (plain, loginDays, createdDays) = generator.profile(nowMicros: now)
            let plainFilter = generator.filter(
                for: plain, nowMicros: now, loginDays: loginDays, createdDays: createdDays)
            let json = generator.json(plainFilter)
            let ownerPaid = generator.chance(0.5)
            let conditions: FilterConditions
            do {
                conditions = try FilterConditions.decode(json: json)
            } catch {
                Issue.record("pair \(pair): valid filter rejected: \(error) in \(json)")
                continue
            }
            let clock = EvaluationClock(now: Timestamp(microsecondsSinceEpoch: now))
            let profile = makeProfile(plain, plan: Int16(generator.int(0...1)))
            let effective = conditions.effective(forOwnerPlan: ownerPaid ? 1 : 0).conditions
            let actual = ReferenceEvaluator.satisfies(profile, effective, clock: clock)
            let outcomes = plainOutcomes(plain, plainFilter, nowMicros: now, ownerPaid: ownerPaid)
            let expected = outcomes.values.allSatisfy { $0 }
            if actual != expected, mismatches.count < 10 {
                mismatches.append(
                    "pair \(pair) at \(clock.now) (\(clock.runDate)): evaluator \(actual), plain \(expected): \(json) vs \(plain)"
                )
            }
            if actual { matched += 1 }
            let failing = outcomes.filter { !$0.value }.map(\.key)
            for (key, passed) in outcomes where passed { passes[key, default: 0] += 1 }
            if failing.count == 1 { decisiveFailures[failing[0], default: 0] += 1 }
            for condition in conditions.conditions {
                forms.insert(
                    "\(condition.item.kind) "
                        + {
                            switch condition.form {
                            case .range(let min, let max): min == nil ? "max" : max == nil ? "min" : "min max"
                            case .anyOf(let codes): codes.contains(0) ? "anyOf with 0" : "anyOf"
                            case .allOf(let codes): codes.count == 1 ? "allOf one" : "allOf"
                            case .flag(let wanted): "\(wanted)"
                            case .withinDays: "withinDays"
                            }
                        }())
            }
            if pair % 10 == 0 {
                #expect(try FilterConditions.decode(json: conditions.canonicalJSON) == conditions, "\(json)")
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.joined(separator: "\n"))")
        #expect(matched > 10_000, "only \(matched) pairs matched")
        for item in MasterItem.all {
            #expect(passes[item.key, default: 0] > 100, "\(item.key) passed \(passes[item.key, default: 0]) times")
            #expect(
                decisiveFailures[item.key, default: 0] > 100,
                "\(item.key) alone failed \(decisiveFailures[item.key, default: 0]) times")
        }
        #expect(
            forms == [
                "range min", "range max", "range min max", "single anyOf", "single anyOf with 0", "multi anyOf",
                "multi allOf", "multi allOf one", "flag true", "flag false", "recency withinDays",
            ])
    }

    /// The whole eligibility rule, and `explain`, agree with the plain rule on random pairs.
    @Test func matchesAndExplainAgreeWithThePlainRule() throws {
        var generator = Generator(random: SplitMix64(seed: 77))
        var matched = 0
        for pair in 0..<10_000 {
            let now = generator.nowMicros()
            let (plain, loginDays, createdDays) = generator.profile(nowMicros: now)
            let plainFilter = generator.filter(
                for: plain, nowMicros: now, loginDays: loginDays, createdDays: createdDays)
            let valid = !generator.chance(0.1)
            let json = valid ? generator.json(plainFilter) : generator.pick(["[]", #"{"age": {}}"#, #"{"x": 1}"#, "{"])
            let ownerId = generator.int64(1...60)
            let owner =
                generator.chance(0.05)
                ? nil
                : FilterOwner(id: ownerId, status: generator.chance(0.9) ? 1 : 3, plan: Int16(generator.int(0...1)))
            let deleted = generator.chance(0.05)
            let filter = SavedFilter(
                id: Int64(pair), ownerId: ownerId, conditionsJSON: json,
                createdAt: Timestamp(microsecondsSinceEpoch: 0), updatedAt: Timestamp(microsecondsSinceEpoch: 0),
                deletedAt: deleted ? Timestamp(microsecondsSinceEpoch: now) : nil)
            let blocked = generator.chance(0.05)
            let blocks =
                blocked
                ? BlockSet([
                    generator.chance(0.5)
                        ? (blocker: plain.id, blocked: ownerId) : (blocker: ownerId, blocked: plain.id)
                ])
                : BlockSet([(blocker: plain.id, blocked: ownerId + 1000)])
            let clock = EvaluationClock(now: Timestamp(microsecondsSinceEpoch: now))
            let profile = makeProfile(plain, plan: 0)

            let outcomes = plainOutcomes(plain, plainFilter, nowMicros: now, ownerPaid: owner?.plan == 1)
            // Every condition paid, owner without the plan: suspended, matches nothing (filter-language.md).
            let suspended = valid && owner?.plan != 1 && plainFilter.communities != nil && outcomes.isEmpty
            let expected =
                plain.status == 1 && owner?.status == 1 && !deleted && valid && plain.id != ownerId
                && !blocked && !suspended && outcomes.values.allSatisfy { $0 }
            let actual = ReferenceEvaluator.matches(profile, filter, owner: owner, blocks: blocks, clock: clock)
            #expect(actual == expected, "pair \(pair): \(json)")
            let explanation = ReferenceEvaluator.explain(profile, filter, owner: owner, blocks: blocks, clock: clock)
            #expect(explanation.matches == actual, "pair \(pair): \(explanation)")
            #expect(explanation.eligibility.map(\.name) == EligibilityRule.allCases.map(\.rawValue))
            if valid {
                let paid = owner?.plan == 1
                let lines = explanation.conditions.filter { $0.outcome != .ignoredNotOnPlan }
                #expect(Set(lines.map(\.itemKey)) == Set(outcomes.keys), "pair \(pair)")
                for line in lines {
                    #expect((line.outcome == .pass) == outcomes[line.itemKey], "pair \(pair): \(line)")
                }
                #expect(
                    explanation.conditions.contains { $0.outcome == .ignoredNotOnPlan }
                        == (!paid && plainFilter.communities != nil))
            } else {
                #expect(explanation.conditions.isEmpty)
            }
            if actual { matched += 1 }
        }
        #expect(matched > 500, "only \(matched) pairs matched")
    }
}
