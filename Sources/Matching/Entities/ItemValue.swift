import Chronology

/// A profile's value for one MasterItem, in the shape of the item's column (`ColumnStorage`).
public enum ItemValue: Sendable, Hashable {
    /// A nullable integer column (`height_cm`, `income_band`); nil is unanswered (NULL).
    case integer(Int32?)
    /// A nullable date column (`birth_date`, from which age derives); nil is unanswered.
    case date(CalendarDate?)
    /// A single-choice code; 0 is unanswered.
    case code(Int16)
    /// A multi-choice set (`smallint[]` and `int[]`, widened); empty is unanswered.
    /// The order and any repetition are the column's; evaluation treats it as a set.
    case codes([Int32])
    case flag(Bool)
    /// A `timestamptz NOT NULL` column.
    case timestamp(Timestamp)

    /// Whether this value has the shape that `storage` holds.
    public func fits(_ storage: ColumnStorage) -> Bool {
        switch (self, storage) {
        case (.integer, .nullableSmallint), (.date, .nullableDate), (.code, .smallint),
            (.codes, .smallintArray), (.codes, .integerArray), (.flag, .boolean), (.timestamp, .timestamptz):
            return true
        default:
            return false
        }
    }
}
