import Chronology
import DeterministicRandom
import Foundation
import Testing

@testable import Matching

/// The catalogue as master-items.md lists it, written out independently of the code.
private let specifiedCatalogue:
    [(key: String, column: String, kind: ItemKind, storage: ColumnStorage, domain: ClosedRange<Int32>?)] = [
        ("gender", "gender", .single, .smallint, 1...2),
        ("age", "birth_date", .range, .nullableDate, 18...120),
        ("height", "height_cm", .range, .nullableSmallint, 120...230),
        ("income", "income_band", .range, .nullableSmallint, 1...9),
        ("residence", "residence", .single, .smallint, 1...48),
        ("hometown", "hometown", .single, .smallint, 1...48),
        ("body_type", "body_type", .single, .smallint, 1...7),
        ("blood_type", "blood_type", .single, .smallint, 1...4),
        ("education", "education", .single, .smallint, 1...5),
        ("occupation", "occupation", .single, .smallint, 1...60),
        ("holiday", "holiday", .single, .smallint, 1...4),
        ("smoking", "smoking", .single, .smallint, 1...6),
        ("drinking", "drinking", .single, .smallint, 1...3),
        ("marital_status", "marital_status", .single, .smallint, 1...3),
        ("has_children", "has_children", .single, .smallint, 1...3),
        ("marriage_intent", "marriage_intent", .single, .smallint, 1...5),
        ("wants_children", "wants_children", .single, .smallint, 1...4),
        ("housework", "housework", .single, .smallint, 1...5),
        ("meeting_preference", "meeting_preference", .single, .smallint, 1...3),
        ("date_cost", "date_cost", .single, .smallint, 1...7),
        ("sibling_order", "sibling_order", .single, .smallint, 1...5),
        ("housemate", "housemate", .single, .smallint, 1...5),
        ("languages", "languages", .multi, .smallintArray, 1...30),
        ("personality", "personality", .multi, .smallintArray, 1...40),
        ("communities", "communities", .multi, .integerArray, 1...2_147_483_647),
        ("has_photo", "has_photo", .flag, .boolean, nil),
        ("has_introduction", "has_introduction", .flag, .boolean, nil),
        ("verified", "verified", .flag, .boolean, nil),
        ("last_login", "last_login_at", .recency, .timestamptz, 1...365),
        ("registered", "created_at", .recency, .timestamptz, 1...365),
    ]

@Suite struct CatalogueTests {
    @Test func followsMasterItemsInOrder() {
        #expect(MasterItem.all.map(\.key) == specifiedCatalogue.map(\.key))
        for (item, spec) in zip(MasterItem.all, specifiedCatalogue) {
            #expect(item.column == spec.column, "\(item.key)")
            #expect(item.kind == spec.kind, "\(item.key)")
            #expect(item.storage == spec.storage, "\(item.key)")
            #expect(item.domain == spec.domain, "\(item.key)")
        }
    }

    @Test func indexIsThePositionInAll() {
        for (position, item) in MasterItem.all.enumerated() {
            #expect(item.index == position)
            #expect(MasterItem.item(forKey: item.key)?.index == position)
        }
        #expect(Set(MasterItem.all.map(\.key)).count == MasterItem.all.count)
        #expect(Set(MasterItem.all.map(\.column)).count == MasterItem.all.count)
    }

    @Test func lookUpByKey() throws {
        let age = try #require(MasterItem.item(forKey: "age"))
        #expect(age == MasterItem.Age.item)
        #expect(age.column == "birth_date")
        #expect(MasterItem.item(forKey: "favorite_color") == nil)
        #expect(MasterItem.item(forKey: "Age") == nil)
        #expect(MasterItem.item(forKey: "birth_date") == nil)
    }

    @Test func onlyCommunitiesNeedsThePaidPlan() {
        let paid = MasterItem.all.filter { $0.requiredPlan > Profile.Plan.free }
        #expect(paid.map(\.key) == ["communities"])
        #expect(MasterItem.Communities.item.requiredPlan == 1)
        #expect(MasterItem.Age.requiredPlan == 0)
    }

    @Test func genderNeverAcceptsUnanswered() {
        #expect(MasterItem.Gender.acceptsUnanswered == false)
        #expect(MasterItem.Residence.acceptsUnanswered == true)
    }

    @Test func labelsAreOrientationOnly() {
        let residence = MasterItem.Residence.item
        #expect(residence.label(for: 13) == "東京都")
        #expect(residence.label(for: 47) == "沖縄県")
        #expect(residence.label(for: 48) == "海外")
        #expect(residence.label(for: 0) == nil)
        #expect(residence.label(for: 49) == nil)
        #expect(MasterItem.Occupation.item.label(for: 1) == nil)
        for item in MasterItem.all where !item.labels.isEmpty {
            #expect(Int32(item.labels.count) == item.domain?.upperBound, "\(item.key)")
        }
    }

