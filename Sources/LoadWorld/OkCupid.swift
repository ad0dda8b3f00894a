import Chronology
import Dispatch
import Foundation
import Matching
import MatchingPostgres
import PostgresClient

/// RFC 4180 CSV: fields separated by commas, records by LF or CRLF; a quoted field may hold commas,
/// line breaks and doubled quotes (`""`).
public enum CSV {
    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// Every record of `bytes` (UTF-8), the header included.
    public static func parse(_ bytes: [UInt8]) throws -> [[String]] {
        var records: [[String]] = []
        var record: [String] = []
        var field: [UInt8] = []
        var i = 0
        var quoted = false
        var fieldStarted = false
        let quote = UInt8(ascii: "\""), comma = UInt8(ascii: ","), lf = UInt8(ascii: "\n"), cr = UInt8(ascii: "\r")
        func endField() {
            record.append(String(decoding: field, as: UTF8.self))
            field.removeAll(keepingCapacity: true)
            fieldStarted = false
        }
        while i < bytes.count {
            let c = bytes[i]
            if quoted {
                if c == quote {
                    if i + 1 < bytes.count, bytes[i + 1] == quote {
                        field.append(quote)
                        i += 2
                        continue
                    }
                    quoted = false
                } else {
                    field.append(c)
                }
                i += 1
                continue
            }
            switch c {
            case quote where !fieldStarted && field.isEmpty:
                quoted = true
                fieldStarted = true
            case comma:
                endField()
            case lf, cr:
                endField()
                records.append(record)
                record = []
                if c == cr, i + 1 < bytes.count, bytes[i + 1] == lf { i += 1 }
            default:
                field.append(c)
                fieldStarted = true
            }
            i += 1
        }
        if quoted { throw ParseError(description: "CSV ends inside a quoted field (record \(records.count + 1))") }
        if fieldStarted || !field.isEmpty || !record.isEmpty {
            endField()
            records.append(record)
        }
        return records
    }
}

/// One row of okcupid-profiles.csv: the data set's columns, empty strings as nil.
public struct OkCupidRecord: Sendable, Hashable {
    public let id: Int64
    public let age: Int?
    public let bodyType: String?
    public let drinks: String?
    public let education: String?
    public let height: Double?
    public let income: Int?
    public let job: String?
    public let offspring: String?
    public let orientation: String?
    public let pets: String?
    public let sex: String?
    public let smokes: String?
    public let speaks: String?
    public let status: String?

    public init(
        id: Int64, age: Int? = nil, bodyType: String? = nil, drinks: String? = nil, education: String? = nil,
        height: Double? = nil, income: Int? = nil, job: String? = nil, offspring: String? = nil,
        orientation: String? = nil, pets: String? = nil, sex: String? = nil, smokes: String? = nil,
        speaks: String? = nil, status: String? = nil
    ) {
        self.id = id
        self.age = age
        self.bodyType = bodyType
        self.drinks = drinks
        self.education = education
        self.height = height
        self.income = income
        self.job = job
        self.offspring = offspring
        self.orientation = orientation
        self.pets = pets
        self.sex = sex
        self.smokes = smokes
        self.speaks = speaks
        self.status = status
    }

    /// The records of a CSV with the data set's header (columns found by name), at most `limit`.
    public static func records(csv records: [[String]], limit: Int? = nil) throws -> [OkCupidRecord] {
        guard let header = records.first else { throw CSV.ParseError(description: "the CSV is empty") }
        let column = Dictionary(header.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        guard column["id"] != nil, column["sex"] != nil, column["age"] != nil else {
            throw CSV.ParseError(description: "the CSV has no id, sex and age columns: not okcupid-profiles.csv")
        }
        var result: [OkCupidRecord] = []
        for (number, fields) in records.dropFirst().enumerated() {
            if let limit, result.count >= limit { break }
            if fields.count == 1, fields[0].isEmpty { continue }
            guard fields.count == header.count else {
                throw CSV.ParseError(
                    description: "record \(number + 2) has \(fields.count) fields, the header \(header.count)")
            }
            func text(_ name: String) -> String? {
                guard let index = column[name] else { return nil }
                let value = fields[index].trimmingCharacters(in: .whitespaces)
                return value.isEmpty ? nil : value
            }
            guard let id = text("id").flatMap({ Int64($0) }) else {
                throw CSV.ParseError(description: "record \(number + 2) has no integer id")
            }
            result.append(
                OkCupidRecord(
                    id: id, age: text("age").flatMap { Int($0) }, bodyType: text("body_type"), drinks: text("drinks"),
                    education: text("education"), height: text("height").flatMap { Double($0) },
                    income: text("income").flatMap { Int($0) }, job: text("job"), offspring: text("offspring"),
                    orientation: text("orientation"), pets: text("pets"), sex: text("sex"), smokes: text("smokes"),
                    speaks: text("speaks"), status: text("status")))
        }
        return result
    }

    /// Reads a .csv or .csv.gz file (gzip through /usr/bin/gzip -dc, or `gzip` on the PATH).
    public static func read(path: String, limit: Int? = nil) throws -> [OkCupidRecord] {
        try records(csv: CSV.parse(readBytes(path: path)), limit: limit)
    }

    static func readBytes(path: String) throws -> [UInt8] {
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw SeedError("\(path): no such readable file")
        }
        guard path.hasSuffix(".gz") else {
            return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        }
        let process = Process()
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/gzip") {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/gzip")
            process.arguments = ["-dc", path]
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["gzip", "-dc", path]
        }
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw SeedError(
                "gzip -dc \(path) failed: \(String(decoding: message, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))"
            )
        }
        return Array(data)
    }
}

