import Chronology

/// Profiles as columns: one array per field, one entry per row. Immutable and `Sendable`; the
/// engine's input (see `CandidateBatch`). Each MasterItem has one column typed by its `ColumnStorage`,
/// in catalogue order, so that `profile(at:)` rebuilds exactly the `Profile` a row came from.
///
/// Feed it from a binary COPY decode loop with `ProfileColumns.Builder` (no heap allocation per row
/// for scalar fields once capacity is reserved), or from `[Profile]` with `init(_:)`.
public struct ProfileColumns: Sendable {
    /// One item's column.
    public enum Column: Sendable {
        /// `.smallint` (single choice): the code of each row.
        case codes([Int16])
        /// `.nullableSmallint` (range): each row's integer, unanswered (NULL) rows hold 0.
        case integers(NullableInt32Column)
        /// `.nullableDate`: each row's days since 1970-01-01, unanswered rows hold 0.
        case dates(NullableInt32Column)
        /// `.smallintArray` / `.integerArray` (multi choice): each row's codes, as the column held them.
        case codeSets(CodeSetColumn)
        /// `.boolean`: one bit per row.
        case flags(Bitmap)
        /// `.timestamptz`: microseconds since 1970-01-01 00:00:00 UTC.
        case timestamps([Int64])
    }

    /// `profiles.id` of each row.
    public let ids: [Int64]
    /// `profiles.status` of each row.
    public let statuses: [Int16]
    /// `profiles.plan` of each row.
    public let plans: [Int16]
    /// One column per `MasterItem.all` entry, in that order.
    public let columns: [Column]
    /// What the read met: rows with odd values (made total) and rows quarantined (not in the table).
    /// Empty for tables made by `selecting(rows:)`; from profiles, their odd rows (`Profile.heldOddValues`).
    public let readReport: ReadReport

    public var count: Int { ids.count }

    /// The `last_login` item's column (`last_login_at`, microseconds), which the cap orders by.
    public var lastLoginAt: [Int64] {
        guard case .timestamps(let values) = columns[ProfileColumns.lastLoginIndex] else {
            preconditionFailure("last_login is not a timestamptz column")
        }
        return values
    }

    static let lastLoginIndex = MasterItem.LastLogin.item.index

    init(ids: [Int64], statuses: [Int16], plans: [Int16], columns: [Column], readReport: ReadReport = .empty) {
        self.ids = ids
        self.statuses = statuses
        self.plans = plans
        self.columns = columns
        self.readReport = readReport
    }

    /// An empty table.
    public static let empty = Builder().build()

    /// The profiles as columns, in the given order (rows are the array's indices).
    public init(_ profiles: [Profile]) {
        var builder = Builder(reservingCapacity: profiles.count)
        for profile in profiles {
            builder.append(profile)
            // The in-memory store's reads report odd rows as the database's read does.
            if profile.heldOddValues { builder.noteOddValue() }
        }
        self = builder.build()
    }

    /// The profile of `row`, exactly as it was appended.
    public func profile(at row: Int) -> Profile {
        precondition(row >= 0 && row < count, "row \(row) is outside 0..<\(count)")
        let values = columns.map { column -> ItemValue in
            switch column {
            case .codes(let codes): .code(codes[row])
            case .integers(let column): .integer(column[row])
            case .dates(let column): .date(column[row].map(CalendarDate.init(daysSinceEpoch:)))
            case .codeSets(let column): .codes(Array(column[row]))
            case .flags(let bits): .flag(bits[row])
            // `.missing` when NULL
            case .timestamps(let values): .timestamp(Timestamp(microsecondsSinceEpoch: values[row]))
            }
        }
        return Profile(id: ids[row], status: statuses[row], plan: plans[row], values: values)
    }

    /// One item's value at `row`, as `profile(at:)` would give it, without rebuilding the whole profile.
    public func value(of item: AnyMasterItem, at row: Int) -> ItemValue {
        switch columns[item.index] {
        case .codes(let codes): .code(codes[row])
        case .integers(let column): .integer(column[row])
        case .dates(let column): .date(column[row].map(CalendarDate.init(daysSinceEpoch:)))
        case .codeSets(let column): .codes(Array(column[row]))
        case .flags(let bits): .flag(bits[row])
        case .timestamps(let values): .timestamp(Timestamp(microsecondsSinceEpoch: values[row]))
        }
    }

