import Chronology
import Foundation
import Matching
import PostgresClient

/// The repositories over PostgreSQL (runs.md's tables plus the worker's bookkeeping from `sql/`).
///
/// One work connection serves the reads; units of work are written on it and on up to `writeConnections - 1`
/// more (`withUnitWriters`); run locks and the retention sweepers use connections of their own, opened by
/// `openConnection`, so that a lock lasts exactly as long as its holder's session.
public final class PostgresMatchingStore: @unchecked Sendable {
    public let connection: PostgresConnection
    let openConnection: @Sendable () throws -> PostgresConnection
    /// Connections units of work are written on at once (`withUnitWriters`), the work connection included.
    public let writeConnections: Int
    /// Told when a run reaches each `StoreFaultPoint`; nil (the default, and production) does nothing.
    let faultPoints: (any StoreFaultPoints)?
    /// `blocks`' row estimate, read once per store (a store serves one run's connection): every unit's block
    /// lookups choose their form by it (`blocks(involving:on:tableRows:)`).
    private var blockRows: Double?

    /// The default number of write connections: the server's insert work, not the worker's, bounds a run's
    /// write; two backends use both cores of a small machine, and a third lets the next unit write while the
    /// others wait for their commit's flush (`UnitWriter.writingLimit`; README, "Performance").
    public static let defaultWriteConnections = 3
    /// The retention sweep's expired clocks a run, the newest ones and as many older ones (`RetentionSweep`).
    let sweepClocks: Int
    /// By default: 500 runs' clocks and 500 older ones, a statement each (under a millisecond for a clock
    /// holding only matches that wait).
    public static let defaultSweepClocks = 500
    /// About how long a unit waits for another writer's row lock before it gives up and is written again
    /// (75-125 % of it, `jittered`): far longer than any unit's transaction (seconds), far shorter than the
    /// statement timeout (300 s).
    public static let defaultUnitLockTimeout: Duration = .seconds(60)
    let unitLockTimeout: Duration
    /// How long a retention sweep's batch waits for another writer's row lock before it gives up and is tried
    /// again (`BatchConflicts`): shorter than a unit's, so that where a sweep and a run's unit wait on each other
    /// in a way the deadlock detector cannot see, the sweep, whose work can wait for the next run, gives up
    /// first. (A circle through a run's commit order is seen: units wait for their turn by `awaitUnit`.)
    public static let defaultSweepLockTimeout: Duration = .seconds(10)
    let sweepLockTimeout: Duration
    /// Whether `tryLockAlone` (a run's or backfill's start) reads the schema's version mark again once it holds a run lock
    /// (`MigrationRunner.verifyCurrentUnderRunLock`): `run` and `backfill` check the mark before they lock, and a
    /// `matcher migrate` that began in between would otherwise apply its migrations under the run.
    let verifiesSchemaUnderRunLock: Bool

    /// - Parameters:
    ///   - connection: the work connection (used from one thread at a time; the connection serializes).
    ///   - writeConnections: how many connections write units of work at once (1: the work connection alone).
    ///   - faultPoints: the tests' seam (`StoreFaultPoints`), shared with the extra writers; nil in production.
    ///   - sweepClocks: the retention sweep's expired clocks a run, newest and older ones each.
    ///   - unitLockTimeout: about how long a unit's statement may wait for a row another writer holds.
    ///   - sweepLockTimeout: the same for a retention sweep's batch.
    ///   - verifiesSchemaUnderRunLock: whether a run lock, once taken, checks the schema's version mark again (the
    ///     command line's `run` and `backfill`); refused, the lock is let go and the mark's error thrown.
    ///   - openConnection: opens another connection to the same database, for run locks and extra writers.
    public init(
        connection: PostgresConnection, writeConnections: Int = PostgresMatchingStore.defaultWriteConnections,
        faultPoints: (any StoreFaultPoints)? = nil, sweepClocks: Int = PostgresMatchingStore.defaultSweepClocks,
        unitLockTimeout: Duration = PostgresMatchingStore.defaultUnitLockTimeout,
        sweepLockTimeout: Duration = PostgresMatchingStore.defaultSweepLockTimeout,
        verifiesSchemaUnderRunLock: Bool = false,
        openConnection: @escaping @Sendable () throws -> PostgresConnection
    ) {
        self.verifiesSchemaUnderRunLock = verifiesSchemaUnderRunLock
        self.unitLockTimeout = unitLockTimeout
        self.sweepLockTimeout = sweepLockTimeout
        self.sweepClocks = max(1, sweepClocks)
        self.connection = connection
        self.faultPoints = faultPoints
        self.openConnection = openConnection
        self.writeConnections = max(1, writeConnections)
    }

    /// The columns a profile is read from, in `Profile.values` order after id, status and plan.
    static let profileColumns: String = (["id", "status", "plan"] + MasterItem.all.map(\.column))
        .map { "p.\($0)" }.joined(separator: ", ")

