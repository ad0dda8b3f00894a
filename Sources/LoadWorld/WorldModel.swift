import Chronology
import DeterministicRandom
import Foundation
import Matching

/// A deterministic model of a Japanese dating service's members, in pure Swift: profile `id` of the
/// world (seed, now) is always the same profile, whatever else is generated, in whatever order.
/// Per-profile draws use integer and IEEE arithmetic only (no libm), so that a world does not depend
/// on the platform's math library; `pow` appears only in the tables' weights, rounded to 1e-6.
///
/// The distributions (documented on each table) are modelled on a real service: residence heavy in
/// Tokyo and the large prefectures, ages mostly 20 to 45, 55 % men, every optional item with its own
/// share of unanswered members, multi-valued personality and communities, recent logins, three years
/// of registrations, 15 % on the paid plan, a few hidden, suspended and deleted members.
public struct SeedWorldModel: Sendable {
    public let seed: UInt64
    /// The world's present: ages, registrations and logins are relative to it.
    public let now: Timestamp
    /// `now`'s date in Tokyo (ages are full years on this date).
    public let today: CalendarDate

    public init(seed: UInt64, now: Timestamp) {
        self.seed = seed
        self.now = now
        self.today = now.calendarDate(in: .tokyo)
    }

    /// A member profile, with the `updated_at` the app would have written.
    public struct Member: Sendable, Hashable {
        public let profile: Profile
        public let updatedAt: Timestamp
        public var createdAt: Timestamp { profile.value(of: Slots.registered).asTimestamp! }
    }

    // MARK: - Profiles

    /// Profile `id` of this world, registered at most three years before `now`.
    public func member(id: Int64) -> Member {
        var random = SeedRandom(seed: seed, stream: .profile, index: UInt64(bitPattern: id))
        let u = random.unit()
        let createdDaysAgo = 1095 * u * (0.4 + 0.6 * u)  // more recent registrations: the service grows
        let createdAt = now.adding(microseconds: -Int64(createdDaysAgo * 86_400_000_000) - 60_000_000)
        return member(id: id, createdAt: createdAt, random: &random)
    }

    /// A member who registered at `createdAt` (for new registrations of a day of changes).
    public func member(id: Int64, registeredAt createdAt: Timestamp) -> Member {
        var random = SeedRandom(seed: seed, stream: .profile, index: UInt64(bitPattern: id))
        _ = random.unit()
        return member(id: id, createdAt: createdAt, random: &random)
    }

