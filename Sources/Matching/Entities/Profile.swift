import Chronology

/// A member's profile as the worker sees it: status, plan, and one value per MasterItem.
public struct Profile: Sendable, Hashable {
    public let id: Int64
    /// 1 active, 2 hidden, 3 suspended, 4 deleted; any other value is not active.
    public let status: Int16
    /// 0 free, 1 paid.
    public let plan: Int16
    /// One value per `MasterItem.all` entry, in that order, each in its item's column shape.
    public let values: [ItemValue]

    public init(id: Int64, status: Int16, plan: Int16, values: [ItemValue]) {
        precondition(
            values.count == MasterItem.all.count,
            "a profile needs \(MasterItem.all.count) values, one per MasterItem, got \(values.count)")
        assert(
            zip(values, MasterItem.all).allSatisfy { $0.fits($1.storage) },
            "a profile value does not fit its item's column")
        self.id = id
        self.status = status
        self.plan = plan
        // An infinite timestamp (`Int64.max`) counts as NULL (runs.md), as the PostgreSQL read makes it: one value
        // for every reader (the cap's order, the engines' login prefix, the recency items, the odd-value count).
        // Found by review in session 32: a profile built in memory with one sorted first and passed withinDays.
        func isInfinite(_ value: ItemValue) -> Bool {
            if case .timestamp(let stamp) = value { stamp.microsecondsSinceEpoch == .max } else { false }
        }
        // Copied only when one is there: profiles are built in bulk by the seeder and the in-memory store.
        self.values =
            values.contains(where: isInfinite) ? values.map { isInfinite($0) ? .timestamp(.missing) : $0 } : values
    }

    public var isActive: Bool { PairEligibility.isActive(status) }

    /// Whether the row holds a value a run counts as odd (runs.md, "Eligibility"): a status other than 1...4, a
    /// plan other than 0 or 1, or an item value its item calls odd (`AnyMasterItem.holdsOddValue`).
    public var heldOddValues: Bool {
        !(1...4).contains(status) || !(0...1).contains(plan)
            || MasterItem.all.contains { $0.holdsOddValue(values[$0.index]) }
    }

    /// Whether going from `old` to this profile is a change for matching (runs.md "Incremental run"): its
    /// status or a value of a non-recency item differs. A login, a plan change or a recency value alone is not.
    public func isMatchingChange(from old: Profile) -> Bool {
        id != old.id || status != old.status
            || MasterItem.all.contains { item in
                item.kind != .recency && values[item.index] != old.values[item.index]
            }
    }

    public func value(of item: AnyMasterItem) -> ItemValue {
        values[item.index]
    }

    /// The `last_login` item's value (`last_login_at`).
    public var lastLoginAt: Timestamp {
        guard case .timestamp(let value) = values[Profile.lastLoginIndex] else {
            preconditionFailure("last_login holds a non-timestamp value")
        }
        return value
    }

    private static let lastLoginIndex = MasterItem.LastLogin.item.index

    /// Convenience for tests and seeds: starts from an all-unanswered profile (every other
    /// `timestamptz` item at `createdAt`), sets `last_login` to `lastLoginAt`, then sets `values` by
    /// item key. An unknown key or a value of the wrong shape is a programming error.
    public static func make(
        id: Int64, status: Int16 = Profile.Status.active, plan: Int16 = 0, lastLoginAt: Timestamp,
        createdAt: Timestamp, _ values: [String: ItemValue] = [:]
    ) -> Profile {
        var all = MasterItem.all.map { $0.storage.unansweredValue ?? .timestamp(createdAt) }
        all[lastLoginIndex] = .timestamp(lastLoginAt)
        for (key, value) in values {
            guard let item = MasterItem.item(forKey: key) else {
                preconditionFailure("Profile.make: unknown item \(key)")
            }
            precondition(value.fits(item.storage), "Profile.make: \(key) cannot hold \(value)")
            all[item.index] = value
        }
        return Profile(id: id, status: status, plan: plan, values: all)
    }
}

extension Profile {
    /// The `profiles.status` codes (runs.md); any other value is not active.
    public enum Status {
        public static let active: Int16 = 1
        public static let hidden: Int16 = 2
        public static let suspended: Int16 = 3
        public static let deleted: Int16 = 4

        /// "1 (active)", "7 (unknown)".
        public static func describe(_ status: Int16) -> String {
            let name =
                switch status {
                case active: "active"
                case hidden: "hidden"
                case suspended: "suspended"
                case deleted: "deleted"
                default: "unknown"
                }
            return "\(status) (\(name))"
        }
    }

    /// The `profiles.plan` codes: 0 free, 1 paid. Plans are ordered: a plan includes every lower one.
    public enum Plan {
        public static let free: Int16 = 0
        public static let paid: Int16 = 1

        /// "0 (free)", "1 (paid)", "5 (unknown)".
        public static func describe(_ plan: Int16) -> String {
            let name =
                switch plan {
                case free: "free"
                case paid: "paid"
                default: "unknown"
                }
            return "\(plan) (\(name))"
        }
    }
}
