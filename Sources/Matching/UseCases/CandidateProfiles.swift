import Chronology

/// The candidates of a run, columnar, with the change windows each is new to.
struct CandidateProfiles {
    let columns: ProfileColumns
    /// Per row, bit `w` set when the profile is new to window `w`; nil when every row is new to every window.
    let windowMasks: [UInt64]?
    /// The snapshot they were read in, when the store can tell which profiles changed since (`ChangedProfiles`).
    let readAt: ChangeMark?

    init(_ columns: ProfileColumns, windowMasks: [UInt64]? = nil, readAt: ChangeMark? = nil) {
        self.columns = columns
        self.windowMasks = windowMasks
        self.readAt = readAt
    }

    var count: Int { columns.count }

    /// `last_login_at` by profile id, to order digests of new matches.
    var lastLogins: [Int64: Timestamp] {
        var logins: [Int64: Timestamp] = [:]
        logins.reserveCapacity(columns.count)
        for (id, at) in zip(columns.ids, columns.lastLoginAt) { logins[id] = Timestamp(microsecondsSinceEpoch: at) }
        return logins
    }

    /// The active candidates new to `window`, in the cap's order.
    func batch(forWindow window: Int) -> CandidateBatch {
        guard let windowMasks else { return CandidateBatch(columns) }
        let bit = UInt64(1) << UInt64(window)
        let rows = windowMasks.indices.filter { windowMasks[$0] & bit != 0 }
        return CandidateBatch(rows.count == columns.count ? columns : columns.selecting(rows: rows))
    }
}