    private func member(id: Int64, createdAt: Timestamp, random: inout SeedRandom) -> Member {
        var values = Slots.template(createdAt: createdAt)
        let gender: Int16 = random.chance(0.55) ? 1 : 2
        let male = gender == 1
        values[Slots.gender] = .code(gender)

        var age = Int(Tables.age.draw(&random))
        if male, age < 60, random.chance(0.3) { age += 2 }  // men skew a little older
        values[Slots.age] = .date(birthDate(age: age, &random))

        let residence: Int16 = random.chance(0.005) ? 0 : JapanGeography.residence.draw(&random)
        values[Slots.residence] = .code(residence)
        let hometown: Int16 =
            random.chance(0.2)
            ? 0
            : residence != 0 && random.chance(0.55) ? residence : JapanGeography.hometown.draw(&random)
        values[Slots.hometown] = .code(hometown)

        if !random.chance(0.12) {
            let mean = male ? 171.5 : 158.3, sd = male ? 5.8 : 5.4
            values[Slots.height] = .integer(Int32(max(140, min(200, (mean + sd * random.normal()).rounded()))))
        }
        if !random.chance(male ? 0.25 : 0.45) {
            var band = (male ? Tables.incomeMen : Tables.incomeWomen).draw(&random)
            if age < 25, band > 1, random.chance(0.5) { band -= 1 }
            if age >= 35, band < 9, random.chance(0.25) { band += 1 }
            values[Slots.income] = .integer(Int32(band))
        }
        values[Slots.bodyType] = .code(
            random.chance(0.1) ? 0 : (male ? Tables.bodyMen : Tables.bodyWomen).draw(&random))
        values[Slots.bloodType] = .code(random.chance(0.25) ? 0 : Tables.bloodType.draw(&random))
        values[Slots.education] = .code(random.chance(0.15) ? 0 : Tables.education.draw(&random))
        let occupation: Int16 =
            random.chance(0.1)
            ? 0
            : age < 23 && random.chance(0.45) ? Occupations.student : Tables.occupation.draw(&random)
        values[Slots.occupation] = .code(occupation)
        values[Slots.holiday] = .code(random.chance(0.15) ? 0 : Tables.holiday.draw(&random))
        values[Slots.smoking] = .code(
            random.chance(0.1) ? 0 : (male ? Tables.smokingMen : Tables.smokingWomen).draw(&random))
        values[Slots.drinking] = .code(random.chance(0.1) ? 0 : Tables.drinking.draw(&random))
        let marital: Int16 =
            random.chance(0.08)
            ? 0
            : (age < 30 ? Tables.maritalYoung : age < 40 ? Tables.maritalMiddle : Tables.maritalOlder).draw(&random)
        values[Slots.maritalStatus] = .code(marital)
        let children: Int16 =
            random.chance(0.15)
            ? 0
            : marital >= 2 ? Tables.childrenAfterMarriage.draw(&random) : (random.chance(0.98) ? 1 : 3)
        values[Slots.hasChildren] = .code(children)
        values[Slots.marriageIntent] = .code(random.chance(0.12) ? 0 : Tables.marriageIntent.draw(&random))
        values[Slots.wantsChildren] = .code(
            random.chance(0.2)
                ? 0
                : age >= 43 && random.chance(0.5) ? 2 : Tables.wantsChildren.draw(&random))
        values[Slots.housework] = .code(random.chance(0.3) ? 0 : Tables.housework.draw(&random))
        values[Slots.meetingPreference] = .code(random.chance(0.2) ? 0 : Tables.meetingPreference.draw(&random))
        values[Slots.dateCost] = .code(
            random.chance(0.25) ? 0 : (male ? Tables.dateCostMen : Tables.dateCostWomen).draw(&random))
        values[Slots.siblingOrder] = .code(random.chance(0.2) ? 0 : Tables.siblingOrder.draw(&random))
        values[Slots.housemate] = .code(
            random.chance(0.2)
                ? 0
                : age < 27 && random.chance(0.3) ? 2 : Tables.housemate.draw(&random))

        values[Slots.languages] = .codes(
            random.chance(0.15)
                ? []
                : residence == JapanGeography.abroad && random.chance(0.8) ? [1, 2] : Tables.languages.draw(&random))
        values[Slots.personality] = .codes(personality(&random))
        values[Slots.communities] = .codes(communities(&random))

        let plan: Int16 = random.chance(male ? 0.22 : 0.064) ? Profile.Plan.paid : Profile.Plan.free
        values[Slots.hasPhoto] = .flag(random.chance(0.8))
        values[Slots.hasIntroduction] = .flag(random.chance(0.7))
        values[Slots.verified] = .flag(random.chance(plan == Profile.Plan.paid ? 0.9 : 0.55))

        let status = Tables.status.draw(&random)
        let lastLogin = lastLoginAt(createdAt: createdAt, active: status == Profile.Status.active, &random)
        values[Slots.lastLogin] = .timestamp(lastLogin)
        let span = max(0, lastLogin.microsecondsSinceEpoch - createdAt.microsecondsSinceEpoch)
        let updatedAt =
            random.chance(0.3)
            ? createdAt : createdAt.adding(microseconds: Int64(random.unit() * Double(span)))
        return Member(profile: Profile(id: id, status: status, plan: plan, values: values), updatedAt: updatedAt)
    }

    /// A date of birth on which the member is exactly `age` full years old on `today`.
    func birthDate(age: Int, _ random: inout SeedRandom) -> CalendarDate {
        let lastBirthday = today.adding(days: -random.below(365)).components
        return CalendarDate(year: lastBirthday.year - age, month: lastBirthday.month, day: lastBirthday.day)
            ?? CalendarDate(year: lastBirthday.year - age, month: lastBirthday.month, day: 28)!
    }

