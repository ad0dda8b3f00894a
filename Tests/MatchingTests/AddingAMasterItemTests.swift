import Chronology
import DeterministicRandom
import Testing

@testable import Matching

// Made-up MasterItems, one per kind (two for range: an integer and a date), declared exactly as a real
// item is in `Sources/Matching/MasterItems` (ARCHITECTURE.md, "Adding a MasterItem"): a key, a column,
// a domain, through a kind protocol. Nothing else is written for them.

private enum FakeScore: RangeItemDefinition {
    static let key = "fake_score"
    static let column = "fake_score"
    static let domain: ClosedRange<Int32>? = 1...10
}

private enum FakeSince: RangeItemDefinition {
    static let key = "fake_years_since"
    static let column = "fake_since_date"
    static let domain: ClosedRange<Int32>? = 0...60
    static let storage = ColumnStorage.nullableDate
}

private enum FakeColour: SingleChoiceItemDefinition {
    static let key = "fake_colour"
    static let column = "fake_colour"
    static let domain: ClosedRange<Int32>? = 1...5
    static let labels = ["red", "green", "blue", "white", "black"]
}

private enum FakeTags: MultiChoiceItemDefinition {
    static let key = "fake_tags"
    static let column = "fake_tags"
    static let domain: ClosedRange<Int32>? = 1...8
}

private enum FakeBadge: FlagItemDefinition {
    static let key = "fake_badge"
    static let column = "fake_badge"
}

private enum FakeSeen: RecencyItemDefinition {
    static let key = "fake_seen"
    static let column = "fake_seen_at"
}

/// The catalogue-driven parts take a new MasterItem from its declaration alone: with a catalogue of
/// `MasterItem.all` and the made-up items after it (their columns after the real ones), the filter
/// language decodes and validates conditions on them, the bitset engine agrees with the reference
/// evaluator on them, and explain shows them. Only the catalogue is passed in explicitly, since
/// `MasterItem.all` is the static list of the real items.
@Suite struct AddingAMasterItemTests {
    static let fakes: [any MasterItemDefinition.Type] = [
        FakeScore.self, FakeSince.self, FakeColour.self, FakeTags.self, FakeBadge.self, FakeSeen.self,
    ]
    static let fakeItems = fakes.enumerated().map { AnyMasterItem($1, index: MasterItem.all.count + $0) }
    static let catalogue = MasterItem.all + fakeItems
    static let clock = BitsetTestWorld.clock

    static func decode(_ json: String) throws -> FilterConditions {
        try FilterConditions.decode(JSONValue.parse(json), catalogue: catalogue)
    }

    static func item(_ key: String) throws -> AnyMasterItem {
        try #require(catalogue.first { $0.key == key })
    }

    @Test func theFilterLanguageDecodesAndValidatesThem() throws {
        let json = """
            {"fake_seen":{"withinDays":7},"gender":{"anyOf":[2]},"fake_score":{"min":3,"max":7},\
            "fake_years_since":{"min":18},"fake_colour":{"anyOf":[2,0]},"fake_tags":{"allOf":[5,2]},\
            "fake_badge":true}
            """
        let conditions = try Self.decode(json)
        #expect(
            conditions.conditions.map(\.item.key) == [
                "gender", "fake_score", "fake_years_since", "fake_colour", "fake_tags", "fake_badge", "fake_seen",
            ])
        #expect(conditions[try Self.item("fake_score")] == .range(min: 3, max: 7))
        #expect(conditions[try Self.item("fake_years_since")] == .range(min: 18, max: nil))
        #expect(conditions[try Self.item("fake_colour")] == .anyOf([0, 2]))
        #expect(conditions[try Self.item("fake_tags")] == .allOf([2, 5]))
        #expect(conditions[try Self.item("fake_badge")] == .flag(true))
        #expect(conditions[try Self.item("fake_seen")] == .withinDays(7))
        #expect(try Self.decode(conditions.canonicalJSON) == conditions)