    /// Streams profiles with binary COPY straight into columns (no per-profile objects). `whereSQL`
    /// may read settings made with `set_config` earlier in the same transaction: COPY takes no
    /// parameters, so values reach it only that way. With `trailing`, each row carries one more
    /// bigint column after the profile's, handed to `onTrailing` for each row kept.
    ///
    /// Total over whatever the app wrote (runs.md, "Eligibility"): NULL where NOT NULL was assumed
    /// reads as the column's default (a timestamp as `Timestamp.missing`), NULL array elements are
    /// skipped, infinite or impossible dates and timestamps count as NULL, any integer width is read
    /// (a value beyond the column's type becomes an out-of-domain code, or a clamped range value), arrays
    /// of any dimension are flattened; such rows are listed in the result's `readReport.oddIds`. A row
    /// that still cannot be decoded is left out and listed in `readReport.quarantined`.
    func copyProfiles(
        _ tx: PostgresConnection, from: String = "profiles p", where whereSQL: String = "true",
        expected: Int = 0, trailing: String? = nil,
        onTrailing: (Int64) -> Void = { _ in }
    ) throws -> ProfileColumns {
        var builder = ProfileColumns.Builder(reservingCapacity: expected)
        let items = MasterItem.all
        let storages = items.map(\.storage)
        let domains = items.map { $0.domain ?? Int32.min...Int32.max }
        // Whether a single-choice item may hold 0 (unanswered); gender never does.
        let acceptsUnanswered = items.map(\.acceptsUnanswered)
        let select = Self.profileColumns + (trailing.map { ", \($0)" } ?? "")
        try tx.copyOut("COPY (SELECT \(select) FROM \(from) WHERE \(whereSQL)) TO STDOUT (FORMAT binary)") { row in
            var begun = false
            var column = "id"
            var knownId: Int64?
            do {
                knownId = try row.anyInteger()
                guard let id = knownId else {
                    builder.quarantine(id: nil, reason: "id is NULL; profiles.id must be its primary key")
                    return
                }
                column = "status"
                let status = try row.anyInteger()
                column = "plan"
                let plan = try row.anyInteger()
                builder.beginRow(id: id, status: Int16(clamping: status ?? 0), plan: Int16(clamping: plan ?? 0))
                begun = true
                // runs.md: status 1..4; master-items.md: plan 0 free, 1 paid.
                if status.map({ !(1...4).contains($0) }) ?? true || plan.map({ !(0...1).contains($0) }) ?? true {
                    builder.noteOddValue()
                }
                for (item, storage) in storages.enumerated() {
                    column = items[item].column
                    let domain = domains[item]
                    switch storage {
                    case .smallint:
                        // Single choice: 0 is unanswered; a value beyond smallint can match no listed code.
                        let value = try row.anyInteger()
                        let code = value.flatMap { Int16(exactly: $0) } ?? (value == nil ? 0 : Int16.min)
                        let odd = code == 0 ? !acceptsUnanswered[item] : !domain.contains(Int32(code))
                        if value == nil || odd { builder.noteOddValue() }
                        builder.appendCode(code, item: item)
                    case .nullableSmallint:
                        let value = try row.anyInteger().map { Int32(clamping: $0) }
                        if let value, !domain.contains(value) { builder.noteOddValue() }
                        builder.appendInteger(value, item: item)
                    case .nullableDate:
                        switch try row.dateField() {
                        case .null: builder.appendDate(days: nil, item: item)
                        case .value(let date): builder.appendDate(days: date.daysSinceEpoch, item: item)
                        case .outOfRange:
                            builder.noteOddValue()
                            builder.appendDate(days: nil, item: item)
                        }
                    case .smallintArray, .integerArray:
                        var outside = false
                        let scan = try row.integerElements { element in
                            // Beyond Int32: kept as Int32.min, which no domain holds, so it matches no code.
                            let code = Int32(exactly: element) ?? Int32.min
                            if !domain.contains(code) { outside = true }
                            builder.appendCodeElement(code, item: item)
                        }
                        builder.endCodes(item: item)
                        if outside || scan == nil || (scan?.nullElements ?? 0) > 0 || (scan?.dimensions ?? 0) > 1 {
                            builder.noteOddValue()
                        }
                    case .boolean:
                        let flag = try row.bool()
                        if flag == nil { builder.noteOddValue() }
                        builder.appendFlag(flag ?? false, item: item)
                    case .timestamptz:
                        switch try row.timestampField() {
                        case .value(let instant):
                            builder.appendTimestamp(microseconds: instant.microsecondsSinceEpoch, item: item)
                        case .null, .outOfRange:
                            builder.noteOddValue()
                            builder.appendTimestamp(microseconds: Timestamp.missing.microsecondsSinceEpoch, item: item)
                        }
                    }
                }
                column = "change window"
                if trailing != nil { onTrailing(try row.int64() ?? 0) }
            } catch {
                let problem = (error as? PostgresError)?.message ?? String(describing: error)
                let reason =
                    "\(column): \(problem); the profile is skipped until it reads: fix the value, "
                    + "or the column's type (see matcher migrate)"
                if begun {
                    builder.discardRow(quarantining: reason)
                } else {
                    builder.quarantine(id: knownId, reason: reason)
                }
            }
        }
        return builder.build()
    }

    /// `set_config(name, value, true)`: a transaction-local setting, the parameterized way into COPY.
    func setLocal(_ tx: PostgresConnection, _ settings: [(String, String)]) throws {
        for (name, value) in settings {
            try tx.query("SELECT set_config($1, $2, true)", [.text(name), .text(value)])
        }
    }

    /// A `saved_filters` row, read totally: it never throws for what the row holds. NULL where runs.md
    /// says NOT NULL reads as the column's default (`conditions` as JSON `null`, which makes the filter
    /// invalid; timestamps as `Timestamp.missing`) and marks the filter `heldOddValues`; a value of a
    /// type the worker cannot read (or a NULL id or owner) quarantines the filter (`quarantineReason`).
    /// Any non-NULL `deleted_at`, infinite included, means deleted, as the run's `deleted_at IS NULL` does.
    static func filter(from row: PostgresRow) throws -> SavedFilter {
        var problems: [String] = []
        var odd = false
        func value(_ index: Int) -> PostgresValue { index < row.count ? row[index] : .null }
        func typed<T>(_ index: Int, _ name: String, _ expected: String, _ convert: (PostgresValue) -> T?) -> T? {
            let raw = value(index)
            if raw.isNull { return nil }
            guard let converted = convert(raw) else {
                problems.append("\(name) holds \(raw.typeName), not \(expected)")
                return nil
            }
            return converted
        }
        func instant(_ index: Int, _ name: String) -> Timestamp? {
            typed(index, name, "timestamptz", \.timestampValue)
        }
        let id = typed(0, "id", "an integer", \.int64Value)
        if id == nil { problems.append("id is NULL") }
        let owner = typed(1, "owner_id", "an integer", \.int64Value)
        if owner == nil && !problems.contains(where: { $0.hasPrefix("owner_id") }) {
            problems.append("owner_id is NULL")
        }
        let name = typed(2, "name", "text", \.stringValue)
        let conditions = typed(3, "conditions", "jsonb", \.stringValue)
        let notify = typed(4, "notify", "boolean", \.boolValue)
        let every = typed(5, "notify_every", "interval", \.intervalValue)
        let created = instant(6, "created_at")
        let updated = instant(7, "updated_at")
        let deleted = value(8).isNull ? nil : (instant(8, "deleted_at") ?? Timestamp.missing)
        if [3, 4, 5].contains(where: { value($0).isNull }) { odd = true }  // conditions, notify, notify_every
        func total(_ t: Timestamp?) -> Timestamp {
            guard let t, !t.isMissingOrInfinite else { odd = true; return .missing }
            return t
        }
        let createdAt = total(created), updatedAt = total(updated)
        let reason =
            problems.isEmpty
            ? nil
            : problems.joined(separator: "; ") + "; the filter is skipped until it reads: fix the row, "
                + "or the column's type (see matcher migrate)"
        return SavedFilter(
            id: id ?? 0, ownerId: owner ?? 0, name: name, conditionsJSON: conditions ?? "null", notify: notify ?? true,
            notifyEvery: every.map { NotifyInterval(months: $0.months, days: $0.days, microseconds: $0.microseconds) }
                ?? .oneDay,
            createdAt: createdAt, updatedAt: updatedAt, deletedAt: deleted,
            quarantineReason: reason, heldOddValues: odd)
    }

    static let filterColumns =
        "id, owner_id, name, conditions, notify, notify_every, created_at, updated_at, deleted_at"
}

// MARK: - Profiles

