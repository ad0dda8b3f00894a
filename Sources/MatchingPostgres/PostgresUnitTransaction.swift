import Chronology
import Matching
import PostgresClient

/// The unit-of-work primitives over one open PostgreSQL transaction (`UnitCommitter` holds the algorithm).
struct PostgresUnitTransaction: UnitTransaction {
    let tx: PostgresConnection
    /// `blocks`' row estimate for the block lookups' form (the store's, read once); nil: read when needed.
    var blockRows: Double? = nil

    /// An advisory lock of the one-bigint form (the run locks use two int4 keys, another space), held until the
    /// transaction ends.
    func holdUnit(_ key: Int64) throws {
        try tx.query("SELECT pg_advisory_xact_lock($1)", [.int8(key)])
    }

    /// Takes a shared lock on `key` inside a savepoint whose rollback gives it back (a transaction-level lock: no
    /// error between taking and giving can leave it held) and restores the unit's own `lock_timeout`. The wait
    /// lasts at most twice the server's `deadlock_timeout` (at least 2 s), so the server checks for a deadlock
    /// while it waits. A lock timeout here only ends this wait; a deadlock ends the unit (a write conflict:
    /// `UnitWriter` writes it again).
    func awaitUnit(_ key: Int64) throws {
        try tx.execute(
            """
            SAVEPOINT matcher_turn;
            SELECT set_config('lock_timeout', greatest(2000, 2 * setting::bigint)::text, true)
            FROM pg_settings WHERE name = 'deadlock_timeout'
            """)
        do {
            try tx.query("SELECT pg_advisory_xact_lock_shared($1)", [.int8(key)])
        } catch let error as PostgresError where error.sqlState == "55P03" {
            // Still open: the caller looks at the order again and waits again.
        }
        try tx.execute("ROLLBACK TO SAVEPOINT matcher_turn; RELEASE SAVEPOINT matcher_turn")
    }

    /// One probe of the list's key a filter. `SELECT DISTINCT filter_id ... WHERE filter_id = ANY($1)` read
    /// every entry of the unit's filters, or the whole list, as the planner chose by the list's statistics.
    func filtersWithWaitingMatches(_ filterIds: [Int64], forgetting cutoffs: PassedOverCutoffs) throws -> Set<Int64> {
        guard !filterIds.isEmpty else { return [] }
        return Set(
            try tx.query(
                """
                SELECT u.id FROM unnest($1::bigint[]) AS u(id)
                WHERE EXISTS (SELECT 1 FROM matcher_waiting_matches w WHERE w.filter_id = u.id
                              AND \(Self.notForgotten))
                """, [.int8Array(filterIds)] + Self.parameters(cutoffs)
            ).rows.map { try $0.int64(0) })
    }

    /// Entry `w` is read at the clock unless a digest passed it over and its pair was recorded before $2 or it was
    /// passed over before $3 (`PassedOverCutoffs`; NULL: no such limit), whether the sweep has deleted it yet or not.
    private static let notForgotten =
        "NOT "
        + RetentionSQL.entryForgotten(
            recordedBefore: "coalesce($2::timestamptz, '-infinity')",
            passedOverBefore: "coalesce($3::timestamptz, '-infinity')")

    /// `cutoffs` as $2 and $3 of `notForgotten`.
    private static func parameters(_ cutoffs: PassedOverCutoffs) -> [PostgresValue] {
        [cutoffs.recordedBefore, cutoffs.passedOverBefore].map { $0.map { .timestamptz($0) } ?? .null }
    }

    func forgetExpired(_ pairs: [MatchPair], before cutoff: Timestamp) throws {
        guard !pairs.isEmpty else { return }
        try tx.query(
            RetentionSQL.forgetExpiredPairs,
            [.int8Array(pairs.map(\.filterId)), .int8Array(pairs.map(\.profileId)), .timestamptz(cutoff)])
    }

