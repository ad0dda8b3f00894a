import Chronology
import Foundation
import Matching

/// What the filter generator needs to know about a filter's owner, whoever made the profile (the world
/// model, the OkCupid import, a profile read back from the database).
public struct SeedOwner: Sendable, Hashable {
    public let id: Int64
    /// 1 男性, 2 女性, 0 unknown.
    public let gender: Int16
    /// Full years on the world's date; nil when unanswered.
    public let age: Int?
    /// The owner's residence code (0 unanswered).
    public let residence: Int16
    public let plan: Int16
    public let createdAt: Timestamp
    /// The genders the owner looks for: the other one by default; both (no gender condition) or the
    /// same one when the source says so (OkCupid's orientation).
    public let soughtGenders: [Int16]

    public init(
        id: Int64, gender: Int16, age: Int?, residence: Int16, plan: Int16, createdAt: Timestamp,
        soughtGenders: [Int16]? = nil
    ) {
        self.id = id
        self.gender = gender
        self.age = age
        self.residence = residence
        self.plan = plan
        self.createdAt = createdAt
        self.soughtGenders = soughtGenders ?? (gender == 1 ? [2] : gender == 2 ? [1] : [])
    }

    public init(_ member: SeedWorldModel.Member, today: CalendarDate, soughtGenders: [Int16]? = nil) {
        let profile = member.profile
        self.init(
            id: profile.id, gender: profile.values[Slots.gender].asCode ?? 0,
            age: profile.values[Slots.age].asDate.map { today.fullYears(since: $0) },
            residence: profile.values[Slots.residence].asCode ?? 0, plan: profile.plan,
            createdAt: member.createdAt, soughtGenders: soughtGenders)
    }
}

/// The kinds of invalid filter the seeder plants (~0.5 % of filters), each with the exact error
/// `FilterConditions.decode` must report, so that runs exercise the skip-and-record path.
public enum InvalidFilterKind: String, Sendable, CaseIterable {
    /// `"age": {"min": 38, "max": 30}`
    case minGreaterThanMax
    /// `"area": {"anyOf": [13]}` and other keys the catalogue does not have.
    case unknownKey
    /// `"residence": {"anyOf": [13, 49]}`, `"smoking": {"anyOf": [1, 7]}`
    case outOfDomainCode
    /// `"height": {"min": 160.5}`
    case fraction
    /// `"age": {"min": "25", …}`, `"personality": {"anyOf": "3"}`
    case wrongType
    /// `"smoking": {"anyOf": []}`
    case emptyList
    /// `"last_login": {"withinDays": 0}` or 400
    case withinDaysOutOfRange
    /// `"personality": {"anyOf": [1], "allOf": [2]}`
    case anyOfAndAllOf
}

/// A generated filter, and the invalid kind planted in it, if any.
public struct SeededFilter: Sendable, Hashable {
    public let filter: SavedFilter
    public let invalidKind: InvalidFilterKind?
    /// For an invalid filter: the `FilterValidationError` its conditions must give.
    public let expectedError: FilterValidationError?
}

/// Saved filters built around their owner, as members actually search: the other gender, ages near
/// their own, their prefecture and sometimes the next ones, and now and then smoking, drinking,
/// marriage intent, personality, photo, recent login, communities (a paid condition) and the rest.
/// 1 to 10 conditions; ~85 % notify; mostly daily; some deleted; ~0.5 % invalid of varied kinds.
public struct SeedFilterGenerator: Sendable {
    public let seed: UInt64
    public let now: Timestamp

    /// The share of filters planted invalid.
    public static let invalidShare = 0.005
    /// The share of filters deleted (`deleted_at` set).
    public static let deletedShare = 0.04
    public static let maximumConditions = 10

    public init(seed: UInt64, now: Timestamp) {
        self.seed = seed
        self.now = now
    }