    /// A table of the given rows, in the given order (a row may repeat). Every row must be in `0..<count`.
    public func selecting(rows: [Int]) -> ProfileColumns {
        for row in rows {
            precondition(row >= 0 && row < count, "row \(row) is outside 0..<\(count)")
        }
        return ProfileColumns(
            ids: rows.map { ids[$0] },
            statuses: rows.map { statuses[$0] },
            plans: rows.map { plans[$0] },
            columns: columns.map { column in
                switch column {
                case .codes(let codes): .codes(rows.map { codes[$0] })
                case .integers(let column): .integers(column.selecting(rows: rows))
                case .dates(let column): .dates(column.selecting(rows: rows))
                case .codeSets(let column): .codeSets(column.selecting(rows: rows))
                case .flags(let bits): .flags(bits.selecting(rows: rows))
                case .timestamps(let values): .timestamps(rows.map { values[$0] })
                }
            })
    }

    /// The rows of active profiles (status 1) in the cap's order: latest `last_login_at` first, then
    /// smallest id (then the earlier row, should ids repeat). O(n log n) over the active rows.
    public func activeRowsInCapOrder() -> [Int] {
        let logins = lastLoginAt
        var keys: [CapKey] = []
        keys.reserveCapacity(count)
        for row in 0..<count where PairEligibility.isActive(statuses[row]) {
            keys.append(CapKey(login: logins[row], id: ids[row], row: row))
        }
        keys.sort()
        return keys.map(\.row)
    }

    /// Whether the table already holds only active profiles in the cap's order. O(n).
    public var isActiveInCapOrder: Bool {
        let logins = lastLoginAt
        for row in 0..<count {
            guard PairEligibility.isActive(statuses[row]) else { return false }
            if row > 0 {
                let previous = CapKey(login: logins[row - 1], id: ids[row - 1], row: row - 1)
                let current = CapKey(login: logins[row], id: ids[row], row: row)
                guard previous < current else { return false }
            }
        }
        return true
    }

    private struct CapKey: Comparable {
        let login: Int64
        let id: Int64
        let row: Int

        static func < (a: CapKey, b: CapKey) -> Bool {
            if a.login != b.login || a.id != b.id {
                return CapOrder.precedes(login: a.login, id: a.id, login: b.login, id: b.id)
            }
            return a.row < b.row
        }
    }
}

/// A nullable 32-bit integer column: values, and a bit per row telling whether it is answered.
/// Unanswered rows hold 0 in `values`.
public struct NullableInt32Column: Sendable, Hashable {
    public let values: [Int32]
    public let answered: Bitmap

    init(values: [Int32], answered: Bitmap) {
        precondition(values.count == answered.count)
        self.values = values
        self.answered = answered
    }

    public var count: Int { values.count }

    public subscript(row: Int) -> Int32? {
        answered[row] ? values[row] : nil
    }

    func selecting(rows: [Int]) -> NullableInt32Column {
        NullableInt32Column(values: rows.map { values[$0] }, answered: answered.selecting(rows: rows))
    }
}

/// A column of code sets in compressed sparse rows: row `r`'s codes are
/// `values[offsets[r] ..< offsets[r + 1]]`, in the column's order, repetitions kept.
public struct CodeSetColumn: Sendable, Hashable {
    /// `count + 1` entries, starting at 0, non-decreasing.
    public let offsets: [Int]
    public let values: [Int32]

    init(offsets: [Int], values: [Int32]) {
        precondition(offsets.first == 0 && offsets.last == values.count)
        self.offsets = offsets
        self.values = values
    }

    public var count: Int { offsets.count - 1 }

    public subscript(row: Int) -> ArraySlice<Int32> {
        values[offsets[row]..<offsets[row + 1]]
    }

    func selecting(rows: [Int]) -> CodeSetColumn {
        var newOffsets: [Int] = [0]
        newOffsets.reserveCapacity(rows.count + 1)
        var total = 0
        for row in rows {
            total += offsets[row + 1] - offsets[row]
            newOffsets.append(total)
        }
        var newValues: [Int32] = []
        newValues.reserveCapacity(total)
        for row in rows {
            newValues.append(contentsOf: values[offsets[row]..<offsets[row + 1]])
        }
        return CodeSetColumn(offsets: newOffsets, values: newValues)
    }
}

/// Bits packed 64 to a word, least significant bit first; bits at and beyond `count` are always 0.
public struct Bitmap: Sendable, Hashable {
    public private(set) var words: [UInt64]
    public private(set) var count: Int