    func notificationStates(_ filterIds: [Int64]) throws -> [Int64: Timestamp] {
        guard !filterIds.isEmpty else { return [:] }
        var last: [Int64: Timestamp] = [:]
        for row in try tx.query(
            """
            SELECT filter_id, last_notified_at FROM matcher_filter_state
            WHERE filter_id = ANY($1) AND filter_id BETWEEN $2 AND $3 AND last_notified_at IS NOT NULL
            """, Self.idsWithinBounds(filterIds)
        ).rows {
            last[try row.int64(0)] = try row.timestamp(1)
        }
        return last
    }

    /// The profile row of `u.id`, for `unnest(ids) AS u(id) CROSS JOIN LATERAL (...)`: one probe of the primary
    /// key an id. `OFFSET 0` keeps the planner from flattening it into a join, which for a few thousand ids
    /// hashed the whole table (a digest unit's 4,279 waiting profiles among 220k: 250 ms against 26-30 ms).
    private static func profileById(_ columns: String) -> String {
        "SELECT \(columns) FROM profiles p WHERE p.id = u.id OFFSET 0"
    }

    /// `filterIds` ($1) with their least and greatest ($2, $3), for `filter_id = ANY($1) AND filter_id BETWEEN
    /// $2 AND $3` on `matcher_filter_state`. A unit's filters are consecutive ids: with the range the planner
    /// probes the primary key; without it, it scanned the whole table for every statement (250 ids on a 21k-row
    /// table: 3.4-5.2 ms against 0.5-1.1 ms; three statements a unit, about 400 units a day at 1M x 100k).
    static func idsWithinBounds(_ filterIds: [Int64]) -> [PostgresValue] {
        [.int8Array(filterIds), .int8(filterIds.min() ?? 0), .int8(filterIds.max() ?? 0)]
    }

    func lockNotificationStates(_ filterIds: [Int64]) throws -> [Int64: Timestamp] {
        guard !filterIds.isEmpty else { return [:] }
        try tx.query(
            """
            INSERT INTO matcher_filter_state (filter_id, last_notified_at)
            SELECT f.id, (SELECT max(n.created_at) FROM notifications n WHERE n.filter_id = f.id)
            FROM unnest($1::bigint[]) AS f(id)
            ORDER BY f.id
            ON CONFLICT (filter_id) DO NOTHING
            """, [.int8Array(filterIds)])
        var last: [Int64: Timestamp] = [:]
        for row in try tx.query(
            """
            SELECT filter_id, last_notified_at FROM matcher_filter_state
            WHERE filter_id = ANY($1) AND filter_id BETWEEN $2 AND $3
            ORDER BY filter_id FOR UPDATE
            """, Self.idsWithinBounds(filterIds)
        ).rows {
            if let at = try row.optionalTimestamp(1) { last[try row.int64(0)] = at }
        }
        return last
    }