    /// Filter `id` of `owner`, created after the owner registered.
    public func filter(id: Int64, owner: SeedOwner) -> SeededFilter {
        var random = SeedRandom(seed: seed, stream: .filter, index: UInt64(bitPattern: id))
        let start = max(owner.createdAt, now.adding(days: -400))
        let createdAt = start.adding(
            microseconds: Int64(
                random.unit() * Double(max(0, now.microsecondsSinceEpoch - start.microsecondsSinceEpoch))))
        let updatedAt =
            random.chance(0.6)
            ? createdAt
            : createdAt.adding(
                microseconds: Int64(
                    random.unit() * Double(now.microsecondsSinceEpoch - createdAt.microsecondsSinceEpoch)))
        let deletedAt =
            random.chance(Self.deletedShare)
            ? updatedAt.adding(
                microseconds: Int64(
                    random.unit() * Double(now.microsecondsSinceEpoch - updatedAt.microsecondsSinceEpoch)))
            : nil
        let notify = random.chance(0.85)
        let every = Self.notifyEvery.draw(&random)
        var members = conditions(for: owner, &random)
        let name = random.chance(0.05) ? nil : Self.name(members: members, owner: owner)
        var invalidKind: InvalidFilterKind?
        var expected: FilterValidationError?
        if random.chance(Self.invalidShare) {
            let kind = InvalidFilterKind.allCases[random.below(InvalidFilterKind.allCases.count)]
            expected = Self.plant(kind, in: &members, owner: owner, &random)
            invalidKind = kind
        }
        return SeededFilter(
            filter: SavedFilter(
                id: id, ownerId: owner.id, name: name, conditionsJSON: Self.json(members), notify: notify,
                notifyEvery: every, createdAt: createdAt, updatedAt: updatedAt, deletedAt: deletedAt),
            invalidKind: invalidKind, expectedError: expected)
    }

    /// New valid conditions for an existing filter of `owner` (an edit), as canonical JSON.
    public func editedConditions(owner: SeedOwner, _ random: inout SeedRandom) -> String {
        Self.json(conditions(for: owner, &random))
    }

    /// `notify_every`: mostly a day; some 12 hours, 3 days, a week.
    static let notifyEvery = WeightedTable<NotifyInterval>([
        (.oneDay, 80), (NotifyInterval(microseconds: 12 * 3_600_000_000), 8), (NotifyInterval(days: 3), 7),
        (NotifyInterval(days: 7), 5),
    ])

    /// One condition: the item's key and its JSON value.
    typealias Member = (key: String, json: String)

    /// Valid conditions around the owner, in catalogue order, 1 to 10 of them.
    func conditions(for owner: SeedOwner, _ random: inout SeedRandom) -> [Member] {
        var chosen: [String: String] = [:]
        let sought = owner.soughtGenders
        let seeksMen = sought == [1], seeksWomen = sought == [2]
        if !sought.isEmpty, random.chance(0.97) { chosen["gender"] = anyOf(sought) }
        if random.chance(0.9) { chosen["age"] = ageRange(owner, &random) }
        if random.chance(0.75) { chosen["residence"] = residence(owner, &random) }
        if random.chance(0.2) {
            if seeksMen {
                let min = 165 + random.below(14)
                chosen["height"] = random.chance(0.3) ? range(min, 184 + random.below(8)) : range(min, nil)
            } else if seeksWomen {
                chosen["height"] =
                    random.chance(0.6)
                    ? range(nil, 158 + random.below(13)) : range(148 + random.below(5), 160 + random.below(10))
            } else {
                chosen["height"] = range(150 + random.below(20), nil)
            }
        }
        if random.chance(seeksMen ? 0.15 : 0.03) {
            let min = 3 + random.below(4)
            chosen["income"] =
                random.chance(0.1) ? range(min, Swift.min(9, min + 2 + random.below(3))) : range(min, nil)
        }
        if random.chance(0.3) {
            chosen["smoking"] = anyOf(random.element([[1], [1, 5], [1, 5, 6], [1, 3, 5, 6], [0, 1, 5, 6]]))
        }
        if random.chance(0.12) { chosen["drinking"] = anyOf(random.element([[1, 3], [2, 3], [1], [0, 1, 3]])) }
        if random.chance(0.2) { chosen["marriage_intent"] = anyOf(random.element([[1], [1, 2], [1, 2, 3]])) }
        if random.chance(0.12) {
            let count = 1 + random.below(3)
            let codes = (0..<count).map { _ in Int(Tables.personalityCode.draw(&random)) }
            chosen["personality"] = random.chance(0.2) ? allOf(Array(codes.prefix(2))) : anyOf(codes)
        }
        if random.chance(0.35) { chosen["has_photo"] = "true" }
        if random.chance(0.25) {
            chosen["last_login"] = "{\"withinDays\":\(random.element([1, 3, 3, 7, 7, 7, 14, 30]))}"
        }
        if random.chance(owner.plan >= Profile.Plan.paid ? 0.25 : 0.03) {
            // A free owner's communities condition is one kept from a paid period: ignored by runs.
            let count = 1 + random.below(3)
            chosen["communities"] = anyOf(
                (0..<count).map { _ in Int(Communities.id(rank: Communities.popularity.draw(&random))) })
        }
        if random.chance(0.08) {
            chosen["body_type"] = anyOf(random.element([[1, 2, 3], [2, 3], [3, 4], [3, 5], [1, 2]]))
        }
        if random.chance(0.08) { chosen["education"] = anyOf(random.element([[3, 4], [2, 3, 4], [4]])) }
        if random.chance(0.1) { chosen["marital_status"] = anyOf(random.element([[1], [1, 2]])) }
        if random.chance(0.06) { chosen["has_children"] = anyOf(random.element([[1], [0, 1]])) }
        if random.chance(0.06) { chosen["wants_children"] = anyOf(random.element([[1], [1, 4], [1, 3, 4]])) }
        if random.chance(0.1) { chosen["verified"] = "true" }
        if random.chance(0.04) { chosen["languages"] = random.chance(0.7) ? anyOf([2]) : allOf([1, 2]) }
        if random.chance(0.02) { chosen["blood_type"] = anyOf(random.element([[1], [1, 3], [2, 4]])) }
        if random.chance(0.05) { chosen["holiday"] = anyOf(random.element([[1], [1, 3]])) }
        if random.chance(0.03) { chosen["registered"] = "{\"withinDays\":\(random.element([7, 30, 90]))}" }
        if random.chance(0.05) { chosen["has_introduction"] = "true" }
        if random.chance(0.03) { chosen["occupation"] = anyOf(random.element([[1, 2], [3], [1, 2, 5], [7, 20]])) }
        if random.chance(0.02) { chosen["housemate"] = anyOf(random.element([[1], [1, 4]])) }
        if chosen.isEmpty {
            chosen[sought.isEmpty ? "age" : "gender"] = sought.isEmpty ? ageRange(owner, &random) : anyOf(sought)
        }
        // At most 10: keep gender, age and residence, drop others at random.
        while chosen.count > Self.maximumConditions {
            let droppable = MasterItem.all.map(\.key).filter {
                chosen[$0] != nil && $0 != "gender" && $0 != "age" && $0 != "residence"
            }
            chosen[droppable[random.below(droppable.count)]] = nil
        }
        return MasterItem.all.compactMap { item in chosen[item.key].map { (item.key, $0) } }
    }

