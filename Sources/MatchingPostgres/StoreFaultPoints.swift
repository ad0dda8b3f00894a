/// The instants of a run at which the PostgreSQL store lets a test interrupt it. The store only calls
/// `reach`; what happens there (nothing, a record, a SIGKILL) belongs to whoever built the store. The
/// production binary passes none.
public enum StoreFaultPoint: String, Sendable, CaseIterable {
    /// The candidates are read; nothing is written.
    case afterRead = "after-read"
    /// A unit's rows are written inside its open transaction.
    case unitBeforeCommit = "unit-before-commit"
    /// A unit has committed.
    case unitAfterCommit = "unit-after-commit"
    /// Every unit has committed; the run is not yet marked succeeded.
    case beforeFinish = "before-finish"
    /// A retention batch has deleted its pairs and not yet their waiting-list entries, in its open transaction.
    case sweepBetweenPairsAndEntries = "sweep-between-pairs-and-entries"
}

/// The seam: called by `PostgresMatchingStore` at each `StoreFaultPoint`, on the thread doing the work.
public protocol StoreFaultPoints: Sendable {
    func reach(_ point: StoreFaultPoint)
}