/// Maps OkCupid answers onto the MasterItem catalogue (docs/okcupid-mapping.md). Unanswered or
/// unmappable answers stay unanswered; items the data set lacks come from the world model's profile of
/// the same id, so they are deterministic.
public enum OkCupidMapping {
    public static func gender(_ sex: String?) -> Int16 {
        switch sex {
        case "m": 1;
        case "f": 2;
        default: 0
        }
    }

    /// Whom the member looks for: the other gender (straight), the same (gay), either (bisexual: none).
    public static func soughtGenders(sex: String?, orientation: String?) -> [Int16] {
        let own = gender(sex)
        guard own != 0 else { return [] }
        switch orientation {
        case "gay": return [own]
        case "bisexual": return []
        default: return [own == 1 ? 2 : 1]
        }
    }

    /// Inches to whole centimetres; outside 120..230 (typos such as 1 or 95 inches) is unanswered.
    public static func heightCm(_ inches: Double?) -> Int32? {
        guard let inches else { return nil }
        let cm = (inches * 2.54).rounded()
        return cm >= 120 && cm <= 230 ? Int32(cm) : nil
    }

    /// USD a year at ¥100 = $1, into the 万円 bands; -1 and missing are unanswered.
    public static func incomeBand(_ usd: Int?) -> Int32? {
        guard let usd, usd > 0 else { return nil }
        let man = usd / 100  // 万円
        switch man {
        case ..<200: return 1
        case ..<400: return 2
        case ..<600: return 3
        case ..<800: return 4
        case ..<1000: return 5
        case ..<1500: return 6
        case ..<2000: return 7
        case ..<3000: return 8
        default: return 9
        }
    }

    /// スリム 1, やや細め 2, 普通 3, グラマー 4, 筋肉質 5, ややぽっちゃり 6, ぽっちゃり 7.
    public static let bodyTypes: [String: Int16] = [
        "skinny": 1, "thin": 2, "average": 3, "fit": 3, "curvy": 4, "athletic": 5, "jacked": 5,
        "a little extra": 6, "full figured": 7, "overweight": 7,
    ]

    /// 飲まない 1, 飲む 2, ときどき飲む 3.
    public static let drinks: [String: Int16] = [
        "not at all": 1, "rarely": 3, "socially": 3, "often": 2, "very often": 2, "desperately": 2,
    ]

    /// 吸わない 1, 吸う 2, ときどき吸う 4, 相手が嫌ならやめる 6.
    public static let smokes: [String: Int16] = [
        "no": 1, "yes": 2, "sometimes": 4, "when drinking": 4, "trying to quit": 6,
    ]

    /// The highest level completed: 高校卒 1, 短大/専門学校卒 2, 大学卒 3, 大学院卒 4, その他 5 (space camp,
    /// or dropped out of high school). "working on X" and "dropped out of X" count the level below X.
    public static func education(_ text: String?) -> Int16 {
        guard let text else { return 0 }
        let levels: [(String, Int16)] = [
            ("space camp", 5), ("high school", 1), ("two-year college", 2), ("college/university", 3),
            ("masters program", 4), ("ph.d program", 4), ("law school", 4), ("med school", 4),
        ]
        guard let level = levels.first(where: { text.hasSuffix($0.0) })?.1 else { return 0 }
        if level == 5 { return 5 }
        if text.hasPrefix("working on") || text.hasPrefix("dropped out of") {
            switch level {
            case 1: return 5  // no diploma: その他
            case 2, 3: return 1
            default: return 3
            }
        }
        return level
    }

