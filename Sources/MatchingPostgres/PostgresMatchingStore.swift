import Chronology
import Foundation
import Matching
import PostgresClient

/// The repositories over PostgreSQL (runs.md's tables plus the worker's bookkeeping from `sql/`).
///
/// One work connection serves every read and unit of work; run locks live on connections of their
/// own, opened by `openConnection`, so that a lock lasts exactly as long as its holder's session.
public final class PostgresMatchingStore: @unchecked Sendable {
    public let connection: PostgresConnection
    let openConnection: @Sendable () throws -> PostgresConnection

    /// - Parameters:
    ///   - connection: the work connection (used from one thread at a time; the connection serializes).
    ///   - openConnection: opens another connection to the same database, for run locks.
    public init(connection: PostgresConnection, openConnection: @escaping @Sendable () throws -> PostgresConnection) {
        self.connection = connection
        self.openConnection = openConnection
    }

    /// The columns a profile is read from, in `Profile.values` order after id, status and plan.
    static let profileColumns: String = (["id", "status", "plan"] + MasterItem.all.map(\.column))
        .map { "p.\($0)" }.joined(separator: ", ")

    /// Streams profiles with binary COPY straight into columns (no per-profile objects). `whereSQL`
    /// may read settings made with `set_config` earlier in the same transaction: COPY takes no
    /// parameters, so values reach it only that way.
    ///
    /// Total over whatever the app wrote (runs.md, "Eligibility"): NULL where NOT NULL was assumed
    /// reads as the column's default (a timestamp as `Timestamp.missing`), NULL array elements are
    /// skipped, infinite or impossible dates and timestamps count as NULL, any integer width is read
    /// (a value beyond the column's type becomes an out-of-domain code, or a clamped range value), arrays
    /// of any dimension are flattened; such rows are listed in the result's `readReport.oddIds`. A row
    /// that still cannot be decoded is left out and listed in `readReport.quarantined`.
    func copyProfiles(_ tx: PostgresConnection, from: String = "profiles p", where whereSQL: String = "true",
                      expected: Int = 0) throws -> ProfileColumns {
        var builder = ProfileColumns.Builder(reservingCapacity: expected)
        let items = MasterItem.all
        let storages = items.map(\.storage)
        let domains = items.map { $0.domain ?? Int32.min...Int32.max }
        try tx.copyOut("COPY (SELECT \(Self.profileColumns) FROM \(from) WHERE \(whereSQL)) TO STDOUT (FORMAT binary)") { row in
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
                if status.map({ !(1...4).contains($0) }) ?? true || plan == nil { builder.noteOddValue() }
                for (item, storage) in storages.enumerated() {
                    column = items[item].column
                    let domain = domains[item]
                    switch storage {
                    case .smallint:
                        // Single choice: 0 is unanswered; a value beyond smallint can match no listed code.
                        let value = try row.anyInteger()
                        let code = value.flatMap { Int16(exactly: $0) } ?? (value == nil ? 0 : Int16.min)
                        if value == nil || (code != 0 && !domain.contains(Int32(code))) { builder.noteOddValue() }
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
            } catch {
                let problem = (error as? PostgresError)?.message ?? String(describing: error)
                let reason = "\(column): \(problem); the profile is skipped until it reads: fix the value, "
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
        if owner == nil && !problems.contains(where: { $0.hasPrefix("owner_id") }) { problems.append("owner_id is NULL") }
        let name = typed(2, "name", "text", \.stringValue)
        let conditions = typed(3, "conditions", "jsonb", \.stringValue)
        let notify = typed(4, "notify", "boolean", \.boolValue)
        let every = typed(5, "notify_every", "interval", \.intervalValue)
        let created = instant(6, "created_at")
        let updated = instant(7, "updated_at")
        let deleted = value(8).isNull ? nil : (instant(8, "deleted_at") ?? Timestamp.missing)
        if [3, 4, 5].contains(where: { value($0).isNull }) { odd = true }   // conditions, notify, notify_every
        func total(_ t: Timestamp?) -> Timestamp {
            guard let t, !t.isMissingOrInfinite else { odd = true; return .missing }
            return t
        }
        let createdAt = total(created), updatedAt = total(updated)
        let reason = problems.isEmpty ? nil
            : problems.joined(separator: "; ") + "; the filter is skipped until it reads: fix the row, "
                + "or the column's type (see matcher migrate)"
        return SavedFilter(
            id: id ?? 0, ownerId: owner ?? 0, name: name, conditionsJSON: conditions ?? "null", notify: notify ?? true,
            notifyEvery: every.map { NotifyInterval(months: $0.months, days: $0.days, microseconds: $0.microseconds) }
                ?? .oneDay,
            createdAt: createdAt, updatedAt: updatedAt, deletedAt: deleted,
            quarantineReason: reason, heldOddValues: odd)
    }

    static let filterColumns = "id, owner_id, name, conditions, notify, notify_every, created_at, updated_at, deleted_at"
}

// MARK: - Profiles

extension PostgresMatchingStore: ProfileRepository {
    public func changedProfiles(since: ChangeMark?, upTo: ChangeMark?) throws -> ChangedProfiles {
        // One REPEATABLE READ transaction: the mark is exactly the snapshot the profiles were read in.
        let changed = try connection.transaction(isolation: .repeatableRead) { tx in
            let mark = ChangeMark(try tx.query("SELECT pg_current_snapshot()::text").rows[0].string(0))
            var conditions: [String] = []
            var settings: [(String, String)] = []
            if let since {
                settings.append(("matcher.since", since.token))
                conditions.append("""
                    c.changed_by >= pg_snapshot_xmin(current_setting('matcher.since')::pg_snapshot)
                    AND NOT pg_visible_in_snapshot(c.changed_by, current_setting('matcher.since')::pg_snapshot)
                    """)
            }
            if let upTo {
                settings.append(("matcher.up_to", upTo.token))
                conditions.append("pg_visible_in_snapshot(c.changed_by, current_setting('matcher.up_to')::pg_snapshot)")
            }
            try setLocal(tx, settings)
            let profiles: ProfileColumns
            if conditions.isEmpty {
                profiles = try copyProfiles(tx)
            } else {
                profiles = try copyProfiles(
                    tx, from: "profiles p JOIN matcher_profile_changes c ON c.profile_id = p.id",
                    where: conditions.joined(separator: " AND "))
            }
            return ChangedProfiles(profiles: profiles, mark: upTo ?? mark)
        }
        FaultInjection.reach("after-read")
        return changed
    }

    public func profiles(_ selection: ProfileSelection) throws -> ProfileColumns {
        try connection.transaction(isolation: .repeatableRead) { tx in
            switch selection {
            case .all:
                return try copyProfiles(tx)
            case .changed(let from, let to):
                try setLocal(tx, [("matcher.from", from.iso8601), ("matcher.to", to.iso8601)])
                return try copyProfiles(tx, where: """
                    p.updated_at >= current_setting('matcher.from')::timestamptz
                    AND p.updated_at < current_setting('matcher.to')::timestamptz
                    """)
            }
        }
    }

    public func profile(id: Int64) throws -> Profile? {
        try connection.transaction { tx in
            try setLocal(tx, [("matcher.profile_id", String(id))])
            let found = try copyProfiles(tx, where: "p.id = current_setting('matcher.profile_id')::bigint")
            return found.count > 0 ? found.profile(at: 0) : nil
        }
    }

    public func owners(ids: [Int64]) throws -> [Int64: FilterOwner] {
        guard !ids.isEmpty else { return [:] }
        var owners: [Int64: FilterOwner] = [:]
        for row in try connection.query("SELECT id, status, plan FROM profiles WHERE id = ANY($1)", [.int8Array(ids)]).rows {
            let owner = FilterOwner(id: try row.int64(0), status: try row.int16(1), plan: try row.int16(2))
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
        var sql = """
            SELECT \(Self.filterColumns) FROM saved_filters
            WHERE deleted_at IS NULL AND ((owner_id % $1) + $1) % $1 = $2 AND id > $3
            """
        var parameters: [PostgresValue] = [.int8(Int64(shard.count)), .int8(Int64(shard.index)), .int8(afterId ?? .min)]
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

    public func filter(id: Int64) throws -> SavedFilter? {
        try connection.query("SELECT \(Self.filterColumns) FROM saved_filters WHERE id = $1", [.int8(id)])
            .rows.first.map(Self.filter(from:))
    }

    public func recordValidation(invalid: [InvalidFilter], validIds: [Int64], runId: Int64) throws {
        try connection.transaction { tx in
            if !validIds.isEmpty {
                try tx.query("DELETE FROM matcher_invalid_filters WHERE filter_id = ANY($1)", [.int8Array(validIds)])
            }
            guard !invalid.isEmpty else { return }
            try tx.query("""
                INSERT INTO matcher_invalid_filters AS i (filter_id, owner_id, item_key, reason, run_id, filter_updated_at)
                SELECT u.filter_id, u.owner_id, NULLIF(u.item_key, ''), u.reason, $5, f.updated_at
                FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS u(filter_id, owner_id, item_key, reason)
                LEFT JOIN saved_filters f ON f.id = u.filter_id
                ON CONFLICT (filter_id) DO UPDATE SET
                    owner_id = EXCLUDED.owner_id, item_key = EXCLUDED.item_key, reason = EXCLUDED.reason,
                    run_id = EXCLUDED.run_id, filter_updated_at = EXCLUDED.filter_updated_at,
                    detected_at = CASE WHEN i.reason = EXCLUDED.reason THEN i.detected_at ELSE clock_timestamp() END
                """,
                [.int8Array(invalid.map(\.filterId)), .int8Array(invalid.map(\.ownerId)),
                 .textArray(invalid.map { $0.error.itemKey ?? "" }), .textArray(invalid.map { $0.error.description }),
                 .int8(runId)])
        }
    }

    public func recordedInvalidFilters() throws -> [InvalidFilter] {
        try connection.query("""
            SELECT filter_id, owner_id, item_key, reason FROM matcher_invalid_filters ORDER BY filter_id
            """).rows.map { row in
            let key = try row.optionalString(2)
            let reason = try row.string(3)
            let prefix = key.map { "\($0): " } ?? ""
            let problem = reason.hasPrefix(prefix) ? String(reason.dropFirst(prefix.count)) : reason
            return InvalidFilter(filterId: try row.int64(0), ownerId: try row.int64(1),
                                 error: FilterValidationError(itemKey: key, problem: problem))
        }
    }
}

// MARK: - Blocks

extension PostgresMatchingStore: BlockRepository {
    public func blocks(involving ids: [Int64]?) throws -> BlockSet {
        var pairs: [(blocker: Int64, blocked: Int64)] = []
        if let ids {
            for row in try connection.query(
                "SELECT blocker_id, blocked_id FROM blocks WHERE blocker_id = ANY($1) OR blocked_id = ANY($1)",
                [.int8Array(ids)]).rows {
                pairs.append((try row.int64(0), try row.int64(1)))
            }
        } else {
            try connection.copyOut("COPY blocks (blocker_id, blocked_id) TO STDOUT (FORMAT binary)") { row in
                pairs.append((try row.int64() ?? 0, try row.int64() ?? 0))
            }
        }
        return BlockSet(pairs)
    }
}

// MARK: - Matches and notifications

extension PostgresMatchingStore: MatchRepository {
    public func existingPairs(profileIds: [Int64]?) throws -> Set<MatchPair> {
        var pairs = Set<MatchPair>()
        guard let ids = profileIds else {
            try connection.copyOut("COPY filter_matches (filter_id, profile_id) TO STDOUT (FORMAT binary)") { row in
                pairs.insert(MatchPair(filterId: try row.int64() ?? 0, profileId: try row.int64() ?? 0))
            }
            return pairs
        }
        guard !ids.isEmpty else { return pairs }
        if ids.count <= 50_000 {
            for row in try connection.query(
                "SELECT filter_id, profile_id FROM filter_matches WHERE profile_id = ANY($1)", [.int8Array(ids)]).rows {
                pairs.insert(MatchPair(filterId: try row.int64(0), profileId: try row.int64(1)))
            }
            return pairs
        }
        // Many candidates: their ids go in by COPY, and only their pairs come back (never the whole table).
        try connection.transaction { tx in
            try tx.execute("CREATE TEMP TABLE matcher_candidate_ids (profile_id bigint PRIMARY KEY) ON COMMIT DROP")
            try tx.copyIn("COPY matcher_candidate_ids (profile_id) FROM STDIN (FORMAT binary)") { writer in
                for id in Set(ids) {
                    writer.beginRow(fieldCount: 1)
                    writer.write(id)
                }
            }
            try tx.execute("ANALYZE matcher_candidate_ids")
            try tx.copyOut("""
                COPY (SELECT m.filter_id, m.profile_id FROM filter_matches m JOIN matcher_candidate_ids c USING (profile_id))
                TO STDOUT (FORMAT binary)
                """) { row in
                pairs.insert(MatchPair(filterId: try row.int64() ?? 0, profileId: try row.int64() ?? 0))
            }
        }
        return pairs
    }

    public func commit(_ unit: WorkUnit, planner: NotificationPlanner) throws -> WorkUnitOutcome {
        let outcome = try connection.transaction { tx in
            let written: WorkUnitOutcome
            if let notify = unit.notify?.filter({ $0.filter.notify }), !notify.isEmpty {
                written = try commitNotifying(tx, unit, notify, planner)
            } else {
                written = WorkUnitOutcome(matchesWritten: try insertMatches(tx, unit, notificationIds: [:]),
                                          notificationsWritten: 0)
            }
            // The run's cursor and counters, in the same transaction.
            let c = unit.filterCounters
            try tx.query("""
                UPDATE matcher_runs SET resume_after_filter = $2,
                    filters_evaluated = filters_evaluated + $3, filters_invalid = filters_invalid + $4,
                    filters_paid_ignored = filters_paid_ignored + $5,
                    matches_written = matches_written + $6, notifications_written = notifications_written + $7
                WHERE id = $1
                """,
                [.int8(unit.runId), .int8(unit.lastFilterId), .int4(Int32(c.filtersEvaluated)),
                 .int4(Int32(c.filtersInvalid)), .int4(Int32(c.filtersPaidIgnored)),
                 .int4(Int32(written.matchesWritten)), .int4(Int32(written.notificationsWritten))])
            FaultInjection.reach("unit-before-commit")
            return written
        }
        FaultInjection.reach("unit-after-commit")
        return outcome
    }

    /// Inserts the unit's new pairs, skipping any already recorded (by anyone, ever); a pair listed in
    /// `notificationIds` goes in already marked with its notification. Returns the rows inserted.
    ///
    /// The engine already left out every pair recorded before the run, so a conflict can only come from a
    /// concurrent writer: the rows go in by binary COPY (the fastest way in), and only if that meets a
    /// unique violation are they inserted again with `ON CONFLICT DO NOTHING`.
    private func insertMatches(_ tx: PostgresConnection, _ unit: WorkUnit, notificationIds: [MatchPair: Int64]) throws -> Int {
        var pairs: [MatchPair] = []
        pairs.reserveCapacity(unit.matches.reduce(0) { $0 + $1.profileIds.count })
        for result in unit.matches {
            for profileId in result.profileIds { pairs.append(MatchPair(filterId: result.filterId, profileId: profileId)) }
        }
        guard !pairs.isEmpty else { return 0 }
        pairs.sort()   // index-friendly order
        try tx.execute("SAVEPOINT matcher_copy_matches")
        do {
            let copied = try tx.copyIn("""
                COPY filter_matches (filter_id, profile_id, matched_at, run_id, notification_id) FROM STDIN (FORMAT binary)
                """) { writer in
                for pair in pairs {
                    writer.beginRow(fieldCount: 5)
                    writer.write(pair.filterId)
                    writer.write(pair.profileId)
                    writer.write(unit.clock.now)
                    writer.write(unit.runId)
                    writer.write(notificationIds[pair])
                }
            }
            try tx.execute("RELEASE SAVEPOINT matcher_copy_matches")
            return copied
        } catch let error as PostgresError where error.sqlState == "23505" {
            try tx.execute("ROLLBACK TO SAVEPOINT matcher_copy_matches")
        }
        return try tx.query("""
            INSERT INTO filter_matches (filter_id, profile_id, matched_at, run_id, notification_id)
            SELECT u.filter_id, u.profile_id, $4, $5, NULLIF(u.notification_id, 0)
            FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(filter_id, profile_id, notification_id)
            ON CONFLICT (filter_id, profile_id) DO NOTHING
            """,
            [.int8Array(pairs.map(\.filterId)), .int8Array(pairs.map(\.profileId)),
             .int8Array(pairs.map { notificationIds[$0] ?? 0 }), .timestamptz(unit.clock.now), .int8(unit.runId)]
        ).affectedRows
    }

    /// Matches and notifications of a unit. Each filter's digest is decided under a row lock on its
    /// `matcher_filter_state`, so concurrent writers (a run and a backfill, shards of different N) never
    /// both notify it. Digests are planned before the insert so that new matches are written once, already
    /// marked; if any new pair turns out to be recorded already, the unit falls back to inserting first and
    /// deciding from what is then in the table.
    private func commitNotifying(_ tx: PostgresConnection, _ unit: WorkUnit, _ notify: [NotificationCandidateFilter],
                                 _ planner: NotificationPlanner) throws -> WorkUnitOutcome {
        let notifyIds = notify.map(\.filter.id)
        let withNew = Set(unit.matches.filter { !$0.profileIds.isEmpty }.map(\.filterId))
        let withWaiting = Set(try tx.query("""
            SELECT DISTINCT filter_id FROM filter_matches WHERE filter_id = ANY($1) AND notification_id IS NULL
            """, [.int8Array(notifyIds)]).rows.map { try $0.int64(0) })
        let deciding = notify.filter { withNew.contains($0.filter.id) || withWaiting.contains($0.filter.id) }
        guard !deciding.isEmpty else {
            return WorkUnitOutcome(matchesWritten: try insertMatches(tx, unit, notificationIds: [:]), notificationsWritten: 0)
        }
        let lastNotifiedAt = try lockFilterStates(tx, deciding.map(\.filter.id))

        // Fast path: plan from the waiting matches under lock plus the unit's new ones.
        try tx.execute("SAVEPOINT matcher_unit")
        let waiting = try waitingMatches(tx, deciding)
        let planned = planner.plan(filters: deciding, waiting: waiting + unit.newMatchesAsWaiting,
                                   lastNotifiedAt: lastNotifiedAt, clock: unit.clock)
        let ids = try writeNotifications(tx, planned, unit)
        var marks: [MatchPair: Int64] = [:]
        for (id, n) in zip(ids, planned) {
            for profileId in n.countedProfileIds { marks[MatchPair(filterId: n.filterId, profileId: profileId)] = id }
        }
        let attempted = unit.matches.reduce(0) { $0 + $1.profileIds.count }
        let inserted = try insertMatches(tx, unit, notificationIds: marks)
        if inserted == attempted {
            let waitingPairs = Set(waiting.map { MatchPair(filterId: $0.filterId, profileId: $0.profileId) })
            try markNotified(tx, marks.filter { waitingPairs.contains($0.key) })
            try recordNotified(tx, planned, unit)
            return WorkUnitOutcome(matchesWritten: inserted, notificationsWritten: planned.count)
        }

        // Some pair was recorded already (by another writer): insert plainly, then decide from the table.
        try tx.execute("ROLLBACK TO SAVEPOINT matcher_unit")
        let plainInserted = try insertMatches(tx, unit, notificationIds: [:])
        let nowWaiting = try waitingMatches(tx, deciding)
        let replanned = planner.plan(filters: deciding, waiting: nowWaiting, lastNotifiedAt: lastNotifiedAt,
                                     clock: unit.clock)
        let newIds = try writeNotifications(tx, replanned, unit)
        var replannedMarks: [MatchPair: Int64] = [:]
        for (id, n) in zip(newIds, replanned) {
            for profileId in n.countedProfileIds { replannedMarks[MatchPair(filterId: n.filterId, profileId: profileId)] = id }
        }
        try markNotified(tx, replannedMarks)
        try recordNotified(tx, replanned, unit)
        return WorkUnitOutcome(matchesWritten: plainInserted, notificationsWritten: replanned.count)
    }

    /// Locks the filters' notification state rows in id order (creating missing ones from the notifications
    /// already written) and returns their last notification times.
    private func lockFilterStates(_ tx: PostgresConnection, _ filterIds: [Int64]) throws -> [Int64: Timestamp] {
        try tx.query("""
            INSERT INTO matcher_filter_state (filter_id, last_notified_at)
            SELECT f.id, (SELECT max(n.created_at) FROM notifications n WHERE n.filter_id = f.id)
            FROM unnest($1::bigint[]) AS f(id)
            ORDER BY f.id
            ON CONFLICT (filter_id) DO NOTHING
            """, [.int8Array(filterIds)])
        var last: [Int64: Timestamp] = [:]
        for row in try tx.query("""
            SELECT filter_id, last_notified_at FROM matcher_filter_state WHERE filter_id = ANY($1)
            ORDER BY filter_id FOR UPDATE
            """, [.int8Array(filterIds)]).rows {
            if let at = try row.optionalTimestamp(1) { last[try row.int64(0)] = at }
        }
        return last
    }

    /// The filters' unnotified matches, with what eligibility needs, as they stand now.
    private func waitingMatches(_ tx: PostgresConnection, _ filters: [NotificationCandidateFilter]) throws -> [WaitingMatch] {
        try tx.query("""
            SELECT m.filter_id, m.profile_id, p.status, p.last_login_at,
                   EXISTS (SELECT 1 FROM blocks b
                           WHERE (b.blocker_id = u.owner_id AND b.blocked_id = m.profile_id)
                              OR (b.blocker_id = m.profile_id AND b.blocked_id = u.owner_id)) AS blocked
            FROM unnest($1::bigint[], $2::bigint[]) AS u(filter_id, owner_id)
            JOIN filter_matches m ON m.filter_id = u.filter_id AND m.notification_id IS NULL
            LEFT JOIN profiles p ON p.id = m.profile_id
            """, [.int8Array(filters.map(\.filter.id)), .int8Array(filters.map(\.filter.ownerId))]).rows.map { row in
            WaitingMatch(filterId: try row.int64(0), profileId: try row.int64(1), profileStatus: try row.optionalInt16(2),
                         profileLastLoginAt: try row.optionalTimestamp(3), blockedEitherWay: try row.bool(4))
        }
    }

    /// Writes the planned notifications with one COPY; returns their ids, in `planned` order.
    private func writeNotifications(_ tx: PostgresConnection, _ planned: [PlannedNotification], _ unit: WorkUnit) throws -> [Int64] {
        guard !planned.isEmpty else { return [] }
        let ids = try tx.query(
            "SELECT nextval(pg_get_serial_sequence('notifications', 'id')) FROM generate_series(1, $1)",
            [.int4(Int32(planned.count))]).rows.map { try $0.int64(0) }
        try tx.copyIn("""
            COPY notifications (id, recipient_id, filter_id, match_count, profile_ids, created_at, run_id)
            FROM STDIN (FORMAT binary)
            """) { writer in
            for (id, n) in zip(ids, planned) {
                writer.beginRow(fieldCount: 7)
                writer.write(id)
                writer.write(n.recipientId)
                writer.write(n.filterId)
                writer.write(Int32(n.matchCount))
                writer.write(n.shownProfileIds)
                writer.write(unit.clock.now)
                writer.write(unit.runId)
            }
        }
        return ids
    }

    /// Marks matches already in the table as notified.
    private func markNotified(_ tx: PostgresConnection, _ marks: [MatchPair: Int64]) throws {
        guard !marks.isEmpty else { return }
        let pairs = marks.sorted { $0.key < $1.key }
        try tx.query("""
            UPDATE filter_matches m SET notification_id = u.notification_id
            FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(filter_id, profile_id, notification_id)
            WHERE m.filter_id = u.filter_id AND m.profile_id = u.profile_id
            """, [.int8Array(pairs.map(\.key.filterId)), .int8Array(pairs.map(\.key.profileId)),
                  .int8Array(pairs.map(\.value))])
    }

    private func recordNotified(_ tx: PostgresConnection, _ planned: [PlannedNotification], _ unit: WorkUnit) throws {
        guard !planned.isEmpty else { return }
        try tx.query("""
            UPDATE matcher_filter_state SET last_notified_at = $2 WHERE filter_id = ANY($1)
            """, [.int8Array(planned.map(\.filterId)), .timestamptz(unit.clock.now)])
    }

    public func matches(filterId: Int64) throws -> [FilterMatch] {
        try connection.query("""
            SELECT filter_id, profile_id, matched_at, run_id, notification_id FROM filter_matches
            WHERE filter_id = $1 ORDER BY profile_id
            """, [.int8(filterId)]).rows.map { row in
            FilterMatch(filterId: try row.int64(0), profileId: try row.int64(1), matchedAt: try row.timestamp(2),
                        runId: try row.optionalInt64(3), notificationId: try row.optionalInt64(4))
        }
    }

    public func notifications(filterId: Int64) throws -> [MatchNotification] {
        try connection.query("""
            SELECT id, recipient_id, filter_id, match_count, profile_ids, created_at, sent_at, run_id
            FROM notifications WHERE filter_id = $1 ORDER BY id
            """, [.int8(filterId)]).rows.map { row in
            MatchNotification(id: try row.int64(0), recipientId: try row.int64(1), filterId: try row.int64(2),
                              matchCount: Int(try row.int32(3)), profileIds: try row.int64Array(4),
                              createdAt: try row.timestamp(5), sentAt: try row.optionalTimestamp(6),
                              runId: try row.optionalInt64(7))
        }
    }
}