    /// `count` zero bits.
    public init(count: Int) {
        precondition(count >= 0)
        self.words = Array(repeating: 0, count: (count + 63) >> 6)
        self.count = count
    }

    /// An empty bitmap with room for `capacity` bits.
    public init(reservingCapacity capacity: Int) {
        self.words = []
        self.words.reserveCapacity((capacity + 63) >> 6)
        self.count = 0
    }

    public subscript(index: Int) -> Bool {
        precondition(index >= 0 && index < count, "bit \(index) is outside 0..<\(count)")
        return words[index >> 6] & (1 << UInt64(index & 63)) != 0
    }

    public mutating func append(_ bit: Bool) {
        if count & 63 == 0 { words.append(0) }
        if bit { words[count >> 6] |= 1 << UInt64(count & 63) }
        count += 1
    }

    /// Removes the last bit.
    mutating func removeLast() {
        precondition(count > 0, "no bit to remove")
        count -= 1
        words[count >> 6] &= ~(1 << UInt64(count & 63))
        if count & 63 == 0 { words.removeLast() }
    }

    /// Sets bit `index` to 1.
    public mutating func set(_ index: Int) {
        precondition(index >= 0 && index < count, "bit \(index) is outside 0..<\(count)")
        words[index >> 6] |= 1 << UInt64(index & 63)
    }

    /// Sets bit `index` to 0.
    public mutating func clear(_ index: Int) {
        precondition(index >= 0 && index < count, "bit \(index) is outside 0..<\(count)")
        words[index >> 6] &= ~(1 << UInt64(index & 63))
    }

    /// The number of 1 bits.
    public var nonzeroBitCount: Int {
        words.reduce(0) { $0 + $1.nonzeroBitCount }
    }

    func selecting(rows: [Int]) -> Bitmap {
        var result = Bitmap(count: rows.count)
        for (index, row) in rows.enumerated() where self[row] {
            result.words[index >> 6] |= 1 << UInt64(index & 63)
        }
        return result
    }
}

extension ProfileColumns {
    /// Appends profiles row by row, field by field, as a binary COPY decode loop reads them.
    ///
    /// Each row starts with `beginRow(id:status:plan:)`, then takes exactly one value for every
    /// MasterItem (any order), through the method of that item's `ColumnStorage`:
    ///
    /// | storage | method |
    /// |---|---|
    /// | `.smallint` | `appendCode(_:item:)` |
    /// | `.nullableSmallint` | `appendInteger(_:item:)` |
    /// | `.nullableDate` | `appendDate(days:item:)` |
    /// | `.smallintArray`, `.integerArray` | `appendCodes(_:item:)`, or `appendCodeElement(_:item:)` per element then `endCodes(item:)` |
    /// | `.boolean` | `appendFlag(_:item:)` |
    /// | `.timestamptz` | `appendTimestamp(microseconds:item:)` |
    ///
    /// `item` is the item's index in `MasterItem.all` (`AnyMasterItem.index`). A missing, repeated or
    /// wrongly typed value is a programming error (precondition). With capacity reserved, scalar
    /// fields append without allocating.
    public struct Builder {
        private var ids: [Int64] = []
        private var statuses: [Int16] = []
        private var plans: [Int16] = []
        private var codeColumns: [[Int16]]
        private var nullableValues: [[Int32]]
        private var nullableAnswered: [Bitmap]
        private var setOffsets: [[Int]]
        private var setValues: [[Int32]]
        private var flagColumns: [Bitmap]
        private var timestampColumns: [[Int64]]
        /// Per item: its position among the columns of its storage's group.
        private let slots: [Int]
        private let storages: [ColumnStorage]
        /// Per item: how many rows hold its value (the current row included once appended).
        private var filled: [Int]
        /// Values appended to the current row.
        private var appendedInRow = 0
        /// Odd and quarantined rows met so far.
        private var report = ReadReport()
        /// Whether the current row has been noted odd.
        private var currentRowOdd = false