    /// The seeder's occupation codes (see Occupations and docs/okcupid-mapping.md); "rather not say" is
    /// unanswered.
    public static let jobs: [String: Int16] = [
        "student": Occupations.student, "computer / hardware / software": Occupations.it,
        "science / tech / engineering": Occupations.engineer, "medicine / health": Occupations.medical,
        "banking / financial / real estate": Occupations.finance, "sales / marketing / biz dev": Occupations.sales,
        "executive / management": Occupations.executive, "education / academia": Occupations.teacher,
        "artistic / musical / writer": Occupations.creative, "entertainment / media": Occupations.media,
        "hospitality / travel": Occupations.travel, "transportation": Occupations.transport,
        "construction / craftsmanship": Occupations.construction, "law / legal services": Occupations.lawyer,
        "political / government": Occupations.civilServant, "clerical / administrative": Occupations.clerical,
        "military": Occupations.selfDefense, "retired": Occupations.retired, "unemployed": Occupations.unemployed,
        "other": Occupations.other,
    ]

    /// has_children (いない 1, 同居中 2) and wants_children (欲しい 1, 欲しくない 2, わからない 3) from
    /// "doesn't have kids, but might want them", "has a kid, and wants more", "doesn't want kids"…
    public static func offspring(_ text: String?) -> (has: Int16, wants: Int16) {
        guard let text else { return (0, 0) }
        let has: Int16 = text.hasPrefix("doesn't have") ? 1 : text.hasPrefix("has") ? 2 : 0
        let wants: Int16
        if text.contains("doesn't want") {
            wants = 2
        } else if text.contains("might want") {
            wants = 3
        } else if text.contains("wants") {
            wants = 1
        } else {
            wants = 0
        }
        return (has, wants)
    }

    /// 独身(未婚) 1 for single and available; seeing someone, married and unknown are unanswered (the
    /// catalogue has single statuses only).
    public static func maritalStatus(_ status: String?) -> Int16 {
        switch status {
        case "single", "available": 1;
        default: 0
        }
    }

    /// Language codes 1...30 (1 日本語, 2 英語, … 30 その他).
    public static let languageCodes: [String: Int32] = [
        "japanese": 1, "english": 2, "chinese": 3, "korean": 4, "spanish": 5, "french": 6, "german": 7,
        "italian": 8, "portuguese": 9, "russian": 10, "tagalog": 11, "vietnamese": 12, "thai": 13,
        "indonesian": 14, "hindi": 15, "arabic": 16, "hebrew": 17, "dutch": 18, "swedish": 19, "greek": 20,
        "polish": 21, "turkish": 22, "farsi": 23, "persian": 23, "sign language": 24, "malay": 25, "urdu": 26,
        "bengali": 27, "swahili": 28, "tamil": 29,
    ]

    /// Languages spoken at least "okay" (those marked "(poorly)" are left out); programming languages
    /// (c++, lisp) are dropped; any other language is その他 (30). Sorted, distinct.
    public static func languages(_ speaks: String?) -> [Int32] {
        guard let speaks else { return [] }
        var codes = Set<Int32>()
        for part in speaks.split(separator: ",") {
            let entry = part.trimmingCharacters(in: .whitespaces)
            if entry.hasSuffix("(poorly)") { continue }
            let name = entry.split(separator: "(").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            if name.isEmpty || name == "c++" || name == "lisp" { continue }
            codes.insert(languageCodes[name] ?? 30)
        }
        return codes.sorted()
    }

    /// Members who have a dog or a cat live with it: ペットと一緒 (4).
    public static func livesWithPet(_ pets: String?) -> Bool {
        guard let pets else { return false }
        return pets.contains("has dogs") || pets.contains("has cats")
    }