extension PostgresMatchingStore: ProfileRepository {
    public func changedProfiles(windows: [ChangeMark?], upTo: ChangeMark?) throws -> ChangedProfiles {
        // One REPEATABLE READ transaction: the mark is exactly the snapshot the profiles were read in.
        let changed = try connection.transaction(isolation: .repeatableRead) { tx in
            let now = try tx.query("SELECT pg_current_snapshot()::text, clock_timestamp()").rows[0]
            let mark = ChangeMark(try now.string(0))
            var settings: [(String, String)] = []
            var newFor: [String] = []
            var lowerBounds: [String] = []
            for (index, window) in windows.enumerated() {
                let setting = "matcher.since_\(index)"
                switch window.map(ChangeMark.Form.init) {
                case nil:
                    newFor.append("true")
                case .snapshot(let text)?:
                    settings.append((setting, text))
                    newFor.append(
                        """
                        (c.changed_by IS NOT NULL
                         AND NOT pg_visible_in_snapshot(c.changed_by, current_setting('\(setting)')::pg_snapshot))
                        """)
                    lowerBounds.append("pg_snapshot_xmin(current_setting('\(setting)')::pg_snapshot)")
                case .time(let from)?:
                    settings.append((setting, from.iso8601))
                    newFor.append("(c.changed_at >= current_setting('\(setting)')::timestamptz)")
                    lowerBounds.removeAll()
                }
            }
            let everyProfile = windows.contains { $0 == nil }
            var conditions: [String] = []
            if let upTo {
                settings.append(("matcher.up_to", upTo.token))
                conditions.append(
                    """
                    (c.changed_by IS NULL OR pg_visible_in_snapshot(c.changed_by, current_setting('matcher.up_to')::pg_snapshot))
                    """)
            }
            // Every window has a snapshot: only changes after the oldest can be new (the changed_by index).
            if !everyProfile, lowerBounds.count == windows.count, !lowerBounds.isEmpty {
                conditions.append("c.changed_by >= least(\(lowerBounds.joined(separator: ", ")))")
            }
            let mask =
                newFor.isEmpty
                ? "0::bigint"
                : newFor.enumerated()
                    // Quoted: the 64th window's bit is -9223372036854775808, and a minus sign before a bare
                    // literal applies after its cast, which is out of range.
                    .map { "(CASE WHEN \($0.element) THEN '\(Int64(1) << $0.offset)'::bigint ELSE 0::bigint END)" }
                    .joined(separator: " | ")
            conditions.append("(\(mask)) <> 0")
            try setLocal(tx, settings)
            var masks: [UInt64] = []
            let join = everyProfile ? "LEFT JOIN" : "JOIN"
            let profiles = try copyProfiles(
                tx, from: "profiles p \(join) matcher_profile_changes c ON c.profile_id = p.id",
                where: conditions.isEmpty ? "true" : conditions.joined(separator: " AND "),
                trailing: "(\(mask))"
            ) { masks.append(UInt64(bitPattern: $0)) }
            return ChangedProfiles(
                profiles: profiles, windowMasks: masks, mark: upTo ?? mark,
                takenAt: try now.timestamp(1), readAt: mark)
        }
        faultPoints?.reach(.afterRead)
        return changed
    }

    public func marksAhead(_ marks: [ChangeMark]) throws -> [ChangeMark] {
        try marks.filter { mark in
            guard case .snapshot(let text) = ChangeMark.Form(mark) else { return false }
            return try connection.query(
                "SELECT \(Self.snapshotAhead("$1::text::pg_snapshot"))", [.text(text)]
            ).rows[0].bool(0)
        }
    }

    /// Whether the `pg_snapshot` expression `snapshot` is ahead of this server's transactions (progress taken
    /// before a restore or a failover to a server behind): the rule of `marksAhead` and of `matcher status`.
    static func snapshotAhead(_ snapshot: String) -> String {
        "pg_snapshot_xmax(\(snapshot)) > pg_snapshot_xmax(pg_current_snapshot())"
    }

    /// How many change rows are from another server's transactions (see `settleChangesAhead`), up to `limit`:
    /// one range read of the `changed_by` index, empty on a server that was never restored into.
    public func changesAhead(limit: Int = 100_000) throws -> Int {
        Int(
            try connection.query(
                """
                SELECT count(*) FROM (SELECT 1 FROM matcher_profile_changes
                    WHERE changed_by >= pg_snapshot_xmax(pg_current_snapshot()) LIMIT $1) AS ahead
                """, [.int8(Int64(limit))]
            ).rows[0].int64(0))
    }

    /// A change row whose `changed_by` is at or past the next transaction id this server will assign was not
    /// written here (an in-progress transaction's id is below it, and its rows are not visible anyway): it came
    /// with a `pg_dump` restored into a new cluster, whose ids start again from a few hundred. Such a row gets
    /// this transaction's id, and its `changed_at` is kept for the reset's time window.
    public func settleChangesAhead() throws -> Int {
        try connection.transaction { tx in
            try tx.query(
                """
                UPDATE matcher_profile_changes SET changed_by = pg_current_xact_id()
                WHERE changed_by >= pg_snapshot_xmax(pg_current_snapshot())
                """
            ).affectedRows
        }
    }

    public func profiles(_ selection: ProfileSelection) throws -> ProfileColumns {
        try connection.transaction(isolation: .repeatableRead) { tx in
            switch selection {
            case .all:
                return try copyProfiles(tx)
            case .changed(let from, let to):
                // An open end: no bound (a start not given; an end not closed by the backfill, `ProfileSelection.upTo`).
                // An infinite `updated_at` counts as NULL (runs.md), in no window: `-infinity` is not at or after the
                // open start's `-infinity` (found by review in session 32).
                try setLocal(
                    tx, [("matcher.from", from?.iso8601 ?? "-infinity"), ("matcher.to", to?.iso8601 ?? "infinity")])
                return try copyProfiles(
                    tx,
                    where: """
                        p.updated_at >= current_setting('matcher.from')::timestamptz
                        AND p.updated_at < current_setting('matcher.to')::timestamptz AND isfinite(p.updated_at)
                        """)
            }
        }
    }

    public func profile(id: Int64) throws -> Profile? {
        try connection.transaction { tx in
            try setLocal(tx, [("matcher.profile_id", String(id))])
            let found = try copyProfiles(tx, where: "p.id = current_setting('matcher.profile_id')::bigint")
            if let unreadable = found.readReport.quarantined.first(where: { $0.rowId == id }) {
                throw UnreadableProfile(profileId: id, reason: unreadable.reason)
            }
            return found.count > 0 ? found.profile(at: 0) : nil
        }
    }

    public func profileColumns(ids: [Int64]) throws -> ProfileColumns {
        guard !ids.isEmpty else { return .empty }
        return try connection.transaction(isolation: .repeatableRead) { tx in
            try setLocal(tx, [("matcher.profile_ids", Self.arrayText(ids))])
            return try copyProfiles(
                tx, where: "p.id IN (SELECT u.id FROM \(Self.idList("matcher.profile_ids")))",
                expected: ids.count)
        }
    }

    /// The ids set with `setLocal(name, arrayText(ids))` as a relation `u(id)`. An unnest is evaluated once;
    /// `x = ANY (current_setting(…)::bigint[])` in a filter is not a constant, so a sequential scan would
    /// parse the whole list again for every row (at 100k filters, a five-minute statement in the 1M soak).
    static func idList(_ setting: String) -> String {
        "unnest(current_setting('\(setting)')::bigint[]) AS u(id)"
    }

    /// An id list as a PostgreSQL array literal, for `set_config` (COPY takes no parameters).
    static func arrayText(_ ids: [Int64]) -> String {
        "{" + ids.map(String.init).joined(separator: ",") + "}"
    }

