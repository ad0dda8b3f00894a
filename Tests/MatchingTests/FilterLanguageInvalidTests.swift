import Testing

@testable import Matching

/// Every invalid form of filter-language.md is rejected with a message naming the key and the problem.
@Suite struct FilterLanguageInvalidTests {
    private func error(_ json: String) -> FilterValidationError? {
        do {
            _ = try FilterConditions.decode(json: json)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: [
        ("[]", "conditions: not a JSON object"),
        ("null", "conditions: not a JSON object"),
        (#""age""#, "conditions: not a JSON object"),
        ("42", "conditions: not a JSON object"),
        ("true", "conditions: not a JSON object"),
        (#"[{"age": {"min": 20}}]"#, "conditions: not a JSON object"),
        ("", "conditions: invalid JSON: unexpected end of input at byte 0"),
        ("   ", "conditions: invalid JSON: unexpected end of input at byte 3"),
        ("age", #"conditions: invalid JSON: expected a value, found "a" at byte 0"#),
        ("{age: 1}", #"conditions: invalid JSON: expected a member name, found "a" at byte 1"#),
        ("{'age': 1}", #"conditions: invalid JSON: expected a member name, found "'" at byte 1"#),
        (#"{"age": {"min": 20},}"#, #"conditions: invalid JSON: expected a member name, found "}" at byte 20"#),
        (#"{"age" {"min": 20}}"#, #"conditions: invalid JSON: expected ":", found "{" at byte 7"#),
        ("{} {}", #"conditions: invalid JSON: unexpected "{" after the document at byte 3"#),
    ])
    func documentIsNotAnObject(json: String, message: String) {
        let error = error(json)
        #expect(error?.description == message)
        #expect(error?.itemKey == nil)
    }

    @Test(arguments: [
        (#"{"favorite_color": true}"#, "favorite_color: unknown item"),
        (#"{"Age": {"min": 20}}"#, "Age: unknown item"),
        (#"{"birth_date": {"min": 20}}"#, "birth_date: unknown item"),
        (#"{"age ": {"min": 20}}"#, #""age ": unknown item"#),
        (#"{"my key": 1}"#, #""my key": unknown item"#),
        (#"{"": 1}"#, #""": unknown item"#),
        (#"{"a\"b\nc": 1}"#, #""a\"b\nc": unknown item"#),
        (#"{"\ud83d\ude00": 1}"#, #""😀": unknown item"#),
        // unknown keys come first, the first in byte order, whatever the member order
        (#"{"age": {"min": 1}, "zzz": 1, "aaa": 2}"#, "aaa: unknown item"),
        (#"{"Zeta": 1, "alpha": 2}"#, "Zeta: unknown item"),
    ])
    func unknownItem(json: String, message: String) {
        #expect(error(json)?.description == message)
    }

    @Test func unknownKeyIsShortenedInMessages() throws {
        let key = String(repeating: "k", count: 60)
        let error = try #require(self.error("{\"\(key)\": 1}"))
        #expect(error.itemKey == "\"" + String(repeating: "k", count: 40) + "…\"")
        #expect(error.problem == "unknown item")
    }

    @Test(arguments: [
        // not an object
        (#"{"age": "25"}"#, #"age: condition is not an object (string "25")"#),
        (#"{"age": 25}"#, #"age: condition is not an object ("25")"#),
        (#"{"age": null}"#, "age: condition is not an object (null)"),
        (#"{"age": [25, 30]}"#, "age: condition is not an object (a list)"),
        (#"{"height": true}"#, "height: condition is not an object (true)"),
        // no bound
        (#"{"age": {}}"#, "age: no bound (min or max)"),
        (#"{"income": {}}"#, "income: no bound (min or max)"),
        // min > max
        (#"{"age": {"min": 40, "max": 30}}"#, "age: min 40 is greater than max 30"),
        (#"{"height": {"min": 181, "max": 180}}"#, "height: min 181 is greater than max 180"),
        (#"{"income": {"min": 9, "max": 1}}"#, "income: min 9 is greater than max 1"),
        // bound outside the domain
        (#"{"age": {"min": 17}}"#, "age: min 17 is outside 18..120"),
        (#"{"age": {"max": 121}}"#, "age: max 121 is outside 18..120"),
        (#"{"age": {"min": -20}}"#, "age: min -20 is outside 18..120"),
        (#"{"age": {"min": -0}}"#, "age: min -0 is outside 18..120"),
        (#"{"height": {"min": 119}}"#, "height: min 119 is outside 120..230"),
        (#"{"height": {"max": 231}}"#, "height: max 231 is outside 120..230"),
        (#"{"income": {"max": 0}}"#, "income: max 0 is outside 1..9"),
        (#"{"income": {"min": 10}}"#, "income: min 10 is outside 1..9"),
        (#"{"age": {"min": 1e3}}"#, "age: min 1e3 is outside 18..120"),
        (#"{"age": {"min": 4294967321}}"#, "age: min 4294967321 is outside 18..120"),
        (
            #"{"age": {"min": 1234567890123456789012345678901234567890}}"#,
            "age: min 1234567890123456789012345678901234567890 is outside 18..120"
        ),
        (
            #"{"age": {"min": 12345678901234567890123456789012345678901}}"#,
            "age: min 1234567890123456789012345678901234567890… is outside 18..120"
        ),
        (#"{"age": {"min": 1e400}}"#, "age: min 1e400 is outside 18..120"),
        // a bound of the wrong type
        (#"{"age": {"min": "25"}}"#, #"age: min is not an integer (string "25")"#),
        (#"{"age": {"min": 25.5}}"#, #"age: min is not an integer ("25.5")"#),
        (#"{"age": {"min": 25.0}}"#, #"age: min is not an integer ("25.0")"#),
        (#"{"age": {"min": 2.55e1}}"#, #"age: min is not an integer ("2.55e1")"#),
        (#"{"age": {"min": 2500e-2}}"#, #"age: min is not an integer ("2500e-2")"#),
        (#"{"age": {"min": 1e-400}}"#, #"age: min is not an integer ("1e-400")"#),
        (#"{"age": {"max": null}}"#, "age: max is not an integer (null)"),
        (#"{"age": {"min": [25]}}"#, "age: min is not an integer (a list)"),
        (#"{"age": {"min": {"value": 25}}}"#, "age: min is not an integer (an object)"),
        (#"{"age": {"min": true}}"#, "age: min is not an integer (true)"),
        (#"{"height": {"min": 150, "max": "180"}}"#, #"height: max is not an integer (string "180")"#),
        // another key
        (#"{"height": {"avg": 170}}"#, #"height: unexpected key "avg""#),
        (#"{"height": {"min": 150, "avg": 170}}"#, #"height: unexpected key "avg""#),
        (#"{"height": {"min": 150, "Max": 170}}"#, #"height: unexpected key "Max""#),
        (#"{"age": {"anyOf": [20]}}"#, #"age: unexpected key "anyOf""#),
        // the order of checks: unexpected keys, min, max, bounds together
        (#"{"height": {"min": 100, "avg": 170}}"#, #"height: unexpected key "avg""#),
        (#"{"height": {"zz": 1, "aa": 2}}"#, #"height: unexpected key "aa""#),
        (#"{"age": {"min": 10, "max": 5}}"#, "age: min 10 is outside 18..120"),
        (#"{"age": {"min": 5.5, "max": 500}}"#, #"age: min is not an integer ("5.5")"#),
        (#"{"age": {"max": 500, "min": 50}}"#, "age: max 500 is outside 18..120"),
    ])
    func invalidRange(json: String, message: String) {
        #expect(error(json)?.description == message)
    }

    @Test(arguments: [
        (#"{"residence": {"anyOf": [49]}}"#, "residence: code 49 is outside 1..48"),
        (#"{"residence": {"anyOf": [13, 14, 49, 50]}}"#, "residence: code 49 is outside 1..48"),
        (#"{"residence": {"anyOf": [13, -1]}}"#, "residence: code -1 is outside 1..48"),
        (#"{"smoking": {"anyOf": [7]}}"#, "smoking: code 7 is outside 1..6"),
        (#"{"gender": {"anyOf": [3]}}"#, "gender: code 3 is outside 1..2"),
        // gender is never unanswered, so 0 is not a gender code
        (#"{"gender": {"anyOf": [0]}}"#, "gender: code 0 is outside 1..2"),
        (#"{"gender": {"anyOf": [1, 0]}}"#, "gender: code 0 is outside 1..2"),
        (
            #"{"occupation": {"anyOf": [99999999999999999999]}}"#,
            "occupation: code 99999999999999999999 is outside 1..60"
        ),
        (#"{"smoking": {"anyOf": []}}"#, "smoking: anyOf is empty"),
        (#"{"smoking": {"anyOf": [1.5]}}"#, #"smoking: code is not an integer ("1.5")"#),
        (#"{"smoking": {"anyOf": [1, "2"]}}"#, #"smoking: code is not an integer (string "2")"#),
        (#"{"smoking": {"anyOf": [null]}}"#, "smoking: code is not an integer (null)"),
        (#"{"smoking": {"anyOf": [[1]]}}"#, "smoking: code is not an integer (a list)"),
        (#"{"smoking": {"anyOf": [1, 9, "x"]}}"#, "smoking: code 9 is outside 1..6"),
        (#"{"smoking": {"anyOf": 1}}"#, #"smoking: anyOf is not a list ("1")"#),
        (#"{"smoking": {"anyOf": {"1": true}}}"#, "smoking: anyOf is not a list (an object)"),
        (#"{"smoking": {"anyOf": "1,5"}}"#, #"smoking: anyOf is not a list (string "1,5")"#),
        (#"{"smoking": {"anyOf": null}}"#, "smoking: anyOf is not a list (null)"),
        (#"{"smoking": {}}"#, "smoking: anyOf is missing"),
        (#"{"smoking": [1, 5]}"#, "smoking: condition is not an object (a list)"),
        (#"{"smoking": 1}"#, #"smoking: condition is not an object ("1")"#),
        (#"{"smoking": {"allOf": [1]}}"#, "smoking: allOf is only for multi-choice items"),
        (#"{"smoking": {"anyOf": [1], "allOf": [1]}}"#, "smoking: allOf is only for multi-choice items"),
        (#"{"smoking": {"anyOf": [1], "none": true}}"#, #"smoking: unexpected key "none""#),
        (#"{"smoking": {"oneOf": [1]}}"#, #"smoking: unexpected key "oneOf""#),
        (#"{"smoking": {"anyof": [1]}}"#, #"smoking: unexpected key "anyof""#),
    ])
    func invalidSingle(json: String, message: String) {
        #expect(error(json)?.description == message)
    }

    @Test(arguments: [
        (#"{"personality": {"anyOf": [2], "allOf": [3]}}"#, "personality: anyOf and allOf together"),
        (#"{"personality": {"anyOf": [], "allOf": []}}"#, "personality: anyOf and allOf together"),
        (#"{"personality": {}}"#, "personality: anyOf or allOf is missing"),
        (#"{"personality": {"allOf": []}}"#, "personality: allOf is empty"),
        (#"{"personality": {"anyOf": []}}"#, "personality: anyOf is empty"),
        (#"{"personality": {"anyOf": [0]}}"#, "personality: code 0 is outside 1..40"),
        (#"{"personality": {"allOf": [1, 41]}}"#, "personality: code 41 is outside 1..40"),
        (#"{"languages": {"allOf": [31]}}"#, "languages: code 31 is outside 1..30"),
        (#"{"communities": {"anyOf": [0]}}"#, "communities: code 0 is outside 1..2147483647"),
        (#"{"communities": {"anyOf": [2147483648]}}"#, "communities: code 2147483648 is outside 1..2147483647"),
        (#"{"communities": {"anyOf": [-2147483648]}}"#, "communities: code -2147483648 is outside 1..2147483647"),
        (#"{"personality": {"allOf": [2.0]}}"#, #"personality: code is not an integer ("2.0")"#),
        (#"{"personality": {"allOf": ["2"]}}"#, #"personality: code is not an integer (string "2")"#),
        (#"{"personality": {"allOf": 2}}"#, #"personality: allOf is not a list ("2")"#),
        (#"{"personality": [2, 9]}"#, "personality: condition is not an object (a list)"),
        (#"{"personality": {"anyOf": [2], "noneOf": [3]}}"#, #"personality: unexpected key "noneOf""#),
        (#"{"personality": {"noneOf": [3], "anyOf": [2], "allOf": [1]}}"#, #"personality: unexpected key "noneOf""#),
    ])
    func invalidMulti(json: String, message: String) {
        #expect(error(json)?.description == message)
    }

    @Test(arguments: [
        (#"{"has_photo": "true"}"#, #"has_photo: condition is not true or false (string "true")"#),
        (#"{"has_photo": 1}"#, #"has_photo: condition is not true or false ("1")"#),
        (#"{"has_photo": 0}"#, #"has_photo: condition is not true or false ("0")"#),
        (#"{"verified": null}"#, "verified: condition is not true or false (null)"),
        (#"{"verified": {"value": true}}"#, "verified: condition is not true or false (an object)"),
        (#"{"has_introduction": [true]}"#, "has_introduction: condition is not true or false (a list)"),
    ])
    func invalidFlag(json: String, message: String) {
        #expect(error(json)?.description == message)
    }

    @Test(arguments: [
        (#"{"last_login": {"withinDays": 0}}"#, "last_login: withinDays 0 is outside 1..365"),
        (#"{"last_login": {"withinDays": 366}}"#, "last_login: withinDays 366 is outside 1..365"),
        (#"{"last_login": {"withinDays": -7}}"#, "last_login: withinDays -7 is outside 1..365"),
        (#"{"registered": {"withinDays": 100000}}"#, "registered: withinDays 100000 is outside 1..365"),
        (#"{"last_login": {}}"#, "last_login: withinDays is missing"),
        (#"{"last_login": {"withinDays": "7"}}"#, #"last_login: withinDays is not an integer (string "7")"#),
        (#"{"last_login": {"withinDays": 7.5}}"#, #"last_login: withinDays is not an integer ("7.5")"#),
        (#"{"last_login": {"withinDays": null}}"#, "last_login: withinDays is not an integer (null)"),
        (#"{"last_login": {"withinDays": 7, "days": 1}}"#, #"last_login: unexpected key "days""#),
        (#"{"last_login": {"withinHours": 7}}"#, #"last_login: unexpected key "withinHours""#),
        (#"{"registered": 7}"#, #"registered: condition is not an object ("7")"#),
        (#"{"registered": "2026-01-01"}"#, #"registered: condition is not an object (string "2026-01-01")"#),
    ])
    func invalidRecency(json: String, message: String) {
        #expect(error(json)?.description == message)
    }

    @Test(arguments: [
        // the first invalid condition in catalogue order, whatever the member order
        (#"{"smoking": {"anyOf": [9]}, "age": {"min": 1}}"#, "age: min 1 is outside 18..120"),
        (#"{"registered": {}, "has_photo": 1, "gender": {"anyOf": [0]}}"#, "gender: code 0 is outside 1..2"),
        (#"{"registered": {}, "has_photo": 1}"#, #"has_photo: condition is not true or false ("1")"#),
        (#"{"has_photo": 1, "unknown": {}}"#, "unknown: unknown item"),
    ])
    func severalProblemsReportTheFirst(json: String, message: String) {
        #expect(error(json)?.description == message)
    }

    @Test func errorCarriesKeyAndProblem() throws {
        let error = try #require(self.error(#"{"age": {"min": 40, "max": 30}}"#))
        #expect(error.itemKey == "age")
        #expect(error.problem == "min 40 is greater than max 30")
        #expect(error == FilterValidationError(itemKey: "age", problem: "min 40 is greater than max 30"))
        let whole = try #require(self.error("[]"))
        #expect(whole.itemKey == nil)
        #expect(whole.problem == "not a JSON object")
    }
}
