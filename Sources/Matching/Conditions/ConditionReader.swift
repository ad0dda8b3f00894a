/// Reads the parts of one item's condition out of its JSON value; every error names the item.
///
/// Within a condition object, unexpected member names are reported first (the first in byte
/// order), then the members in the order the item's kind checks them, so that the error for a given
/// document never depends on the order of its members.
struct ConditionReader {
    let key: String

    func problem(_ text: String) -> FilterValidationError {
        FilterValidationError(itemKey: key, problem: text)
    }

    /// The condition's members, once it is known to be an object with no names outside `allowed`.
    func members(of json: JSONValue, allowed: Set<String>) throws(FilterValidationError) -> [String: JSONValue] {
        guard case .object(let members) = json else {
            throw problem("condition is not an object (\(json.briefDescription))")
        }
        let unexpected = members.keys.filter { !allowed.contains($0) }
        if let first = unexpected.min(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            throw problem("unexpected key \(MessageText.quoted(first))")
        }
        return members
    }

    /// An integer within `domain`, such as a range bound or `withinDays`.
    func integer(
        _ json: JSONValue, named name: String, in domain: ClosedRange<Int32>
    ) throws(FilterValidationError) -> Int32 {
        guard case .number(let number) = json, number.isInteger else {
            throw problem("\(name) is not an integer (\(json.briefDescription))")
        }
        guard let value = number.int64, value >= Int64(domain.lowerBound), value <= Int64(domain.upperBound) else {
            throw problem(
                "\(name) \(MessageText.literal(number)) is outside \(domain.lowerBound)..\(domain.upperBound)")
        }
        return Int32(value)
    }

    /// A non-empty list of codes within `domain` (and 0, if `allowingZero`), sorted and deduplicated.
    /// The first bad code in list order is reported.
    func codes(
        _ json: JSONValue, named name: String, in domain: ClosedRange<Int32>, allowingZero: Bool
    ) throws(FilterValidationError) -> [Int32] {
        guard case .array(let elements) = json else {
            throw problem("\(name) is not a list (\(json.briefDescription))")
        }
        guard !elements.isEmpty else { throw problem("\(name) is empty") }
        var codes: [Int32] = []
        codes.reserveCapacity(elements.count)
        for element in elements {
            guard case .number(let number) = element, number.isInteger else {
                throw problem("code is not an integer (\(element.briefDescription))")
            }
            let value = number.int64
            if allowingZero, value == 0 {
                codes.append(0)
                continue
            }
            guard let value, value >= Int64(domain.lowerBound), value <= Int64(domain.upperBound) else {
                throw problem(
                    "code \(MessageText.literal(number)) is outside \(domain.lowerBound)..\(domain.upperBound)")
            }
            codes.append(Int32(value))
        }
        codes.sort()
        var unique: [Int32] = []
        unique.reserveCapacity(codes.count)
        for code in codes where unique.last != code {
            unique.append(code)
        }
        return unique
    }
}