    public func owners(ids: [Int64]) throws -> [Int64: FilterOwner] {
        guard !ids.isEmpty else { return [:] }
        var owners: [Int64: FilterOwner] = [:]
        // Total over the app's odd rows: a NULL status reads as 0 and one beyond smallint is clamped (neither is
        // active; `explain` shows the value), a NULL plan is free, a plan beyond smallint is clamped as the
        // profiles' read clamps it (the paid items compare plans in order).
        for row in try connection.query(
            "SELECT id, status, plan FROM profiles WHERE id = ANY($1)", [.int8Array(ids)]
        ).rows {
            let status = try row.optionalInt64(1), plan = try row.optionalInt64(2)
            let owner = FilterOwner(
                id: try row.int64(0), status: Int16(clamping: status ?? 0), plan: Int16(clamping: plan ?? 0),
                readNull: status == nil || plan == nil)
            owners[owner.id] = owner
        }
        return owners
    }

    public func currentTime() throws -> Timestamp {
        try connection.query("SELECT now()").rows[0].timestamp(0)
    }
}

// MARK: - Filters

extension PostgresMatchingStore: FilterRepository {
    public func filters(_ selection: FilterSelection, shard: Shard, afterId: Int64?) throws -> [SavedFilter] {
        // Total over the app's ids: a filter with no owner id is shard 0's, which quarantines it (runs.md: not
        // evaluated) and counts it; and with no cursor every id is read, -2^63 included.
        var sql = """
            SELECT \(Self.filterColumns) FROM saved_filters
            WHERE deleted_at IS NULL
              AND (((owner_id % $1) + $1) % $1 = $2 OR (owner_id IS NULL AND $2 = 0))
              AND ($3::bigint IS NULL OR id > $3)
            """
        var parameters: [PostgresValue] = [
            .int8(Int64(shard.count)), .int8(Int64(shard.index)), afterId.map { .int8($0) } ?? .null,
        ]
        switch selection {
        case .all: break
        case .ids(let ids):
            sql += " AND id = ANY($4)"
            parameters.append(.int8Array(ids))
        case .owners(let owners):
            sql += " AND owner_id = ANY($4)"
            parameters.append(.int8Array(owners))
        }
        sql += " ORDER BY id"
        return try connection.query(sql, parameters).rows.map(Self.filter(from:))
    }

    public func filters(ownedBy ownerIds: [Int64]) throws -> [SavedFilter] {
        guard !ownerIds.isEmpty else { return [] }
        return try connection.query(
            """
            SELECT \(Self.filterColumns) FROM saved_filters
            WHERE deleted_at IS NULL AND owner_id IN (SELECT unnest($1::bigint[])) ORDER BY id
            """, [.int8Array(ownerIds)]  // not `= ANY($1)`: planned per element, 40 ms for 80k owners
        ).rows.map(Self.filter(from:))
    }

    public func filter(id: Int64) throws -> SavedFilter? {
        try connection.query("SELECT \(Self.filterColumns) FROM saved_filters WHERE id = $1", [.int8(id)])
            .rows.first.map(Self.filter(from:))
    }

    @discardableResult
    public func recordValidation(invalid: [InvalidFilter], validIds: [Int64], runId: Int64) throws -> [InvalidFilter] {
        try connection.transaction { tx in
            if !validIds.isEmpty {
                try tx.query("DELETE FROM matcher_invalid_filters WHERE filter_id = ANY($1)", [.int8Array(validIds)])
            }
            // A filter the app has deleted (`deleted_at`) is no run's to read again: its entry goes now, not
            // never (the list holds a row per invalid filter, so this join is small).
            try tx.query(
                """
                DELETE FROM matcher_invalid_filters i USING saved_filters f
                WHERE f.id = i.filter_id AND f.deleted_at IS NOT NULL
                """)
            guard !invalid.isEmpty else { return [] }
            // The reasons listed before this run's, to tell the newly invalid.
            var listed: [Int64: String] = [:]
            for row in try tx.query(
                "SELECT filter_id, reason FROM matcher_invalid_filters WHERE filter_id = ANY($1)",
                [.int8Array(invalid.map(\.filterId))]
            ).rows {
                listed[try row.int64(0)] = try row.string(1)
            }
            try tx.query(
                """
                INSERT INTO matcher_invalid_filters AS i (filter_id, owner_id, item_key, reason, run_id, filter_updated_at)
                SELECT u.filter_id, u.owner_id, NULLIF(u.item_key, ''), u.reason, $5, f.updated_at
                FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS u(filter_id, owner_id, item_key, reason)
                LEFT JOIN saved_filters f ON f.id = u.filter_id
                ON CONFLICT (filter_id) DO UPDATE SET
                    owner_id = EXCLUDED.owner_id, item_key = EXCLUDED.item_key, reason = EXCLUDED.reason,
                    run_id = EXCLUDED.run_id, filter_updated_at = EXCLUDED.filter_updated_at,
                    detected_at = CASE WHEN i.reason = EXCLUDED.reason THEN i.detected_at ELSE clock_timestamp() END
                """,
                [
                    .int8Array(invalid.map(\.filterId)), .int8Array(invalid.map(\.ownerId)),
                    .textArray(invalid.map { $0.error.itemKey ?? "" }),
                    .textArray(invalid.map { $0.error.description }),
                    .int8(runId),
                ])
            return invalid.filter { listed[$0.filterId] != $0.error.description }
        }
    }

    public func recordedInvalidFilters() throws -> [InvalidFilter] {
        try connection.query(
            """
            SELECT filter_id, owner_id, item_key, reason FROM matcher_invalid_filters ORDER BY filter_id
            """
        ).rows.map { row in
            let key = try row.optionalString(2)
            let reason = try row.string(3)
            let prefix = key.map { "\($0): " } ?? ""
            let problem = reason.hasPrefix(prefix) ? String(reason.dropFirst(prefix.count)) : reason
            return InvalidFilter(
                filterId: try row.int64(0), ownerId: try row.int64(1),
                error: FilterValidationError(itemKey: key, problem: problem))
        }
    }
}

// MARK: - Blocks

extension PostgresMatchingStore: BlockRepository {
    /// The blocks are looked up by the ids (both sides indexed) when the table is much larger than the ids
    /// (by its statistics: a daily run's candidates against a table the app has grown for years); otherwise,
    /// as on a first run, the table is streamed once and the blocks of `ids` kept. Either way memory holds
    /// what the run's profiles need, not every block the app ever stored.
    public func blocks(involving ids: [Int64]?) throws -> BlockSet {
        if ids?.isEmpty ?? false { return .none }
        if let ids, ids.count <= Self.blockLookupLimit {
            let rows = try blockRowsEstimate()
            if rows > Double(ids.count) * 8 { return try Self.blocks(involving: ids, on: connection, tableRows: rows) }
        }
        let wanted = ids.map(Set.init)
        var pairs: [(blocker: Int64, blocked: Int64)] = []
        // A query, not the table: `COPY blocks TO` refuses a partitioned table and leaves out inheritance children's
        // rows (blocked pairs recorded, review of session 33).
        try connection.copyOut("COPY (SELECT blocker_id, blocked_id FROM blocks) TO STDOUT (FORMAT binary)") { row in
            // A row with a NULL side (an app that dropped the key) blocks no one.
            let blocker = try row.int64(), blocked = try row.int64()
            guard let blocker, let blocked else { return }
            if wanted.map({ $0.contains(blocker) || $0.contains(blocked) }) ?? true { pairs.append((blocker, blocked)) }
        }
        return BlockSet(pairs)
    }