    /// The member for `record`, as profile `id` (the record's id plus an offset when appending): the
    /// world model's member of that id, with every item the data set has replaced by its mapping.
    public static func member(_ record: OkCupidRecord, id: Int64, model: SeedWorldModel) -> SeedWorldModel.Member {
        let base = model.member(id: id)
        var values = base.profile.values
        values[Slots.gender] = .code(gender(record.sex))
        var birth: CalendarDate?
        if let age = record.age {
            var random = SeedRandom(seed: model.seed, stream: .okcupid, index: UInt64(bitPattern: id))
            birth = model.birthDate(age: max(18, age), &random)  // the data set's ages carry ±1 year of noise
        }
        values[Slots.age] = .date(birth)
        values[Slots.height] = .integer(heightCm(record.height))
        values[Slots.income] = .integer(incomeBand(record.income))
        values[Slots.bodyType] = .code(record.bodyType.flatMap { bodyTypes[$0] } ?? 0)
        values[Slots.drinking] = .code(record.drinks.flatMap { drinks[$0] } ?? 0)
        values[Slots.smoking] = .code(record.smokes.flatMap { smokes[$0] } ?? 0)
        values[Slots.education] = .code(education(record.education))
        values[Slots.occupation] = .code(record.job.flatMap { jobs[$0] } ?? 0)
        let kids = offspring(record.offspring)
        values[Slots.hasChildren] = .code(kids.has)
        values[Slots.wantsChildren] = .code(kids.wants)
        values[Slots.maritalStatus] = .code(maritalStatus(record.status))
        values[Slots.languages] = .codes(languages(record.speaks))
        if livesWithPet(record.pets) { values[Slots.housemate] = .code(4) }
        let profile = Profile(id: id, status: base.profile.status, plan: base.profile.plan, values: values)
        return SeedWorldModel.Member(profile: profile, updatedAt: base.updatedAt)
    }
}

/// Imports OkCupid records as profiles (ids = the data set's ids, plus the existing maximum when
/// appending), with blocks among them and filters built around their owners by the world's generator.
public struct OkCupidSeeder {
    public let connection: PostgresConnection

    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    public func seed(
        records: [OkCupidRecord], filters filterCount: Int, seed: UInt64, now: Timestamp,
        existing: ExistingRows
    ) throws -> SeedSummary {
        let started = DispatchTime.now()
        var summary = SeedSummary(title: "okcupid", seed: seed, now: now)
        let model = SeedWorldModel(seed: seed, now: now)
        let generator = SeedFilterGenerator(seed: seed, now: now)
        try connection.transaction { tx in
            let start = try WorldSeeder.prepare(tx, existing: existing)
            let offset = start.profileId - 1
            let writer = AppTableWriter(connection: tx)
            let members = records.map { OkCupidMapping.member($0, id: $0.id + offset, model: model) }
            let sought = records.map { OkCupidMapping.soughtGenders(sex: $0.sex, orientation: $0.orientation) }
            for chunk in stride(from: 0, to: members.count, by: WorldSeeder.profileChunk) {
                let slice = Array(members[chunk..<min(members.count, chunk + WorldSeeder.profileChunk)])
                try writer.insertProfiles(slice.map(\.profile), updatedAts: slice.map(\.updatedAt))
            }

            // Blocks among the imported members (distinct: each blocker's blocked indices are).
            var blocks: [Block] = []
            if members.count > 1 {
                let ids = members.map(\.profile.id)
                for id in ids {
                    for index in model.blocks(of: id, in: 0...Int64(ids.count - 1)) {
                        let blocked = ids[Int(index)]
                        if blocked != id { blocks.append(Block(blockerId: id, blockedId: blocked)) }
                    }
                }
            }

            // Filters around owners drawn like the world's: mostly active members.
            var seeded: [SeededFilter] = []
            if !members.isEmpty {
                for index in 0..<filterCount {
                    let id = start.filterId + Int64(index)
                    var random = SeedRandom(seed: seed, stream: .filterOwner, index: UInt64(bitPattern: id))
                    var pick = random.below(members.count)
                    for _ in 0..<8 {
                        let p = members[pick].profile
                        if p.isActive ? (p.plan == Profile.Plan.paid || random.chance(0.8)) : random.chance(0.33) {
                            break
                        }
                        pick = random.below(members.count)
                    }
                    let owner = SeedOwner(members[pick], today: model.today, soughtGenders: sought[pick])
                    seeded.append(generator.filter(id: id, owner: owner))
                }
            }
            try writer.insertFilters(seeded.map(\.filter))
            try writer.copyBlocks(blocks)
            try tx.execute("ANALYZE profiles; ANALYZE saved_filters; ANALYZE blocks")
            summary.rows = [
                ("profiles", "profiles", members.count),
                ("saved_filters", "saved_filters", seeded.count), ("blocks", "blocks", blocks.count),
            ]
            summary.details = [
                ("first_profile_id", "first profile id", Int(start.profileId)),
                ("first_filter_id", "first filter id", Int(start.filterId)),
                ("filters_invalid", "filters invalid", seeded.filter { $0.invalidKind != nil }.count),
                ("filters_deleted", "filters deleted", seeded.filter { $0.filter.isDeleted }.count),
            ]
        }
        summary.seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        return summary
    }
}