    /// Ages near the owner's: men look a little younger, women a little older; now and then one bound.
    func ageRange(_ owner: SeedOwner, _ random: inout SeedRandom) -> String {
        let a = owner.age ?? 30
        var low: Int, high: Int
        if owner.soughtGenders == [2], owner.gender == 1 {
            low = a - 4 - random.below(8)
            high = a + random.below(5)
        } else if owner.soughtGenders == [1], owner.gender == 2 {
            low = a - 2 - random.below(4)
            high = a + 3 + random.below(10)
        } else {
            low = a - 5 - random.below(5)
            high = a + 5 + random.below(5)
        }
        low = min(max(low, 18), 120)
        high = min(max(high, low), 120)
        let u = random.unit()
        return u < 0.08 ? range(low, nil) : u < 0.15 ? range(nil, high) : range(low, high)
    }

    /// The owner's prefecture, sometimes with some or all of its neighbours, rarely also "unanswered".
    func residence(_ owner: SeedOwner, _ random: inout SeedRandom) -> String {
        let home =
            owner.residence == 0 || owner.residence == JapanGeography.abroad ? JapanGeography.tokyo : owner.residence
        var codes = [Int(home)]
        let neighbours = (JapanGeography.neighbours[home] ?? []).map(Int.init)
        let u = random.unit()
        if u >= 0.35, !neighbours.isEmpty {
            if u < 0.75 {
                let count = 1 + random.below(min(2, neighbours.count))
                for index in random.distinctIndices(count, of: neighbours.count) { codes.append(neighbours[index]) }
            } else {
                codes += neighbours
            }
        }
        if random.chance(0.03) { codes.append(0) }
        return anyOf(codes)
    }

    // MARK: - Invalid filters