    /// Ids a block lookup takes as one array parameter (PostgreSQL plans each element: about 13 ms for 28k).
    public static let blockLookupLimit = 100_000

    /// `blocksEstimate` on this store's connection, the first time it is asked for.
    func blockRowsEstimate() throws -> Double {
        if let blockRows { return blockRows }
        let rows = try Self.blocksEstimate(connection)
        blockRows = rows
        return rows
    }

    /// The rows of `blocks` by its statistics (-1 before the first ANALYZE).
    static func blocksEstimate(_ connection: PostgresConnection) throws -> Double {
        try connection.query(
            "SELECT coalesce((SELECT reltuples::float8 FROM pg_class WHERE oid = to_regclass('blocks')), -1)"
        ).rows[0].double(0)
    }

    /// The blocks `ids` made or received, read on `connection` (the store's, or a unit's transaction).
    ///
    /// For a few ids against a large table, two index probes an id (`OFFSET 0` keeps them probes):
    /// `blocker_id = ANY($1) OR blocked_id = ANY($1)` was planned as a scan of the whole table for a unit's few
    /// hundred owners, 28-61 ms against 4-7 ms for 351 owners on 120k blocks (a 30-day 200k soak; two lookups a
    /// unit), and the app's blocks only grow. For many ids the scan is right: 7,500 candidates on that table,
    /// 40-57 ms scanning against 117-247 ms probing. A probe costs about as much as scanning 40 rows, so the
    /// probes are taken when the table holds more than 40 rows an id. A block between two of the ids comes
    /// back twice from the probes; `BlockSet` keeps it once.
    static func blocks(
        involving ids: [Int64], on connection: PostgresConnection, tableRows: Double? = nil
    ) throws -> BlockSet {
        guard !ids.isEmpty else { return .none }
        let probes = try (tableRows ?? blocksEstimate(connection)) > Double(ids.count) * 40
        var pairs: [(blocker: Int64, blocked: Int64)] = []
        for row in try connection.query(
            probes
                ? """
                SELECT b.blocker_id, b.blocked_id FROM unnest($1::bigint[]) AS u(id)
                CROSS JOIN LATERAL (
                    SELECT blocker_id, blocked_id FROM blocks WHERE blocker_id = u.id
                    UNION ALL
                    SELECT blocker_id, blocked_id FROM blocks WHERE blocked_id = u.id
                    OFFSET 0) b
                """
                : "SELECT blocker_id, blocked_id FROM blocks WHERE blocker_id = ANY($1) OR blocked_id = ANY($1)",
            [.int8Array(ids)]
        ).rows {
            // A row with a NULL side (an app that dropped the key) blocks no one, as in the read above.
            guard let blocker = try row.optionalInt64(0), let blocked = try row.optionalInt64(1) else { continue }
            pairs.append((blocker, blocked))
        }
        return BlockSet(pairs)
    }
}

// MARK: - Matches and notifications

extension PostgresMatchingStore: MatchRepository {
    public func recordedPairs(among pairs: [MatchPair], forgottenBefore cutoff: Timestamp?) throws -> RecordedPairs {
        var recorded = Set<MatchPair>()
        guard !pairs.isEmpty else { return RecordedPairs(kept: recorded) }
        let sorted = pairs.sorted()
        // Probes go by filter-id range: one index descent says whether a range holds any pair at all
        // (on a first run none does), and otherwise each pair is one primary-key probe. The descent is
        // asked as the range's first filter id (`min`: PostgreSQL reads the primary key's first entry from $1), not as
        // `EXISTS (... filter_id BETWEEN $1 AND $2)`: for that the planner may take a sequential scan that
        // stops at the first row in range, and a table its units filled in filter order holds that row far
        // in (on a soak's day 3, 2.5M pairs: 21 checks of 69 ms each, against one descent of 0.2 ms).
        var start = 0
        while start < sorted.count {
            let end = min(start + Self.probeChunk, sorted.count)
            let chunk = sorted[start..<end]
            start = end
            guard let first = chunk.first, let last = chunk.last else { continue }
            let any = try connection.query(
                "SELECT coalesce(min(filter_id) <= $2, false) FROM filter_matches WHERE filter_id >= $1",
                [.int8(first.filterId), .int8(last.filterId)]
            ).rows[0].bool(0)
            guard any else { continue }
            // The arrays are unnested in the select list (a ProjectSet, streamed), not `FROM unnest($1, $2)`:
            // a function in FROM first copies its 50,000 rows into a tuplestore.
            for row in try connection.query(
                """
                SELECT u.filter_id, u.profile_id
                FROM (SELECT unnest($1::bigint[]) AS filter_id, unnest($2::bigint[]) AS profile_id) AS u
                WHERE EXISTS (SELECT 1 FROM filter_matches m WHERE m.filter_id = u.filter_id AND m.profile_id = u.profile_id)
                """, [.int8Array(chunk.map(\.filterId)), .int8Array(chunk.map(\.profileId))]
            ).rows {
                recorded.insert(MatchPair(filterId: try row.int64(0), profileId: try row.int64(1)))
            }
        }
        // Of those, the ones kept at the run's clock (recorded since the cutoff, or waiting for a digest); the others
        // are forgotten at the clock, whether a sweep has deleted them yet or does so between the two statements.
        guard let cutoff, !recorded.isEmpty else { return RecordedPairs(kept: recorded) }
        let found = recorded.sorted()
        var kept = Set<MatchPair>()
        for start in stride(from: 0, to: found.count, by: Self.probeChunk) {
            let chunk = found[start..<min(start + Self.probeChunk, found.count)]
            for row in try connection.query(
                RetentionSQL.keptAmong,
                [.int8Array(chunk.map(\.filterId)), .int8Array(chunk.map(\.profileId)), .timestamptz(cutoff)]
            ).rows {
                kept.insert(MatchPair(filterId: try row.int64(0), profileId: try row.int64(1)))
            }
        }
        return RecordedPairs(kept: kept, expired: recorded.subtracting(kept))
    }

    static let probeChunk = 50_000