        public init(reservingCapacity capacity: Int = 0) {
            let items = MasterItem.all
            storages = items.map(\.storage)
            var slots = Array(repeating: 0, count: items.count)
            var codes = 0, nullables = 0, sets = 0, flags = 0, timestamps = 0
            for (index, storage) in storages.enumerated() {
                switch storage {
                case .smallint: slots[index] = codes; codes += 1
                case .nullableSmallint, .nullableDate: slots[index] = nullables; nullables += 1
                case .smallintArray, .integerArray: slots[index] = sets; sets += 1
                case .boolean: slots[index] = flags; flags += 1
                case .timestamptz: slots[index] = timestamps; timestamps += 1
                }
            }
            self.slots = slots
            filled = Array(repeating: 0, count: items.count)
            ids.reserveCapacity(capacity)
            statuses.reserveCapacity(capacity)
            plans.reserveCapacity(capacity)
            codeColumns = (0..<codes).map { _ in
                var column: [Int16] = []
                column.reserveCapacity(capacity)
                return column
            }
            nullableValues = (0..<nullables).map { _ in
                var column: [Int32] = []
                column.reserveCapacity(capacity)
                return column
            }
            nullableAnswered = (0..<nullables).map { _ in Bitmap(reservingCapacity: capacity) }
            setOffsets = (0..<sets).map { _ in
                var column: [Int] = [0]
                column.reserveCapacity(capacity + 1)
                return column
            }
            setValues = (0..<sets).map { _ in
                var column: [Int32] = []
                column.reserveCapacity(capacity * 2)
                return column
            }
            flagColumns = (0..<flags).map { _ in Bitmap(reservingCapacity: capacity) }
            timestampColumns = (0..<timestamps).map { _ in
                var column: [Int64] = []
                column.reserveCapacity(capacity)
                return column
            }
        }

        /// Rows begun so far.
        public var count: Int { ids.count }

        /// Starts a row. The previous row must have a value for every item.
        public mutating func beginRow(id: Int64, status: Int16, plan: Int16) {
            precondition(
                ids.isEmpty || appendedInRow == storages.count,
                "row \(ids.count - 1) lacks values: \(appendedInRow) of \(storages.count) items")
            ids.append(id)
            statuses.append(status)
            plans.append(plan)
            appendedInRow = 0
            currentRowOdd = false
        }

        /// Notes that the current row held an odd value (counted once per row).
        public mutating func noteOddValue() {
            guard let id = ids.last, !currentRowOdd else { return }
            currentRowOdd = true
            report.noteOdd(id)
        }

        /// Removes the current row, complete or not, and quarantines it with `reason`: the table
        /// is as if the row had never been begun.
        public mutating func discardRow(quarantining reason: String) {
            guard let id = ids.last else { return }
            let row = ids.count
            for item in storages.indices where filled[item] == row {
                let slot = slots[item]
                filled[item] -= 1
                switch storages[item] {
                case .smallint: codeColumns[slot].removeLast()
                case .nullableSmallint, .nullableDate:
                    nullableValues[slot].removeLast()
                    nullableAnswered[slot].removeLast()
                case .smallintArray, .integerArray: setOffsets[slot].removeLast()
                case .boolean: flagColumns[slot].removeLast()
                case .timestamptz: timestampColumns[slot].removeLast()
                }
            }
            // Elements of sets that were filled or left open in this row.
            for (item, storage) in storages.enumerated() where storage == .smallintArray || storage == .integerArray {
                let slot = slots[item]
                let end = setOffsets[slot].last ?? 0
                if setValues[slot].count > end { setValues[slot].removeLast(setValues[slot].count - end) }
            }
            ids.removeLast()
            statuses.removeLast()
            plans.removeLast()
            if currentRowOdd, report.oddIds.last == id {
                report = ReadReport(oddIds: Array(report.oddIds.dropLast()), quarantined: report.quarantined)
            }
            currentRowOdd = false
            appendedInRow = storages.count  // the previous row, if any, is complete
            report.quarantine(QuarantinedRow(kind: .profile, rowId: id, reason: reason))
        }

        /// Quarantines a row that was never begun (its id could not be read); `id` when known.
        public mutating func quarantine(id: Int64?, reason: String) {
            report.quarantine(QuarantinedRow(kind: .profile, rowId: id, reason: reason))
        }

        /// A `.smallint` item's code.
        public mutating func appendCode(_ code: Int16, item: Int) {
            let slot = claim(item, .smallint)
            codeColumns[slot].append(code)
        }

        /// A `.nullableSmallint` item's value; nil is NULL (unanswered).
        public mutating func appendInteger(_ value: Int32?, item: Int) {
            let slot = claim(item, .nullableSmallint)
            nullableValues[slot].append(value ?? 0)
            nullableAnswered[slot].append(value != nil)
        }