    /// Recent for most: a third today, a quarter within the week, a fifth within the month, the rest
    /// any time since registration. Members not active have mostly not logged in for a while.
    func lastLoginAt(createdAt: Timestamp, active: Bool, _ random: inout SeedRandom) -> Timestamp {
        let u = random.unit()
        let daysAgo: Double
        if active {
            daysAgo =
                u < 0.35
                ? random.unit()
                : u < 0.6
                    ? 1 + 6 * random.unit()
                    : u < 0.8 ? 7 + 23 * random.unit() : 30 + 400 * random.unit() * random.unit()
        } else {
            daysAgo = u < 0.2 ? 7 * random.unit() : 7 + 200 * random.unit()
        }
        let candidate = now.adding(microseconds: -Int64(daysAgo * 86_400_000_000) - 1_000_000)
        return max(candidate, createdAt)
    }

    /// 0 to 5 distinct traits of 1...40, the popular ones (優しい, 誠実, 明るい…) more often.
    func personality(_ random: inout SeedRandom) -> [Int32] {
        let count = Int(Tables.personalityCount.draw(&random))
        var codes: [Int32] = []
        codes.reserveCapacity(count)
        var attempts = 0
        while codes.count < count, attempts < 20 {
            attempts += 1
            let code = Int32(Tables.personalityCode.draw(&random))
            if !codes.contains(code) { codes.append(code) }
        }
        return codes.sorted()
    }

    /// 45 % in no community; the rest in 1 + geometric(mean 3) communities, capped at 25, drawn by
    /// Zipf-like popularity from a catalogue of sparse ids.
    func communities(_ random: inout SeedRandom) -> [Int32] {
        guard !random.chance(0.45) else { return [] }
        var count = 1
        while count < 25, random.chance(0.67) { count += 1 }
        var ids: [Int32] = []
        ids.reserveCapacity(count)
        var attempts = 0
        while ids.count < count, attempts < count * 3 {
            attempts += 1
            let id = Communities.id(rank: Communities.popularity.draw(&random))
            if !ids.contains(id) { ids.append(id) }
        }
        return ids.sorted()
    }

    // MARK: - Blocks

    /// The members `blockerId` has blocked among `population` (~0.5 a member: 72 % none, a few many).
    public func blocks(of blockerId: Int64, in population: ClosedRange<Int64>) -> [Int64] {
        var random = SeedRandom(seed: seed, stream: .blocks, index: UInt64(bitPattern: blockerId))
        let count = Int(Tables.blockCount.draw(&random))
        guard count > 0, population.count > 1 else { return [] }
        var blocked: [Int64] = []
        var attempts = 0
        while blocked.count < count, attempts < count * 4 {
            attempts += 1
            let other = population.lowerBound + Int64(random.below(population.count))
            if other != blockerId, !blocked.contains(other) { blocked.append(other) }
        }
        return blocked
    }

    // MARK: - Filter owners

    /// The owner of filter `filterId` among `population`: an active member mostly (a member not active
    /// is kept only a third of the time he is drawn), paid members a little more often.
    public func owner(ofFilter filterId: Int64, in population: ClosedRange<Int64>) -> Member {
        var random = SeedRandom(seed: seed, stream: .filterOwner, index: UInt64(bitPattern: filterId))
        var candidate = member(id: population.lowerBound + Int64(random.below(population.count)))
        for _ in 0..<8 {
            let profile = candidate.profile
            let keep =
                profile.isActive ? (profile.plan == Profile.Plan.paid || random.chance(0.8)) : random.chance(0.33)
            if keep { break }
            candidate = member(id: population.lowerBound + Int64(random.below(population.count)))
        }
        return candidate
    }
}

extension ItemValue {
    var asTimestamp: Timestamp? {
        if case .timestamp(let t) = self { return t }
        return nil
    }

    var asCode: Int16? {
        if case .code(let c) = self { return c }
        return nil
    }

    var asDate: CalendarDate? {
        if case .date(let d) = self { return d }
        return nil
    }
}

/// Positions of the items the seeder sets, in `MasterItem.all` (and `Profile.values`).
enum Slots {
    static func index(_ key: String) -> Int {
        guard let item = MasterItem.item(forKey: key) else { preconditionFailure("seeder: no MasterItem \(key)") }
        return item.index
    }

