import Testing

@testable import Matching

/// Every valid form of filter-language.md decodes to the expected `ConditionForm`.
@Suite struct FilterLanguageValidTests {
    @Test(arguments: [
        // range
        (#"{"age": {"min": 25, "max": 35}}"#, "age", ConditionForm.range(min: 25, max: 35)),
        (#"{"age": {"min": 25}}"#, "age", .range(min: 25, max: nil)),
        (#"{"age": {"max": 35}}"#, "age", .range(min: nil, max: 35)),
        (#"{"age": {"min": 30, "max": 30}}"#, "age", .range(min: 30, max: 30)),
        (#"{"age": {"min": 18, "max": 120}}"#, "age", .range(min: 18, max: 120)),
        (#"{"age": {"max": 25, "min": 20}}"#, "age", .range(min: 20, max: 25)),
        (#"{"height": {"min": 120, "max": 230}}"#, "height", .range(min: 120, max: 230)),
        (#"{"height": {"max": 120}}"#, "height", .range(min: nil, max: 120)),
        (#"{"income": {"min": 1, "max": 9}}"#, "income", .range(min: 1, max: 9)),
        (#"{"income": {"min": 9}}"#, "income", .range(min: 9, max: nil)),
        // integers as PostgreSQL's jsonb reads them: exponents that leave no fraction digit
        (#"{"age": {"min": 2.5e1}}"#, "age", .range(min: 25, max: nil)),
        (#"{"age": {"min": 1E+2}}"#, "age", .range(min: 100, max: nil)),
        (#"{"age": {"min": 30e0}}"#, "age", .range(min: 30, max: nil)),
        // single: sorted, deduplicated; 0 accepts unanswered
        (#"{"residence": {"anyOf": [13, 14, 11]}}"#, "residence", .anyOf([11, 13, 14])),
        (#"{"residence": {"anyOf": [13, 13, 13]}}"#, "residence", .anyOf([13])),
        (#"{"residence": {"anyOf": [48, 1]}}"#, "residence", .anyOf([1, 48])),
        (#"{"smoking": {"anyOf": [0, 1]}}"#, "smoking", .anyOf([0, 1])),
        (#"{"smoking": {"anyOf": [0]}}"#, "smoking", .anyOf([0])),
        (#"{"smoking": {"anyOf": [-0]}}"#, "smoking", .anyOf([0])),
        (#"{"gender": {"anyOf": [2]}}"#, "gender", .anyOf([2])),
        (#"{"gender": {"anyOf": [2, 1]}}"#, "gender", .anyOf([1, 2])),
        (#"{"occupation": {"anyOf": [60]}}"#, "occupation", .anyOf([60])),
        (#"{"housemate": {"anyOf": [5, 4, 3, 2, 1, 0]}}"#, "housemate", .anyOf([0, 1, 2, 3, 4, 5])),
        // multi
        (#"{"personality": {"anyOf": [9, 2]}}"#, "personality", .anyOf([2, 9])),
        (#"{"personality": {"allOf": [1, 2]}}"#, "personality", .allOf([1, 2])),
        (#"{"personality": {"allOf": [40]}}"#, "personality", .allOf([40])),
        (#"{"languages": {"anyOf": [30, 1, 30]}}"#, "languages", .anyOf([1, 30])),
        (#"{"communities": {"anyOf": [2147483647, 1]}}"#, "communities", .anyOf([1, 2_147_483_647])),
        (#"{"communities": {"allOf": [500000]}}"#, "communities", .allOf([500_000])),
        // flag
        (#"{"has_photo": true}"#, "has_photo", .flag(true)),
        (#"{"has_photo": false}"#, "has_photo", .flag(false)),
        (#"{"verified": true}"#, "verified", .flag(true)),
        (#"{"has_introduction": false}"#, "has_introduction", .flag(false)),
        // recency
        (#"{"last_login": {"withinDays": 7}}"#, "last_login", .withinDays(7)),
        (#"{"last_login": {"withinDays": 1}}"#, "last_login", .withinDays(1)),
        (#"{"registered": {"withinDays": 365}}"#, "registered", .withinDays(365)),
        // duplicate names: the last wins, as in jsonb
        (#"{"age": {"min": 20, "min": 30}}"#, "age", .range(min: 30, max: nil)),
        (#"{"age": {"min": 99, "max": 1}, "age": {"max": 30}}"#, "age", .range(min: nil, max: 30)),
        (#"{"has_photo": "yes", "has_photo": true}"#, "has_photo", .flag(true)),
        // escapes in names, whitespace anywhere
        (#"{"\u0061ge": {"m\u0069n": 20}}"#, "age", .range(min: 20, max: nil)),
        ("\n\t{ \"age\" :\r\n { \"min\" : 20 } } \n", "age", .range(min: 20, max: nil)),
    ])
    func decodes(json: String, key: String, form: ConditionForm) throws {
        let decoded = try FilterConditions.decode(json: json)
        #expect(decoded.conditions.count == 1)
        let condition = try #require(decoded.conditions.first)
        #expect(condition.item.key == key)
        #expect(condition.form == form)
    }

    @Test func emptyObjectIsNoCondition() throws {
        #expect(try FilterConditions.decode(json: "{}").isEmpty)
        #expect(try FilterConditions.decode(json: " { } ") == .none)
    }

    @Test func specExampleKeepsCatalogueOrder() throws {
        let json = #"""
            {"gender": {"anyOf": [2]}, "age": {"min": 25, "max": 32},
             "residence": {"anyOf": [13, 14, 11]}, "smoking": {"anyOf": [1, 5]},
             "personality": {"anyOf": [2, 9]}, "has_photo": true,
             "last_login": {"withinDays": 7}}
            """#
        let decoded = try FilterConditions.decode(json: json)
        #expect(
            decoded.conditions.map(\.item.key) == [
                "gender", "age", "residence", "smoking", "personality", "has_photo", "last_login",
            ])
        #expect(
            decoded.conditions.map(\.form) == [
                .anyOf([2]), .range(min: 25, max: 32), .anyOf([11, 13, 14]), .anyOf([1, 5]), .anyOf([2, 9]),
                .flag(true), .withinDays(7),
            ])
        #expect(decoded[MasterItem.Smoking.item] == .anyOf([1, 5]))
        #expect(decoded[MasterItem.Height.item] == nil)
    }

    @Test func memberOrderDoesNotMatter() throws {
        let a = try FilterConditions.decode(json: #"{"last_login": {"withinDays": 3}, "gender": {"anyOf": [1]}}"#)
        let b = try FilterConditions.decode(json: #"{"gender": {"anyOf": [1]}, "last_login": {"withinDays": 3}}"#)
        #expect(a == b)
        #expect(a.conditions.map(\.item.key) == ["gender", "last_login"])
    }

    @Test func everyItemAcceptsAConditionOfItsKind() throws {
        for item in MasterItem.all {
            let value =
                switch item.kind {
                case .range: #"{"min": \#(item.domain?.lowerBound ?? 0)}"#
                case .single, .multi: #"{"anyOf": [\#(item.domain?.upperBound ?? 0)]}"#
                case .flag: "true"
                case .recency: #"{"withinDays": 30}"#
                }
            let decoded = try FilterConditions.decode(json: "{\"\(item.key)\": \(value)}")
            #expect(decoded.conditions.map(\.item) == [item])
        }
    }

    @Test func effectiveConditionsDependOnTheOwnersPlan() throws {
        let decoded = try FilterConditions.decode(json: #"{"communities": {"anyOf": [5]}, "age": {"min": 20}}"#)
        let free = decoded.effective(forOwnerPlan: 0)
        #expect(free.conditions.conditions.map(\.item.key) == ["age"])
        #expect(free.ignoredPaidKeys == ["communities"])
        let paid = decoded.effective(forOwnerPlan: 1)
        #expect(paid.conditions == decoded)
        #expect(paid.ignoredPaidKeys.isEmpty)
        #expect(decoded.effective(forOwnerPlan: 2).conditions == decoded)
        let onlyPaid = try FilterConditions.decode(json: #"{"communities": {"allOf": [5]}}"#)
        #expect(onlyPaid.effective(forOwnerPlan: 0).conditions.isEmpty)
    }

    @Test func canonicalJSONRoundTrips() throws {
        let decoded = try FilterConditions.decode(
            json: #"""
                {"registered": {"withinDays": 30}, "verified": false, "communities": {"allOf": [7, 3]},
                 "height": {"max": 180}, "income": {"min": 3}, "age": {"min": 20, "max": 29}, "gender": {"anyOf": [1, 1]}}
                """#)
        #expect(
            decoded.canonicalJSON
                == #"{"gender":{"anyOf":[1]},"age":{"min":20,"max":29},"height":{"max":180},"income":{"min":3},"communities":{"allOf":[3,7]},"verified":false,"registered":{"withinDays":30}}"#
        )
        #expect(try FilterConditions.decode(json: decoded.canonicalJSON) == decoded)
        #expect(FilterConditions.none.canonicalJSON == "{}")
    }

    @Test func savedFilterDecodesItsConditions() throws {
        let filter = SavedFilter(
            id: 1, ownerId: 2, conditionsJSON: #"{"has_photo": true}"#,
            createdAt: .init(microsecondsSinceEpoch: 0), updatedAt: .init(microsecondsSinceEpoch: 0))
        #expect(filter.notify)
        #expect(filter.notifyEvery == NotifyInterval(months: 0, days: 1, microseconds: 0))
        #expect(!filter.isDeleted)
        #expect(try filter.decodedConditions().conditions.map(\.form) == [.flag(true)])
    }
}