    /// The noted filters are read first, unlocked, by their partial index (the notify-off filters that recorded
    /// matches: about an eighth of the filters in the seeded worlds); on most days none of them has notify on,
    /// and nothing else is read. Those that do are listed in a transaction of two statements (`listNoted`): the
    /// notes locked in id order, then the matches listed and the notes cleared. A unit that records a match of
    /// the filter holds its note's row from `markUnlisted` to its commit, so the lock waits for it, and the second
    /// statement's snapshot, taken after the lock, sees its match (one statement would list from a snapshot
    /// taken before the wait, and clear a note whose match it never saw; review of session 30). A unit setting the
    /// filter's first note, which the unlocked read could not see yet, is not waited for: its note stays, and the
    /// next run lists its match.
    ///
    /// The pairs listed may be past the retention (a match no run forgot while notify was off waits for its
    /// digest now, review of session 37), which a sweep forgets: a sweep's statement that read the waiting list
    /// before the listing committed would delete the pair and keep its new entry, counted by the next digest
    /// without its pair. So the transaction first tries the sweeper lock, shared (`sweeperLock`), before any row
    /// lock: while another process sweeps, the listing is left to the next run, the notes kept and the matches it
    /// would list returned as `deferred`, which the pass then keeps as recorded (that sweep may not have listed them:
    /// its own listing may have failed, or come before the notify was turned on; the review of the last commits
    /// found a backfill without --notify then recording them again as silent). It never waits for a sweep (the
    /// review of the change: a run waited for another's whole sweep, past its statement timeout, deaf to
    /// SIGTERM). A sweep starting while a listing holds the lock is left to the next run.
    public func listUnlistedMatches(ofNotifying filterIds: [Int64]) throws -> UnlistedListing {
        guard !filterIds.isEmpty else { return .none }
        let notifying = Set(filterIds)
        let noted = try connection.query(
            "SELECT filter_id FROM matcher_filter_state WHERE unlisted_from IS NOT NULL"
        ).rows.map { try $0.int64(0) }.filter { notifying.contains($0) }.sorted()
        guard !noted.isEmpty else { return .none }
        return try connection.transaction { tx in
            let locked = try tx.query("SELECT pg_try_advisory_xact_lock_shared($1, $2)", Self.sweeperLock)
            // A sweep in progress: listed later; meanwhile the pass keeps their matches (`UnlistedListing.deferred`),
            // read without a lock.
            guard try locked.rows[0].bool(0) else {
                let deferred = try tx.query(
                    """
                    SELECT m.filter_id, m.profile_id
                    FROM matcher_filter_state s JOIN filter_matches m ON m.filter_id = s.filter_id
                    WHERE s.filter_id = ANY($1) AND m.notification_id IS NULL AND NOT m.silent
                      AND m.matched_at >= s.unlisted_from
                    """, [.int8Array(noted)]
                ).rows.map { MatchPair(filterId: try $0.int64(0), profileId: try $0.int64(1)) }
                return UnlistedListing(filters: 0, matches: 0, deferred: Set(deferred))
            }
            let listed = try Self.listNoted(noted, on: tx)
            return UnlistedListing(filters: listed.filters, matches: listed.matches)
        }
    }

    /// The noted filters (`UnitTransaction.markUnlisted`) that the app's table shows not deleted with notify on,
    /// as a sweep lists them first: the notes by their partial index, then each filter probed by its key, a cost
    /// of the notes, not of every filter (a join hashed all of `saved_filters`; on the soak's day-30 world,
    /// 20,641 filters and 3,110 noted, 13-26 ms either way, and the difference grows with the filters).
    static func notedNotifying(on connection: PostgresConnection) throws -> [Int64] {
        try connection.query(
            """
            SELECT f.id FROM saved_filters f
            WHERE f.id = ANY (ARRAY(SELECT filter_id FROM matcher_filter_state WHERE unlisted_from IS NOT NULL))
              AND f.deleted_at IS NULL AND \(RetentionSQL.filterNotifies)
            ORDER BY 1
            """
        ).rows.map { try $0.int64(0) }
    }

    /// Lists the unnotified, non-silent matches of `noted` recorded since their notes, and clears the notes, in
    /// the open transaction `tx`: the notes locked in id order first, then the pairs listed (`FOR KEY SHARE`,
    /// which the marks' updates do not wait for: another writer, a unit forgetting an expired pair before
    /// recording it again, may have deleted one and not yet committed; the listing waits for it and leaves the
    /// pair out, review of session 32; such a unit deletes in its own order, so the two can deadlock over two
    /// pairs: the loser is tried again, `WriteConflictRetry` for a run's listing, `BatchConflicts` for a sweep's).
    /// The locks are written to the pairs' tuples (a page dirtied a pair listed): listings come after a filter's
    /// notify is turned on, rare.
    static func listNoted(_ noted: [Int64], on tx: PostgresConnection) throws -> (filters: Int, matches: Int) {
        let locked = try tx.query(
            """
            SELECT filter_id FROM matcher_filter_state
            WHERE filter_id = ANY($1) AND unlisted_from IS NOT NULL
            ORDER BY filter_id FOR UPDATE
            """, [.int8Array(noted)]
        ).rows.map { try $0.int64(0) }
        guard !locked.isEmpty else { return (0, 0) }
        let listed = try tx.query(
            """
            WITH listed AS (
                INSERT INTO matcher_waiting_matches (filter_id, profile_id, matched_at)
                SELECT m.filter_id, m.profile_id, m.matched_at
                FROM matcher_filter_state s JOIN filter_matches m ON m.filter_id = s.filter_id
                WHERE s.filter_id = ANY($1) AND m.notification_id IS NULL AND NOT m.silent
                  AND m.matched_at >= s.unlisted_from
                ORDER BY m.filter_id, m.profile_id
                FOR KEY SHARE OF m
                ON CONFLICT (filter_id, profile_id) DO NOTHING
                RETURNING 1
            ), cleared AS (
                UPDATE matcher_filter_state SET unlisted_from = NULL WHERE filter_id = ANY($1)
            )
            SELECT count(*) FROM listed
            """, [.int8Array(locked)]
        ).rows[0].int64(0)
        return (locked.count, Int(listed))
    }

    /// The unit's unlocked reading (`UnitTransaction.notificationStates`), outside a unit's transaction.
    public func lastNotified(filterIds: [Int64]) throws -> [Int64: Timestamp] {
        try PostgresUnitTransaction(tx: connection).notificationStates(filterIds)
    }

    public func waitingProfiles(filterIds: [Int64], forgetting cutoffs: PassedOverCutoffs) throws -> WaitingProfiles {
        guard !filterIds.isEmpty else { return WaitingProfiles(pairs: [], profiles: .empty) }
        // One snapshot for the pairs and their profiles; each profile read once, however many pairs it has.
        return try connection.transaction(isolation: .repeatableRead) { tx in
            // COPY takes no parameters: the filters and the cutoff come as settings of the transaction.
            try setLocal(
                tx,
                [
                    ("matcher.waiting_filters", Self.arrayText(filterIds)),
                    ("matcher.recorded_cutoff", cutoffs.recordedBefore?.iso8601 ?? "-infinity"),
                    ("matcher.passed_over_cutoff", cutoffs.passedOverBefore?.iso8601 ?? "-infinity"),
                ])
            let waiting =
                "\(Self.idList("matcher.waiting_filters")) JOIN matcher_waiting_matches w ON w.filter_id = u.id"
                + " AND NOT "
                + RetentionSQL.entryForgotten(
                    recordedBefore: "current_setting('matcher.recorded_cutoff')::timestamptz",
                    passedOverBefore: "current_setting('matcher.passed_over_cutoff')::timestamptz")
            var pairs: [MatchPair] = []
            try tx.copyOut("COPY (SELECT w.filter_id, w.profile_id FROM \(waiting)) TO STDOUT (FORMAT binary)") { row in
                pairs.append(MatchPair(filterId: try row.int64() ?? 0, profileId: try row.int64() ?? 0))
            }
            guard !pairs.isEmpty else { return WaitingProfiles(pairs: [], profiles: .empty) }
            let profiles = try copyProfiles(tx, where: "p.id IN (SELECT DISTINCT w.profile_id FROM \(waiting))")
            return WaitingProfiles(pairs: pairs, profiles: profiles)
        }
    }