    /// The due filters' waiting matches with their profiles' current status and last login, and whether a
    /// block stands between profile and owner. Three reads, none a probe per waiting match: the waiting
    /// list by its key, each distinct profile once (a digest day's waiting matches share their profiles:
    /// 6.8M new pairs a day at 1M x 100k come from 28.5k candidates), and the owners' blocks.
    func waitingMatches(
        _ filters: [NotificationCandidateFilter], forgetting cutoffs: PassedOverCutoffs
    ) throws -> [WaitingMatch] {
        guard !filters.isEmpty else { return [] }
        let filterIds = filters.map(\.filter.id)
        var pairs: [MatchPair] = []
        var passedOver: Set<MatchPair> = []
        for row in try tx.query(
            """
            SELECT w.filter_id, w.profile_id, w.passed_over
            FROM unnest($1::bigint[]) AS u(filter_id) JOIN matcher_waiting_matches w ON w.filter_id = u.filter_id
            WHERE w.filter_id = ANY ($1::bigint[])   -- the waiting list's key: only these filters' rows are read
              AND \(Self.notForgotten)
            """, [.int8Array(filterIds)] + Self.parameters(cutoffs)
        ).rows {
            let pair = MatchPair(filterId: try row.int64(0), profileId: try row.int64(1))
            pairs.append(pair)
            if try row.bool(2) { passedOver.insert(pair) }
        }
        guard !pairs.isEmpty else { return [] }
        var profiles: [Int64: (status: Int16?, lastLoginAt: Timestamp?)] = [:]
        // Total over the app's odd rows, as `profileFacts`: a status outside 1..4 (NULL, or wider than a smallint
        // in a column the app widened) is not active.
        for row in try tx.query(
            """
            SELECT u.id, CASE WHEN p.status BETWEEN 1 AND 4 THEN p.status ELSE 0 END, p.last_login_at
            FROM unnest($1::bigint[]) AS u(id)
            CROSS JOIN LATERAL (\(Self.profileById("p.status, p.last_login_at"))) p
            """, [.int8Array(Array(Set(pairs.map(\.profileId))).sorted())]
        ).rows {
            profiles[try row.int64(0)] = (Int16(clamping: try row.optionalInt64(1) ?? 0), try row.optionalTimestamp(2))
        }
        let owners = Dictionary(
            filters.map { ($0.filter.id, $0.filter.ownerId) }, uniquingKeysWith: { first, _ in first })
        let blocks = try PostgresMatchingStore.blocks(
            involving: Array(Set(owners.values)).sorted(), on: tx, tableRows: blockRows)
        return pairs.map { pair in
            let profile = profiles[pair.profileId]
            let owner = owners[pair.filterId]
            return WaitingMatch(
                filterId: pair.filterId, profileId: pair.profileId, profileStatus: profile?.status ?? nil,
                profileLastLoginAt: profile?.lastLoginAt ?? nil,
                blockedEitherWay: owner.map { blocks.blocksEitherWay($0, pair.profileId) } ?? false,
                passedOver: passedOver.contains(pair))
        }
    }

    /// With `readAt` (a snapshot, every profile active in it), only the profiles whose matching state changed
    /// since are read: the change capture records every update of `status` and every deleted row, so the rest
    /// are as the run read them. Found by the capture's `changed_by` index (`ChangeCapture.changesSinceSnapshot`), a handful
    /// of rows on an ordinary day instead of a probe per profile; the client keeps those asked about.
    ///
    /// The unit's profiles are never a `= ANY($1)` list: the planner estimates the selectivity of each element
    /// of an array parameter (22 ms of planning for a unit's 40k profiles, every unit). Without a snapshot they
    /// are joined with `unnest`; the blocks are read by the owners, a few hundred per unit.
    func profileFacts(_ profileIds: [Int64], ownerIds: [Int64], readAt: ChangeMark?) throws -> ProfileFacts {
        guard !profileIds.isEmpty else { return ProfileFacts(statuses: [:], blocks: .none) }
        var statuses: [Int64: Int16?] = [:]
        let rows: [PostgresRow]
        let unlisted: Int16?
        // Total over the app's odd rows: a NULL or out-of-range status is not active; no row, nil.
        if let readAt, case .snapshot(let snapshot) = ChangeMark.Form(readAt) {
            unlisted = Profile.Status.active
            rows =
                try tx.query(
                    ChangeCapture.changesSinceSnapshot, [.text(snapshot)]
                ).rows
        } else {
            unlisted = nil
            rows =
                try tx.query(
                    """
                    SELECT u.id, CASE WHEN p.status BETWEEN 1 AND 4 THEN p.status ELSE 0 END, true
                    FROM unnest($1::bigint[]) AS u(id) CROSS JOIN LATERAL (\(Self.profileById("p.status"))) p
                    """, [.int8Array(profileIds)]
                ).rows
        }
        for row in rows {
            let id = try row.int64(0)
            guard profileIds.sortedContains(id) else { continue }
            statuses.updateValue(try row.bool(2) ? Int16(clamping: try row.optionalInt64(1) ?? 0) : nil, forKey: id)
        }
        return ProfileFacts(
            statuses: statuses, unlistedStatus: unlisted,
            blocks: try PostgresMatchingStore.blocks(involving: ownerIds, on: tx, tableRows: blockRows))
    }