        /// A `.nullableDate` item's value as days since 1970-01-01; nil is NULL (unanswered).
        public mutating func appendDate(days: Int32?, item: Int) {
            let slot = claim(item, .nullableDate)
            nullableValues[slot].append(days ?? 0)
            nullableAnswered[slot].append(days != nil)
        }

        /// A multi-choice item's whole set (in the column's order, repetitions kept).
        public mutating func appendCodes<S: Sequence>(_ codes: S, item: Int) where S.Element == Int32 {
            let slot = claimSet(item)
            setValues[slot].append(contentsOf: codes)
            setOffsets[slot].append(setValues[slot].count)
            filled[item] += 1
            appendedInRow += 1
        }

        /// One element of a multi-choice item's set; finish the set with `endCodes(item:)`.
        public mutating func appendCodeElement(_ code: Int32, item: Int) {
            let slot = claimSet(item)
            setValues[slot].append(code)
        }

        /// Ends a multi-choice item's set begun with `appendCodeElement` (or an empty one).
        public mutating func endCodes(item: Int) {
            let slot = claimSet(item)
            setOffsets[slot].append(setValues[slot].count)
            filled[item] += 1
            appendedInRow += 1
        }

        /// A `.boolean` item's value.
        public mutating func appendFlag(_ value: Bool, item: Int) {
            let slot = claim(item, .boolean)
            flagColumns[slot].append(value)
        }

        /// A `.timestamptz` item's value in microseconds since 1970-01-01 00:00:00 UTC.
        public mutating func appendTimestamp(microseconds: Int64, item: Int) {
            let slot = claim(item, .timestamptz)
            timestampColumns[slot].append(microseconds)
        }

        /// A whole profile as one row.
        public mutating func append(_ profile: Profile) {
            beginRow(id: profile.id, status: profile.status, plan: profile.plan)
            for (item, value) in profile.values.enumerated() {
                switch value {
                case .code(let code): appendCode(code, item: item)
                case .integer(let integer): appendInteger(integer, item: item)
                case .date(let date): appendDate(days: date?.daysSinceEpoch, item: item)
                case .codes(let codes): appendCodes(codes, item: item)
                case .flag(let flag): appendFlag(flag, item: item)
                case .timestamp(let timestamp):
                    appendTimestamp(microseconds: timestamp.microsecondsSinceEpoch, item: item)
                }
            }
        }

        /// The table. Every begun row must have a value for every item.
        public consuming func build() -> ProfileColumns {
            precondition(
                ids.isEmpty || appendedInRow == storages.count,
                "row \(ids.count - 1) lacks values: \(appendedInRow) of \(storages.count) items")
            let columns = storages.indices.map { item -> Column in
                let slot = slots[item]
                switch storages[item] {
                case .smallint:
                    return .codes(codeColumns[slot])
                case .nullableSmallint:
                    return .integers(
                        NullableInt32Column(values: nullableValues[slot], answered: nullableAnswered[slot]))
                case .nullableDate:
                    return .dates(NullableInt32Column(values: nullableValues[slot], answered: nullableAnswered[slot]))
                case .smallintArray, .integerArray:
                    return .codeSets(CodeSetColumn(offsets: setOffsets[slot], values: setValues[slot]))
                case .boolean:
                    return .flags(flagColumns[slot])
                case .timestamptz:
                    return .timestamps(timestampColumns[slot])
                }
            }
            return ProfileColumns(ids: ids, statuses: statuses, plans: plans, columns: columns, readReport: report)
        }

        /// Checks that `item` takes a value of `storage` in the current row, and counts it.
        private mutating func claim(_ item: Int, _ storage: ColumnStorage) -> Int {
            precondition(item >= 0 && item < storages.count, "no MasterItem at index \(item)")
            precondition(storages[item] == storage, "item \(item) is stored as \(storages[item]), not \(storage)")
            precondition(filled[item] + 1 == ids.count, "item \(item) has no row to fill, or is already filled")
            filled[item] += 1
            appendedInRow += 1
            return slots[item]
        }

        /// Checks that `item` is a multi-choice item whose value in the current row is still open.
        private func claimSet(_ item: Int) -> Int {
            precondition(item >= 0 && item < storages.count, "no MasterItem at index \(item)")
            precondition(
                storages[item] == .smallintArray || storages[item] == .integerArray,
                "item \(item) is stored as \(storages[item]), not as an array")
            precondition(filled[item] + 1 == ids.count, "item \(item) has no row to fill, or is already filled")
            return slots[item]
        }
    }
}