    static let gender = index("gender"), age = index("age"), height = index("height"), income = index("income")
    static let residence = index("residence"), hometown = index("hometown"), bodyType = index("body_type")
    static let bloodType = index("blood_type"), education = index("education"), occupation = index("occupation")
    static let holiday = index("holiday"), smoking = index("smoking"), drinking = index("drinking")
    static let maritalStatus = index("marital_status"), hasChildren = index("has_children")
    static let marriageIntent = index("marriage_intent"), wantsChildren = index("wants_children")
    static let housework = index("housework"), meetingPreference = index("meeting_preference")
    static let dateCost = index("date_cost"), siblingOrder = index("sibling_order"), housemate = index("housemate")
    static let languages = index("languages"), personality = index("personality"), communities = index("communities")
    static let hasPhoto = index("has_photo"), hasIntroduction = index("has_introduction"), verified = index("verified")
    static let lastLogin = index("last_login")
    static let registered = MasterItem.item(forKey: "registered")!

    /// Every item unanswered, every timestamp at `createdAt`.
    static func template(createdAt: Timestamp) -> [ItemValue] {
        MasterItem.all.map { $0.storage.unansweredValue ?? .timestamp(createdAt) }
    }
}

/// Occupation codes the seeder uses (master-items.md names 1 to 5; the rest is the seeder's own
/// orientation list, see docs/okcupid-mapping.md).
enum Occupations {
    static let companyEmployee: Int16 = 1, civilServant: Int16 = 2, doctor: Int16 = 3, student: Int16 = 4, it: Int16 = 5
    static let medical: Int16 = 6, executive: Int16 = 7, finance: Int16 = 8, realEstate: Int16 = 9, teacher: Int16 = 10
    static let selfEmployed: Int16 = 11, creative: Int16 = 12, entertainment: Int16 = 13, sales: Int16 = 14
    static let clerical: Int16 = 15, retail: Int16 = 16, travel: Int16 = 17, transport: Int16 = 18
    static let construction: Int16 = 19, lawyer: Int16 = 20, researcher: Int16 = 21, engineer: Int16 = 22
    static let media: Int16 = 23, selfDefense: Int16 = 24, retired: Int16 = 25, unemployed: Int16 = 26
    static let other: Int16 = 60
}

/// The community catalogue: 5,000 communities with sparse ids (one per block of 1,000, at a hashed
/// offset), whose popularity follows Zipf's law (s = 1.05) by rank.
enum Communities {
    static let count = 5_000

    static func id(rank: Int) -> Int32 {
        Int32(100 + rank * 1_000 + Int(SplitMix64.mix(UInt64(rank) &+ 0xC0FF_EE00) % 1_000))
    }

    static let popularity = WeightedTable((0..<count).map { ($0, 1 / pow(Double($0 + 1), 1.05)) })
}

/// The distributions of the model.
enum Tables {
    /// Ages 18...70: few at 18-19, most between 22 and 42, a tail to 70.
    static let age: WeightedTable<Int16> = WeightedTable(
        (18...70).map { age -> (Int16, Double) in
            let weight: Double =
                switch age {
                case 18...19: 1.2
                case 20...21: 3
                case 22...24: 5
                case 25...29: 7.5
                case 30...34: 7.5
                case 35...39: 5.5
                case 40...45: 3.5
                case 46...50: 1.5
                case 51...60: 0.6
                default: 0.15
                }
            return (Int16(age), weight)
        })