    func savepoint() throws { try tx.execute("SAVEPOINT matcher_unit") }

    func rollbackToSavepoint() throws { try tx.execute("ROLLBACK TO SAVEPOINT matcher_unit") }

    /// Binary COPY, the fastest way in; a unique violation means some pair was recorded meanwhile. Pairs recorded
    /// in bulk skip the retention index and are listed by filter instead (`listBulk`).
    func insertMatches(_ rows: [NewMatch], at time: Timestamp, runId: Int64, bulk: Bool) throws -> Int? {
        guard !rows.isEmpty else { return 0 }
        let byPair = rows.sorted { $0.pair < $1.pair }
        let count: Int
        do {
            count = try tx.copyIn(
                """
                COPY filter_matches (filter_id, profile_id, matched_at, run_id, notification_id, silent, mutual, bulk)
                FROM STDIN (FORMAT binary)
                """
            ) { writer in
                for row in Self.inPageOrder(byPair) {
                    writer.beginRow(fieldCount: 8)
                    writer.write(row.pair.filterId)
                    writer.write(row.pair.profileId)
                    writer.write(time)
                    writer.write(runId)
                    writer.write(row.notificationId)
                    writer.write(row.silent)
                    writer.write(row.mutual)
                    writer.write(bulk)
                }
            }
        } catch let error as PostgresError where error.sqlState == "23505" {
            return nil
        }
        if bulk { try listBulk(byPair.map(\.pair), at: time) }
        return count
    }

    /// The order a unit's rows (`byPair`: sorted by pair, the primary key's order) are written in: the rows that
    /// wait for a digest spread evenly among the others, each part still by pair. A waiting row is marked notified on its
    /// digest's day (`markNotified`), an UPDATE that stays on its page (HOT, no new index entries) only where the
    /// page has room for the new version: fillfactor 90 leaves a tenth of each page, about ten rows' worth. Written
    /// by pair, a weekly filter's waiting rows fill pages of their own and most of their marks move off the page;
    /// spread, a page holds the unit's share of them (6.5 % of a day's pairs in the steady soak: about seven a
    /// page), which its free tenth takes. A unit without waiting rows (a first run's) is written by pair, as before.
    static func inPageOrder(_ sorted: [NewMatch]) -> [NewMatch] {
        let waitingCount = sorted.count { $0.waits }
        guard waitingCount > 0, waitingCount < sorted.count else { return sorted }
        var ordered: [NewMatch] = []
        ordered.reserveCapacity(sorted.count)
        // Two cursors over `sorted`, one through its waiting rows and one through the others.
        var nextWaiting = 0
        var nextOther = 0
        var waitingTaken = 0
        for position in 1...sorted.count {
            // Bresenham: after `position` rows, `position * waitingCount / count` of them are waiting ones.
            if waitingTaken < position * waitingCount / sorted.count {
                while !sorted[nextWaiting].waits { nextWaiting += 1 }
                ordered.append(sorted[nextWaiting])
                nextWaiting += 1
                waitingTaken += 1
            } else {
                while sorted[nextOther].waits { nextOther += 1 }
                ordered.append(sorted[nextOther])
                nextOther += 1
            }
        }
        return ordered
    }