        let invalid: [(json: String, key: String)] = [
            (#"{"fake_score":{"min":11}}"#, "fake_score"),
            (#"{"fake_colour":{"anyOf":[6]}}"#, "fake_colour"),
            (#"{"fake_tags":{"anyOf":[1],"allOf":[2]}}"#, "fake_tags"),
            (#"{"fake_badge":1}"#, "fake_badge"),
            (#"{"fake_seen":{"withinDays":366}}"#, "fake_seen"),
        ]
        for (json, key) in invalid {
            let document = try JSONValue.parse(json)
            do throws(FilterValidationError) {
                _ = try FilterConditions.decode(document, catalogue: Self.catalogue)
                Issue.record("\(json) was accepted")
            } catch {
                #expect(error.itemKey == key, "\(json): \(error)")
            }
        }
        // The real catalogue does not know them.
        let document = try JSONValue.parse(#"{"fake_score":{"min":1}}"#)
        do throws(FilterValidationError) {
            _ = try FilterConditions.decode(document)
            Issue.record("an item outside the catalogue was accepted")
        } catch {
            #expect(error.description == "fake_score: unknown item")
        }
    }

    /// Random candidates and filters on the made-up items (and on real ones beside them): every form
    /// of every kind, values at and outside the bounds, unanswered ones.
    @Test(arguments: [UInt64(11), 12])
    func theBitsetEngineAgreesWithTheReferenceEvaluator(seed: UInt64) throws {
        var world = BitsetTestWorld(seed: seed)
        let profiles = world.profiles(700)
        let real = ProfileColumns(profiles)
        let fakeColumns = Self.fakeItems.map { item in
            Self.column(profiles.map { _ in world.value(for: item) }, storage: item.storage)
        }
        let batch = CandidateBatch(
            ProfileColumns(
                ids: real.ids, statuses: real.statuses, plans: real.plans, columns: real.columns + fakeColumns))
        let filters = (0..<300).map { index in
            var items = Self.fakeItems.shuffled(using: &world.random).prefix(world.random.int(1...3))
            if world.random.chance(0.3) { items.append(world.random.pick(MasterItem.all)) }
            let conditions = FilterConditions(
                conditions: items.sorted { $0.index < $1.index }.map {
                    FilterCondition(item: $0, form: world.form(for: $0))
                })
            let owner = FilterOwner(id: -Int64(index) - 1, status: 1, plan: 1)
            let filter = SavedFilter(
                id: Int64(index) + 1, ownerId: owner.id, conditionsJSON: conditions.canonicalJSON,
                createdAt: BitsetTestWorld.now, updatedAt: BitsetTestWorld.now)
            return PreparedFilter(filter: filter, owner: owner, conditions: conditions)
        }
        let expected = filters.map { filter in
            (0..<batch.count).filter {
                ReferenceEvaluator.satisfies(batch.columns, row: $0, filter.conditions, clock: Self.clock)
            }.map { batch.ids[$0] }
        }
        #expect(expected.contains { !$0.isEmpty })
        #expect(expected.contains { $0.isEmpty })
        let none = MatchExclusions(existing: [], blocks: .none)
        for (variant, engine) in BitsetEngineTests.engineVariants.enumerated() {
            let results = engine.evaluate(
                filters, against: batch, limit: Int.max, clock: Self.clock, exclusions: none)
            #expect(results.count == filters.count, "variant \(variant)")
            for (filter, (result, wanted)) in zip(filters, zip(results, expected)) where result.profileIds != wanted {
                Issue.record(
                    """
                    variant \(variant) \(filter.conditions.canonicalJSON): got \(result.profileIds.prefix(12)) \
                    (\(result.profileIds.count)), want \(wanted.prefix(12)) (\(wanted.count))
                    """)
            }
        }
    }

    @Test func explainShowsThem() throws {
        let conditions = try Self.decode(
            #"{"fake_score":{"min":3,"max":7},"fake_colour":{"anyOf":[2,0]},"fake_badge":true}"#)
        let values: [String: ItemValue] = [
            "fake_score": .integer(5), "fake_colour": .code(4), "fake_badge": .flag(true),
        ]
        let lines = ReferenceEvaluator.conditionLines(
            conditions, ignoredPaidKeys: [], value: { values[$0.key] ?? .flag(false) }, clock: Self.clock)
        #expect(
            lines == [
                Explanation.ConditionLine(
                    itemKey: "fake_score", profileValue: "5", condition: "between 3 and 7", outcome: .pass),
                Explanation.ConditionLine(
                    itemKey: "fake_colour", profileValue: "4 (white)", condition: "any of 0 (unanswered), 2 (green)",
                    outcome: .fail),
                Explanation.ConditionLine(
                    itemKey: "fake_badge", profileValue: "true", condition: "true", outcome: .pass),
            ])
    }

    /// A column of `storage` holding `values` (one per row), as `ProfileColumns.Builder` lays it out.
    static func column(_ values: [ItemValue], storage: ColumnStorage) -> ProfileColumns.Column {
        var integers: [Int32] = []
        var answered = Bitmap(reservingCapacity: values.count)
        var offsets = [0]
        var elements: [Int32] = []
        var codes: [Int16] = []
        var flags = Bitmap(reservingCapacity: values.count)
        var stamps: [Int64] = []
        for value in values {
            switch value {
            case .integer(let integer):
                integers.append(integer ?? 0)
                answered.append(integer != nil)
            case .date(let date):
                integers.append(date?.daysSinceEpoch ?? 0)
                answered.append(date != nil)
            case .code(let code): codes.append(code)
            case .codes(let set):
                elements += set
                offsets.append(elements.count)
            case .flag(let flag): flags.append(flag)
            case .timestamp(let stamp): stamps.append(stamp.microsecondsSinceEpoch)
            }
        }
        switch storage {
        case .smallint: return .codes(codes)
        case .nullableSmallint: return .integers(NullableInt32Column(values: integers, answered: answered))
        case .nullableDate: return .dates(NullableInt32Column(values: integers, answered: answered))
        case .smallintArray, .integerArray: return .codeSets(CodeSetColumn(offsets: offsets, values: elements))
        case .boolean: return .flags(flags)
        case .timestamptz: return .timestamps(stamps)
        }
    }
}