    /// This store, and `writeConnections - 1` more on connections of their own. A writer that cannot be opened
    /// (the server at `max_connections`, say) is not used: the units are written by fewer, and `shortfall`
    /// says how many and why.
    public func withUnitWriters<T>(
        shortfall: (UnitWriterShortfall) -> Void, _ body: ([any MatchRepository]) throws -> T
    ) throws -> T {
        var extra: [PostgresConnection] = []
        defer { for connection in extra { connection.close() } }
        for _ in 1..<writeConnections {
            do {
                extra.append(try openConnection())
            } catch {
                shortfall(
                    UnitWriterShortfall(
                        opened: 1 + extra.count, configured: writeConnections, reason: "\(error)"))
                break
            }
        }
        let open = openConnection
        return try body(
            [self]
                + extra.map {
                    PostgresMatchingStore(
                        connection: $0, writeConnections: 1, faultPoints: faultPoints,
                        unitLockTimeout: unitLockTimeout, sweepLockTimeout: sweepLockTimeout, openConnection: open)
                })
    }

    /// A unit's transaction waits at most `unitLockTimeout` for a row lock another writer holds, then gives up
    /// as a write conflict (55P03), which `UnitWriter` retries. Units written in parallel wait for their turn
    /// to commit inside their open transactions, through `awaitUnit`, a lock wait PostgreSQL sees: with a
    /// `backfill --notify` writing the same filters, unit i may wait for the backfill while the backfill waits
    /// for unit i + 1, which waits for its turn behind unit i; that circle is found as a deadlock (40P01) within
    /// about `deadlock_timeout` and retried as a write conflict (session 29). The lock timeout is the fallback
    /// for waits outside such a circle, where the statement timeout would have failed the run after minutes.
    /// Each transaction's timeout is drawn from 75-125 % of
    /// `unitLockTimeout` (`jittered`): the two sides of such a circle start waiting within milliseconds of each
    /// other, and with equal timeouts both gave up at once, wrote again, and met again: 120 s instead of 60
    /// (`scripts/fault-scenarios` 6c, session 29).
    ///
    /// A unit commits durably whatever the role's or database's `synchronous_commit`: with `off` a commit is
    /// visible (to the push sender) before it is on disk, so a crash just after it lost a unit whose digests had
    /// been sent, and the next run wrote and sent them again (review of session 33). `off` becomes `local` (the
    /// commit on the server's own disk; whether it waits for a standby stays the DBA's choice); every other
    /// value already flushes locally and stays.
    public func withUnitTransaction<T>(_ body: (any UnitTransaction) throws -> T) throws -> T {
        let result = try connection.transaction { tx in
            try tx.execute(
                """
                SET LOCAL lock_timeout = \(Self.jittered(Self.milliseconds(unitLockTimeout)));
                SELECT set_config('synchronous_commit', 'local', true)
                WHERE current_setting('synchronous_commit') = 'off'
                """)
            let value = try body(PostgresUnitTransaction(tx: tx, blockRows: try blockRowsEstimate()))
            faultPoints?.reach(.unitBeforeCommit)
            return value
        }
        faultPoints?.reach(.unitAfterCommit)
        return result
    }

    /// `milliseconds` drawn from 75-125 % of it, at least 1.
    package static func jittered(_ milliseconds: Int64) -> Int64 {
        max(1, Int64((Double(milliseconds) * Double.random(in: 0.75...1.25)).rounded()))
    }