    func insertMatchesSkippingRecorded(
        _ rows: [NewMatch], at time: Timestamp, runId: Int64, bulk: Bool
    ) throws -> [MatchPair] {
        guard !rows.isEmpty else { return [] }
        let ordered = Self.inPageOrder(rows.sorted { $0.pair < $1.pair })
        let inserted = try SkippedConflictFailed.retryable {
            try tx.query(
                """
                    INSERT INTO filter_matches (filter_id, profile_id, matched_at, run_id, notification_id, silent, mutual, bulk)
                SELECT u.filter_id, u.profile_id, $4, $5, NULLIF(u.notification_id, 0), $6, u.mutual <> 0, $8
                FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $7::smallint[]) AS u(filter_id, profile_id, notification_id, mutual)
                ON CONFLICT (filter_id, profile_id) DO NOTHING
                RETURNING filter_id, profile_id
                """,
                [
                    .int8Array(ordered.map(\.pair.filterId)), .int8Array(ordered.map(\.pair.profileId)),
                    .int8Array(ordered.map { $0.notificationId ?? 0 }), .timestamptz(time), .int8(runId),
                    .bool(ordered.contains { $0.silent }),  // a unit's rows are all silent or none
                    .int2Array(ordered.map { $0.mutual ? 1 : 0 }), .bool(bulk),
                ]
            )
        }.rows.map { MatchPair(filterId: try $0.int64(0), profileId: try $0.int64(1)) }
        if bulk { try listBulk(inserted.sorted(), at: time) }
        return inserted
    }

    /// Lists `pairs` (sorted), just recorded in bulk at `time`, in `matcher_bulk_matches`: a row a filter, its
    /// profile ids a slice of one array parameter, merged into the filter's row at this clock if it has one (a
    /// concurrent run with the same clock recorded some of its pairs). The retention sweep forgets them from
    /// there (`RetentionSQL.forgetBulkBatch`). On a first run at 100k x 10k (9,691 rows, 887k ids) the
    /// statements take 0.18 s of server time in all; `array_agg` over `unnest` took 0.7 s, a binary COPY of the
    /// same rows 0.15 s (and a savepoint for the conflict).
    private func listBulk(_ pairs: [MatchPair], at time: Timestamp) throws {
        guard !pairs.isEmpty else { return }
        var filters: [Int64] = []
        var lows: [Int32] = []
        var highs: [Int32] = []
        for (index, pair) in pairs.enumerated() {
            let position = Int32(index + 1)  // arrays are 1-based
            if filters.last == pair.filterId {
                highs[highs.count - 1] = position
            } else {
                filters.append(pair.filterId)
                lows.append(position)
                highs.append(position)
            }
        }
        try tx.query(
            """
            INSERT INTO matcher_bulk_matches (filter_id, matched_at, profile_ids)
            SELECT u.filter_id, $5, ($2::bigint[])[u.low:u.high]
            FROM unnest($1::bigint[], $3::int[], $4::int[]) AS u(filter_id, low, high)
            ON CONFLICT (filter_id, matched_at) DO UPDATE SET profile_ids = ARRAY(
                SELECT DISTINCT p FROM unnest(matcher_bulk_matches.profile_ids || excluded.profile_ids) AS p ORDER BY p)
            """,
            [
                .int8Array(filters), .int8Array(pairs.map(\.profileId)), .int4Array(lows), .int4Array(highs),
                .timestamptz(time),
            ])
    }

    func addWaiting(_ pairs: [MatchPair], at time: Timestamp) throws {
        guard !pairs.isEmpty else { return }
        let sorted = pairs.sorted()
        try tx.copyIn("COPY matcher_waiting_matches (filter_id, profile_id, matched_at) FROM STDIN (FORMAT binary)") {
            writer in
            for pair in sorted {
                writer.beginRow(fieldCount: 3)
                writer.write(pair.filterId)
                writer.write(pair.profileId)
                writer.write(time)
            }
        }
    }

    /// The note is written when the filter has none (its first, or the first since a listing cleared it) and
    /// rewritten only when it moves earlier: a notify-off filter records matches most days, and its row is noted
    /// from its first.
    func markUnlisted(_ filterIds: [Int64], at time: Timestamp) throws {
        guard !filterIds.isEmpty else { return }
        try tx.query(
            """
            INSERT INTO matcher_filter_state AS s (filter_id, last_notified_at, unlisted_from)
            SELECT f.id, (SELECT max(n.created_at) FROM notifications n WHERE n.filter_id = f.id), $2
            FROM unnest($1::bigint[]) AS f(id)
            ORDER BY f.id
            ON CONFLICT (filter_id) DO UPDATE SET unlisted_from = EXCLUDED.unlisted_from
                WHERE s.unlisted_from IS NULL OR s.unlisted_from > EXCLUDED.unlisted_from
            """, [.int8Array(filterIds), .timestamptz(time)])
    }