    /// Every item's column exists in the `profiles` table the worker migrates, with its storage's
    /// type and nullability.
    @Test func columnsMatchTheSchema() throws {
        let schemaURL = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("sql/0001_app_tables.sql")
        let schema = try String(contentsOf: schemaURL, encoding: .utf8)
        // The profiles table's own lines: saved_filters has a created_at too (found by review in session 32, when
        // the split named a statement the file does not have and every table's lines were searched).
        let fromProfiles = schema.components(separatedBy: "CREATE TABLE IF NOT EXISTS profiles (")
        try #require(fromProfiles.count == 2, "one profiles table in sql/0001_app_tables.sql")
        let profilesTable = try #require(fromProfiles[1].components(separatedBy: ");").first)
        let declarations = profilesTable.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        for item in MasterItem.all {
            let declaration = try #require(declarations.first { $0.first == item.column }, "\(item.column)")
            let (type, notNull) =
                switch item.storage {
                case .smallint: ("smallint", true)
                case .nullableSmallint: ("smallint", false)
                case .nullableDate: ("date", false)
                case .smallintArray: ("smallint[]", true)
                case .integerArray: ("integer[]", true)
                case .boolean: ("boolean", true)
                case .timestamptz: ("timestamptz", true)
                }
            #expect(
                declaration.dropFirst().first?.trimmingCharacters(in: .punctuationCharacters.subtracting(["[", "]"]))
                    == type, "\(item.key)")
            #expect(declaration.joined(separator: " ").contains("NOT NULL") == notNull, "\(item.key)")
        }
    }

    @Test func profileMakeStartsUnanswered() throws {
        let login = try #require(Timestamp(iso8601: "2026-03-01T00:00:00Z"))
        let created = try #require(Timestamp(iso8601: "2025-01-01T00:00:00Z"))
        let profile = Profile.make(id: 7, lastLoginAt: login, createdAt: created)
        #expect(profile.isActive)
        #expect(profile.plan == 0)
        #expect(profile.lastLoginAt == login)
        #expect(profile.value(of: MasterItem.Registered.item) == .timestamp(created))
        #expect(profile.value(of: MasterItem.Gender.item) == .code(0))
        #expect(profile.value(of: MasterItem.Age.item) == .date(nil))
        #expect(profile.value(of: MasterItem.Height.item) == .integer(nil))
        #expect(profile.value(of: MasterItem.Communities.item) == .codes([]))
        #expect(profile.value(of: MasterItem.Verified.item) == .flag(false))
        #expect(profile.values.count == MasterItem.all.count)
        for (value, item) in zip(profile.values, MasterItem.all) {
            #expect(value.fits(item.storage), "\(item.key)")
        }
    }

    @Test func profileMakeSetsValuesByKey() throws {
        let login = try #require(Timestamp(iso8601: "2026-03-01T00:00:00Z"))
        let profile = Profile.make(
            id: 8, status: 2, plan: 1, lastLoginAt: login, createdAt: login,
            ["residence": .code(13), "personality": .codes([2, 9]), "height": .integer(170)])
        #expect(!profile.isActive)
        #expect(profile.plan == 1)
        #expect(MasterItem.Residence.value(in: profile) == .code(13))
        #expect(MasterItem.Personality.value(in: profile) == .codes([2, 9]))
        #expect(MasterItem.Height.value(in: profile) == .integer(170))
    }

    @Test(arguments: [(Int16(1), true), (2, false), (3, false), (4, false), (0, false), (9, false)])
    func onlyStatusOneIsActive(status: Int16, active: Bool) {
        #expect(FilterOwner(id: 1, status: status, plan: 0).isActive == active)
        let profile = Profile.make(
            id: 1, status: status, lastLoginAt: Timestamp(microsecondsSinceEpoch: 0),
            createdAt: Timestamp(microsecondsSinceEpoch: 0))
        #expect(profile.isActive == active)
    }

    @Test func blockSetAnswersEitherWay() {
        let blocks = BlockSet([(blocker: 1, blocked: 2), (blocker: 3, blocked: 3)])
        #expect(blocks.blocksEitherWay(1, 2))
        #expect(blocks.blocksEitherWay(2, 1))
        #expect(blocks.blocks(1, 2))
        #expect(!blocks.blocks(2, 1))
        #expect(!blocks.blocksEitherWay(1, 3))
        #expect(!BlockSet.none.blocksEitherWay(1, 2))
    }

    /// `counterparts(of:)`, which the engine and the unit commit ask once per filter owner, says what
    /// `blocksEitherWay` says for every pair: both directions, a block both ways listed once, a self-block,
    /// and after a union.
    @Test func blockSetCounterpartsAgreeWithPairs() {
        var random = SplitMix64(seed: 0xB10C)
        var rows: [(blocker: Int64, blocked: Int64)] = [(1, 2), (2, 1), (3, 3), (4, 1)]
        for _ in 0..<300 {
            rows.append((Int64.random(in: 1...60, using: &random), Int64.random(in: 1...60, using: &random)))
        }
        let first = BlockSet(Array(rows[..<150]))
        let blocks = first.union(BlockSet(Array(rows[150...])))
        #expect(blocks == BlockSet(rows))
        let few = BlockSet(Array(rows[..<4]))
        #expect([1, 2, 3, 4, 5].map { Array(few.counterparts(of: $0)) } == [[2, 4], [1], [3], [1], []])
        #expect(blocks.counterparts(of: 61).isEmpty)
        #expect(BlockSet.none.counterparts(of: 1).isEmpty)
        var mismatches: [(Int64, Int64)] = []
        for member in Int64(0)...61 {
            let others = blocks.counterparts(of: member)
            #expect(Array(others) == Array(others).sorted() && Set(others).count == others.count)
            for other in Int64(0)...61 where others.sortedContains(other) != blocks.blocksEitherWay(member, other) {
                mismatches.append((member, other))
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    @Test func clockDefaultsToTokyo() throws {
        let now = try #require(Timestamp(iso8601: "2026-02-28T15:00:00Z"))
        #expect(EvaluationClock(now: now).runDate.description == "2026-03-01")
        #expect(EvaluationClock(now: now).timeZone == TimeZone.tokyo)
        let utc = try #require(TimeZone(identifier: "UTC"))
        #expect(EvaluationClock(now: now, timeZone: utc).runDate.description == "2026-02-28")
    }
}