    /// A duration as whole milliseconds, at least 1 (a `lock_timeout` of 0 would mean none).
    static func milliseconds(_ duration: Duration) -> Int64 {
        max(1, duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }

    /// The lock timeout of a sweep's first listing (`forgetExpired`), in milliseconds: shorter than a batch's, so
    /// that three tries keep a process a few seconds at most (a stop request waits for them).
    static let listingLockTimeoutMilliseconds: Int64 = 1_000

    /// The service-wide sweeper lock: the sweep holds it for its session; a listing of matches recorded while notify
    /// was off holds it shared for its transaction (`listUnlistedMatches`).
    package static let sweeperLock: [PostgresValue] = [.int4(MigrationRunner.lockNamespace), .int4(3)]

    /// The sweepers' session settings.
    /// - JIT off: a batch's estimate is large (an expired day is a million rows) and its work is small; JIT
    ///   would compile for 300 ms per batch (RetentionSQL).
    /// - Commits not waiting for the WAL flush: forgetting is redone by the next sweep if a crash loses the
    ///   last batches, and a batch is still all or nothing (its pairs with their list entries), in commit
    ///   order. The units' commits stay synchronous: their notifications are read by the push sender.
    /// (A batch waits at most `sweepLockTimeout` for a row lock another writer holds: `BatchConflicts`, per
    /// transaction.)
    static let sweeperSession = "SET jit = off; SET synchronous_commit = off"

    public func forgetExpired(
        before cutoff: Timestamp, passedOverBefore: Timestamp?, batchSize: Int, maxBatches: Int, stop: StopRequest
    ) throws -> RetentionOutcome? {
        // One sweeper at a time, service-wide (shards share the table); the others skip. The units are committed
        // by now: a sweep that cannot have its connection (slots full: the database's or the role's connection
        // limit, or max_connections) is left to the next runs, as the helpers below are, rather than failing a
        // run that wrote everything, and every next run that resumes it, for good (review of session 35, with
        // a connection limit of 2).
        let sweeper: PostgresConnection
        do {
            sweeper = try openConnection()
        } catch {
            return RetentionOutcome(
                forgotten: 0, backlog: true, notStartedBecause: "no connection for the sweep: \(error)")
        }
        defer { sweeper.close() }
        let lock = Self.sweeperLock
        guard try sweeper.query("SELECT pg_try_advisory_lock($1, $2)", lock).rows[0].bool(0) else { return nil }
        // Released before the session closes: its backend may outlive the close by a moment, and a sweep
        // started right after this one must not find the lock still held.
        defer { _ = try? sweeper.query("SELECT pg_advisory_unlock($1, $2)", lock) }
        try sweeper.execute(Self.sweeperSession)
        // The sweep is service-wide: first, every notifying filter's matches recorded while its notify was off are
        // listed, whichever shard's, so that it forgets none that waits for a digest (review of session 37: a run
        // of shard 0/2, or a backfill of other filters, forgot them before their own runs listed them). Under
        // this lock, as a batch is (`BatchConflicts`, tried again), with a lock timeout of its own, a second at
        // most: another shard's unit may hold a note or a pair, in the other order (it forgets an expired pair, then
        // notes its filter), and where the listing kept losing a deadlock to one it failed a run that had written
        // everything (the review of the change); waiting the batches' 10 s, three times, it kept a process 30 s
        // past a SIGTERM (the review of the fix). A listing that cannot be done leaves the whole sweep to the next
        // run, as a batch that keeps conflicting stops it (`stoppedByConflict`: the backlog's metrics and runbook).
        if let reason = stop.requestedReason {
            return RetentionOutcome(forgotten: 0, backlog: true, stoppedByRequest: reason)
        }
        let noted = try Self.notedNotifying(on: sweeper)
        var listedFirst = (filters: 0, matches: 0)
        if !noted.isEmpty {
            let listing = BatchConflicts(
                lockTimeoutMilliseconds: min(Self.milliseconds(sweepLockTimeout), Self.listingLockTimeoutMilliseconds))
            guard let listed = try listing.batch(on: sweeper, { tx in try Self.listNoted(noted, on: tx) }) else {
                if let reason = stop.requestedReason {  // asked for during the tries: a stop, as the runbook says
                    return RetentionOutcome(
                        forgotten: 0, backlog: true, conflictsRolledBack: listing.seen.rolledBack,
                        stoppedByRequest: reason)
                }
                return RetentionOutcome(
                    forgotten: 0, backlog: true, conflictsRolledBack: listing.seen.rolledBack,
                    stoppedByConflict: "listing first the matches notifying filters recorded while their notify was "
                        + "off: \(listing.seen.stoppedBy ?? "a conflict with another writer")")
            }
            listedFirst = listed
        }
        // The pairs on as many connections as units are written on (`RetentionSweep`); one is enough to go on.
        let pairs = try RetentionSweep(
            lead: sweeper,
            openHelpers: { [openConnection, writeConnections] in
                var helpers: [PostgresConnection] = []
                for _ in 1..<writeConnections {
                    guard let helper = try? openConnection() else { break }
                    guard (try? helper.execute(Self.sweeperSession)) != nil else {
                        helper.close()
                        break
                    }
                    helpers.append(helper)
                }
                return helpers
            },
            cutoff: cutoff, batchSize: batchSize, maxBatches: maxBatches, clockLimit: sweepClocks,
            lockTimeoutMilliseconds: Self.milliseconds(sweepLockTimeout), faultPoints: faultPoints,
            stopRequested: { stop.requestedReason != nil }
        ).forgetPairs()
        // A bounded batch per transaction: row locks only, short, nothing that blocks the app's readers.
        let conflicts = BatchConflicts(lockTimeoutMilliseconds: Self.milliseconds(sweepLockTimeout))
        // A stop request (SIGTERM) ends each series after its batch in progress, as it ends the pairs' sweep.
        var stoppedEarly: String? = nil
        func sweep(_ sql: String, before: Timestamp, batches: Int) throws -> (deleted: Int, backlog: Bool) {
            var deleted = 0
            for _ in 0..<max(1, batches) {
                if let reason = stop.requestedReason {
                    stoppedEarly = reason
                    return (deleted, true)
                }
                let batch = try conflicts.batch(on: sweeper) { tx in
                    try tx.query(sql, [.timestamptz(before), .int4(Int32(clamping: batchSize))]).affectedRows
                }
                guard let batch else { return (deleted, true) }
                deleted += batch
                if batch < batchSize { return (deleted, false) }
            }
            return (deleted, true)
        }
        // Passed-over entries past their comeback, whatever the pairs' sweep left: no pair depends on them.
        var entries = (deleted: 0, backlog: false)
        if let passedOverBefore {
            entries = try sweep(
                RetentionSQL.forgetPassedOverEntriesBatch, before: passedOverBefore, batches: maxBatches)
        }
        // Notifications go only after a sweep that visited every expired clock: a pair left at a clock not
        // visited may still name one. A stop request ends the sweep here too.
        let stoppedByRequest = stop.requestedReason
        guard pairs.complete, stoppedByRequest == nil else {
            return RetentionOutcome(
                forgotten: pairs.forgotten, backlog: pairs.backlog || entries.backlog || stoppedByRequest != nil,
                bookkeepingForgotten: entries.deleted,
                conflictsRolledBack: pairs.conflicts.rolledBack + conflicts.seen.rolledBack,
                stoppedByConflict: pairs.conflicts.stoppedBy ?? conflicts.seen.stoppedBy,
                stoppedByRequest: stoppedByRequest, listed: listedFirst)
        }
        // Only once no expired pair is left: then no pair still names a notification older than the cutoff.
        let notifications = try sweep(RetentionSQL.forgetNotificationsBatch, before: cutoff, batches: maxBatches)
        var bookkeeping = entries.deleted
        for sql in RetentionSQL.forgetBookkeeping where conflicts.seen.stoppedBy == nil {
            bookkeeping += try sweep(sql, before: cutoff, batches: maxBatches).deleted
        }
        let seen = conflicts.seen
        let stopped = stoppedEarly  // only a series the request cut short: one asked after the last batch is not
        return RetentionOutcome(
            forgotten: pairs.forgotten,
            backlog: notifications.backlog || entries.backlog || seen.stoppedBy != nil || stopped != nil,
            notificationsForgotten: notifications.deleted, bookkeepingForgotten: bookkeeping,
            conflictsRolledBack: pairs.conflicts.rolledBack + seen.rolledBack,
            stoppedByConflict: pairs.conflicts.stoppedBy ?? seen.stoppedBy, stoppedByRequest: stopped,
            listed: listedFirst)
    }

    public func matches(filterId: Int64) throws -> [FilterMatch] {
        try connection.query(
            """
            SELECT filter_id, profile_id, matched_at, run_id, notification_id, mutual, silent FROM filter_matches
            WHERE filter_id = $1 ORDER BY profile_id
            """, [.int8(filterId)]
        ).rows.map { row in
            FilterMatch(
                filterId: try row.int64(0), profileId: try row.int64(1), matchedAt: try row.timestamp(2),
                runId: try row.optionalInt64(3), notificationId: try row.optionalInt64(4),
                mutual: try row.bool(5), silent: try row.bool(6))
        }
    }

    public func notifications(filterId: Int64) throws -> [MatchNotification] {
        try connection.query(
            """
            SELECT id, recipient_id, filter_id, match_count, profile_ids, created_at, sent_at, run_id, mutual_count
            FROM notifications WHERE filter_id = $1 ORDER BY id
            """, [.int8(filterId)]
        ).rows.map { row in
            MatchNotification(
                id: try row.int64(0), recipientId: try row.int64(1), filterId: try row.int64(2),
                matchCount: Int(try row.int32(3)), profileIds: try row.int64Array(4),
                createdAt: try row.timestamp(5), sentAt: try row.optionalTimestamp(6),
                runId: try row.optionalInt64(7), mutualCount: Int(try row.int32(8)))
        }
    }
}