    func writeNotifications(_ planned: [PlannedNotification], at time: Timestamp, runId: Int64) throws -> [Int64] {
        guard !planned.isEmpty else { return [] }
        let ids = try tx.query(
            "SELECT nextval(pg_get_serial_sequence('notifications', 'id')) FROM generate_series(1, $1)",
            [.int4(Int32(clamping: planned.count))]
        ).rows.map { try $0.int64(0) }
        try tx.copyIn(
            """
            COPY notifications (id, recipient_id, filter_id, match_count, profile_ids, created_at, run_id, mutual_count)
            FROM STDIN (FORMAT binary)
            """
        ) { writer in
            for (id, n) in zip(ids, planned) {
                writer.beginRow(fieldCount: 8)
                writer.write(id)
                writer.write(n.recipientId)
                writer.write(n.filterId)
                writer.write(Int32(clamping: n.matchCount))
                writer.write(n.shownProfileIds)
                writer.write(time)
                writer.write(runId)
                writer.write(Int32(clamping: n.mutualCount))
            }
        }
        return ids
    }

    /// Pairs a statement of `markNotified`: with 100k pairs in one array (a digest day's unit of filters with long
    /// waiting lists), the planner joined them by hashing the whole of `filter_matches` (8.3M pairs, day 30 of the
    /// 200k x 20k soak; 20k pairs stayed key probes). Review of session 33.
    static let marksPerStatement = 10_000

    /// A HOT update of `filter_matches` (no index reads `notification_id`), and the waiting list shrinks.
    func markNotified(_ marks: [MatchPair: Int64], mutual: Set<MatchPair>) throws {
        let sorted = marks.sorted { $0.key < $1.key }
        for start in stride(from: 0, to: sorted.count, by: Self.marksPerStatement) {
            try markNotified(sorted[start..<min(start + Self.marksPerStatement, sorted.count)], mutual: mutual)
        }
    }

    private func markNotified(_ pairs: ArraySlice<(key: MatchPair, value: Int64)>, mutual: Set<MatchPair>) throws {
        let filterIds = Parameter.int8Array(pairs.map(\.key.filterId))
        let profileIds = Parameter.int8Array(pairs.map(\.key.profileId))
        try tx.query(
            """
            UPDATE filter_matches m SET notification_id = u.notification_id, mutual = u.mutual <> 0
            FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::smallint[]) AS u(filter_id, profile_id, notification_id, mutual)
            WHERE m.filter_id = u.filter_id AND m.profile_id = u.profile_id
            """,
            [
                filterIds, profileIds, .int8Array(pairs.map(\.value)),
                .int2Array(pairs.map { mutual.contains($0.key) ? 1 : 0 }),
            ])
        // One probe of the list's key a pair. Not `USING unnest(...) WHERE w.filter_id = ANY ($1)`: with the
        // pairs' filter ids (one per pair, thousands) in the array the planner read the whole list instead,
        // 253 ms against 84 ms for a unit's 14,098 pairs on a 1.8M-entry list (1M x 100k soak, day 7).
        try tx.query(
            """
            DELETE FROM matcher_waiting_matches w
            WHERE (w.filter_id, w.profile_id) IN (SELECT * FROM unnest($1::bigint[], $2::bigint[]))
            """, [filterIds, profileIds])
    }

    func recordNotified(_ filterIds: [Int64], at time: Timestamp) throws {
        guard !filterIds.isEmpty else { return }
        try tx.query(
            "UPDATE matcher_filter_state SET last_notified_at = $4 WHERE filter_id = ANY($1) AND filter_id BETWEEN $2 AND $3",
            Self.idsWithinBounds(filterIds) + [.timestamptz(time)])
    }