    // Income bands 1 (<200万) … 9 (3000万以上): men mostly 400-800万, women 200-400万.
    static let incomeMen = WeightedTable(codeWeights: [6, 20, 30, 20, 10, 8, 3, 1.5, 0.8])
    static let incomeWomen = WeightedTable(codeWeights: [20, 40, 25, 8, 3, 2, 1, 0.5, 0.3])
    // スリム, やや細め, 普通, グラマー, 筋肉質, ややぽっちゃり, ぽっちゃり
    static let bodyMen = WeightedTable(codeWeights: [10, 16, 45, 1, 15, 10, 4])
    static let bodyWomen = WeightedTable(codeWeights: [14, 26, 40, 8, 2, 8, 2])
    // A, B, O, AB (the Japanese distribution).
    static let bloodType = WeightedTable(codeWeights: [39, 21, 30, 10])
    // 高校卒, 短大/専門学校卒, 大学卒, 大学院卒, その他
    static let education = WeightedTable(codeWeights: [20, 22, 48, 7, 3])
    // 会社員 most, 公務員, 医師, 学生, IT関連, then a long tail of 6...60.
    static let occupation: WeightedTable<Int16> = {
        let head: [(Int16, Double)] = [(1, 42), (2, 8), (3, 1), (4, 3), (5, 7)]
        let tail: [(Int16, Double)] = (6...60).map { code in (Int16(code), 7.5 / pow(Double(code - 4), 0.9)) }
        return WeightedTable(head + tail)
    }()
    // 土日, 平日, 不定期, その他
    static let holiday = WeightedTable(codeWeights: [55, 12, 28, 5])
    // 吸わない, 吸う, 吸う(電子タバコ), ときどき吸う, 非喫煙者の前では吸わない, 相手が嫌ならやめる
    static let smokingMen = WeightedTable(codeWeights: [62, 10, 10, 6, 5, 7])
    static let smokingWomen = WeightedTable(codeWeights: [82, 4, 4, 4, 3, 3])
    // 飲まない, 飲む, ときどき飲む
    static let drinking = WeightedTable(codeWeights: [25, 30, 45])
    // 未婚, 離婚, 死別 by age.
    static let maritalYoung = WeightedTable(codeWeights: [97, 3, 0.05])
    static let maritalMiddle = WeightedTable(codeWeights: [87, 12.5, 0.5])
    static let maritalOlder = WeightedTable(codeWeights: [68, 30, 2])
    // いない, 同居中, 別居中 (after a marriage)
    static let childrenAfterMarriage = WeightedTable(codeWeights: [50, 30, 20])
    // すぐにでも, 2〜3年のうちに, 良い人がいれば, 今は考えていない, わからない
    static let marriageIntent = WeightedTable(codeWeights: [15, 35, 35, 5, 10])
    // 欲しい, 欲しくない, わからない, 相手と相談して決める
    static let wantsChildren = WeightedTable(codeWeights: [50, 10, 25, 15])
    static let housework = WeightedTable(codeWeights: [30, 30, 25, 10, 5])
    // まずは会いたい, 気が合えば会いたい, メッセージを重ねてから
    static let meetingPreference = WeightedTable(codeWeights: [15, 60, 25])
    // 割り勘, 自分が全て払う, 自分が多めに払う, 相手が多めに払う, 相手が全て払う, 持っている方が払う, 相手と相談して決める
    static let dateCostMen = WeightedTable(codeWeights: [10, 12, 40, 2, 1, 5, 30])
    static let dateCostWomen = WeightedTable(codeWeights: [30, 1, 3, 25, 5, 6, 30])
    // 長男・長女, 次男・次女, 三男・三女以降, 一人っ子, その他
    static let siblingOrder = WeightedTable(codeWeights: [40, 35, 10, 12, 3])
    // 一人暮らし, 実家暮らし, ルームシェア, ペットと一緒, その他
    static let housemate = WeightedTable(codeWeights: [55, 30, 3, 7, 5])
    /// Mostly Japanese only; some English too; a few Chinese or Korean, a few other languages.
    static let languages: WeightedTable<[Int32]> = {
        let common: [([Int32], Double)] = [
            ([1], 75), ([1, 2], 16), ([1, 2, 3], 1), ([1, 2, 5], 0.8), ([1, 3], 1.8), ([1, 4], 1.6), ([2], 0.6),
            ([3], 0.4), ([1, 6], 0.5), ([1, 7], 0.4), ([1, 2, 4], 0.6), ([1, 8], 0.3), ([1, 9], 0.3), ([4], 0.2),
        ]
        let rare: [([Int32], Double)] = (10...30).map { code in ([1, Int32(code)], 0.05) }
        return WeightedTable(common + rare)
    }()
    static let personalityCount = WeightedTable<Int16>([(0, 25), (1, 10), (2, 15), (3, 20), (4, 15), (5, 15)])
    static let personalityCode = WeightedTable((1...40).map { (Int16($0), 1 / pow(Double($0), 0.7)) })
    /// Active 94.5 %, hidden 3 %, suspended 0.5 %, deleted 2 %.
    static let status = WeightedTable<Int16>([(1, 94.5), (2, 3), (3, 0.5), (4, 2)])
    /// Blocks a member has made: mean ~0.5.
    static let blockCount = WeightedTable<Int16>([(0, 72), (1, 17), (2, 6), (3, 2.5), (4, 1.2), (6, 0.8), (10, 0.5)])
}