    /// Replaces or adds one condition so that the filter is invalid in the way `kind` says, and
    /// returns the error `FilterConditions.decode` must give.
    static func plant(
        _ kind: InvalidFilterKind, in members: inout [Member], owner: SeedOwner,
        _ random: inout SeedRandom
    ) -> FilterValidationError {
        func set(_ key: String, _ json: String) {
            members.removeAll { $0.key == key }
            if MasterItem.item(forKey: key) == nil {
                members.append((key, json))  // unknown keys go last, as an app bug would add them
            } else {
                members.append((key, json))
                let order = Dictionary(uniqueKeysWithValues: MasterItem.all.map { ($0.key, $0.index) })
                members.sort { (order[$0.key] ?? Int.max) < (order[$1.key] ?? Int.max) }
            }
        }
        switch kind {
        case .minGreaterThanMax:
            let a = min(max(owner.age ?? 30, 30), 100)
            let low = a - 5 - random.below(5), high = a + 1 + random.below(5)
            set("age", range(high, low))
            return FilterValidationError(itemKey: "age", problem: "min \(high) is greater than max \(low)")
        case .unknownKey:
            let (key, json) = random.element([
                ("area", "{\"anyOf\":[13]}"), ("residense", "{\"anyOf\":[13,14]}"), ("income_min", "3"),
                ("hobby", "{\"anyOf\":[12]}"), ("age_range", "{\"min\":25,\"max\":35}"),
            ])
            set(key, json)
            return FilterValidationError(itemKey: key, problem: "unknown item")
        case .outOfDomainCode:
            if random.chance(0.5) {
                set("residence", anyOf([Int(owner.residence == 0 ? 13 : owner.residence), 49]))
                return FilterValidationError(itemKey: "residence", problem: "code 49 is outside 1..48")
            }
            set("smoking", "{\"anyOf\":[1,7]}")
            return FilterValidationError(itemKey: "smoking", problem: "code 7 is outside 1..6")
        case .fraction:
            set("height", "{\"min\":160.5}")
            return FilterValidationError(itemKey: "height", problem: "min is not an integer (\"160.5\")")
        case .wrongType:
            if random.chance(0.5) {
                set("age", "{\"min\":\"25\",\"max\":32}")
                return FilterValidationError(itemKey: "age", problem: "min is not an integer (string \"25\")")
            }
            set("personality", "{\"anyOf\":\"3\"}")
            return FilterValidationError(itemKey: "personality", problem: "anyOf is not a list (string \"3\")")
        case .emptyList:
            set("smoking", "{\"anyOf\":[]}")
            return FilterValidationError(itemKey: "smoking", problem: "anyOf is empty")
        case .withinDaysOutOfRange:
            let days = random.chance(0.5) ? 0 : 400
            set("last_login", "{\"withinDays\":\(days)}")
            return FilterValidationError(itemKey: "last_login", problem: "withinDays \(days) is outside 1..365")
        case .anyOfAndAllOf:
            set("personality", "{\"anyOf\":[1],\"allOf\":[2]}")
            return FilterValidationError(itemKey: "personality", problem: "anyOf and allOf together")
        }
    }

    // MARK: - JSON

    static func json(_ members: [Member]) -> String {
        "{" + members.map { "\"\($0.key)\":\($0.json)" }.joined(separator: ",") + "}"
    }

    /// `{"anyOf":[…]}` with the codes sorted and deduplicated (the canonical form).
    func anyOf(_ codes: [some BinaryInteger]) -> String {
        "{\"anyOf\":[" + Self.codeList(codes) + "]}"
    }

    func allOf(_ codes: [some BinaryInteger]) -> String {
        "{\"allOf\":[" + Self.codeList(codes) + "]}"
    }

    static func anyOf(_ codes: [some BinaryInteger]) -> String {
        "{\"anyOf\":[" + codeList(codes) + "]}"
    }

    static func codeList(_ codes: [some BinaryInteger]) -> String {
        Array(Set(codes.map { Int($0) })).sorted().map(String.init).joined(separator: ",")
    }

    static func range(_ min: Int?, _ max: Int?) -> String {
        "{" + [min.map { "\"min\":\($0)" }, max.map { "\"max\":\($0)" }].compactMap { $0 }.joined(separator: ",") + "}"
    }

    func range(_ min: Int?, _ max: Int?) -> String { Self.range(min, max) }

    /// A name as members write them: "東京都 25〜32歳", "神奈川県ほか", "検索 1".
    static func name(members: [Member], owner: SeedOwner) -> String {
        var parts: [String] = []
        if members.contains(where: { $0.key == "residence" }) {
            let home =
                owner.residence == 0 || owner.residence == JapanGeography.abroad
                ? JapanGeography.tokyo : owner.residence
            parts.append(MasterItem.Residence.item.label(for: Int32(home)) ?? "")
        }
        if let age = members.first(where: { $0.key == "age" })?.json {
            let digits = age.split(whereSeparator: { !$0.isNumber }).map(String.init)
            if age.contains("min"), age.contains("max"), digits.count == 2 {
                parts.append("\(digits[0])〜\(digits[1])歳")
            } else if let only = digits.first {
                parts.append(age.contains("min") ? "\(only)歳以上" : "\(only)歳以下")
            }
        }
        if members.contains(where: { $0.key == "smoking" }) { parts.append("非喫煙") }
        if members.contains(where: { $0.key == "communities" }) { parts.append("趣味") }
        return parts.isEmpty ? "新しい検索" : parts.joined(separator: " ")
    }
}