    /// Not an in-place (HOT) update since migrations 0016-0017: their partial index reads `passed_over`. A few thousand
    /// entries a day at 200k x 20k.
    func markPassedOver(_ entries: [(pair: MatchPair, comebackFrom: Timestamp)]) throws {
        guard !entries.isEmpty else { return }
        let sorted = entries.sorted { $0.pair < $1.pair }
        try tx.query(
            """
            UPDATE matcher_waiting_matches w SET passed_over = true, passed_over_at = u.comeback_from
            FROM unnest($1::bigint[], $2::bigint[], $3::text[]::timestamptz[]) AS u (filter_id, profile_id, comeback_from)
            WHERE w.filter_id = u.filter_id AND w.profile_id = u.profile_id AND NOT w.passed_over
            """,
            [
                .int8Array(sorted.map(\.pair.filterId)), .int8Array(sorted.map(\.pair.profileId)),
                .textArray(sorted.map(\.comebackFrom.iso8601)),
            ])
    }

    /// The pause row (migration 0007) as this unit's transaction reads it.
    func notificationsPaused() throws -> Bool {
        try tx.query("SELECT EXISTS (SELECT 1 FROM matcher_service_state WHERE notifications_paused_at IS NOT NULL)")
            .rows[0].bool(0)
    }

    func advanceRun(_ runId: Int64, owner: String?, pastFilter lastFilterId: Int64, adding c: RunCounters) throws {
        let moved = try tx.query(
            """
            UPDATE matcher_runs SET resume_after_filter = $2,
                filters_evaluated = filters_evaluated + $3, filters_invalid = filters_invalid + $4,
                filters_paid_ignored = filters_paid_ignored + $5,
                matches_written = matches_written + $6, notifications_written = notifications_written + $7,
                filters_suspended = filters_suspended + $8, digests_held_back = digests_held_back + $9,
                matches_mutual = matches_mutual + $10
            WHERE id = $1 AND owner IS NOT DISTINCT FROM $11::uuid AND status IN ('running', 'failed')
            RETURNING 1
            """,
            [
                .int8(runId), .int8(lastFilterId), .int4(Int32(clamping: c.filtersEvaluated)),
                .int4(Int32(clamping: c.filtersInvalid)), .int4(Int32(clamping: c.filtersPaidIgnored)),
                .int8(Int64(c.matchesWritten)), .int4(Int32(clamping: c.notificationsWritten)),
                .int4(Int32(clamping: c.filtersSuspended)), .int4(Int32(clamping: c.digestsHeldBack)),
                .int8(Int64(c.matchesMutual)), owner.map { .text($0) } ?? .null,
            ])
        guard !moved.rows.isEmpty else { throw RunTakenOver(runId: runId) }
    }

    private typealias Parameter = PostgresValue
}

/// A unique violation from the insert that skips recorded pairs (`ON CONFLICT (filter_id, profile_id) DO
/// NOTHING`). While `matcher reindex` rebuilds the primary key (`REINDEX INDEX CONCURRENTLY`), or an
/// interrupted rebuild's index is left ready but invalid, PostgreSQL checks the conflict against the valid key
/// only, and a pair another writer inserts in between can still violate the copy being built ("may
/// unexpectedly fail with a unique violation", PostgreSQL's INSERT reference; review of session 29). The unit's
/// transaction is gone, nothing of it written: it is a write conflict, and the unit is written again
/// (`WriteConflictRetry`), now skipping that pair too.
struct SkippedConflictFailed: ClassifiedError, CustomStringConvertible {
    let underlying: PostgresError
    var isWriteConflict: Bool { true }
    var failureKind: FailureKind { underlying.failureKind }
    var description: String {
        "a unique violation on filter_matches while skipping recorded pairs (the primary key being rebuilt "
            + "beside another writer?): \(underlying)"
    }

    static func retryable<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PostgresError where error.sqlState == "23505" {
            throw SkippedConflictFailed(underlying: error)
        }
    }
}
