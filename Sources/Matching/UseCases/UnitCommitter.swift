import Chronology

/// The exactly-once commit of one unit of work, written once for every store (runs.md): in one
/// transaction, the unit's new pairs are recorded (a pair at most once, whoever else writes), the
/// digests its filters are due are decided under a lock on their notification state and written, the
/// matches they count are marked, and the run's cursor and counters move past the unit. A crash at any
/// instant loses and duplicates nothing: the transaction commits whole or not at all.
///
/// Three paths (`write`): a unit whose filters have no digest to decide records its matches
/// (`recordWithoutDigests`). Otherwise the common case writes each new match once, already marked with its
/// digest: the digests are planned from the waiting matches plus the unit's new ones before the insert
/// (`recordMarked`). If the insert meets a pair some other writer recorded meanwhile, the unit goes back to
/// its savepoint, records only what is new, and decides the digests from the table as it then stands
/// (`recordThenDecide`).
public struct UnitCommitter: Sendable {
    public let planner: NotificationPlanner

    public init(planner: NotificationPlanner = NotificationPlanner()) {
        self.planner = planner
    }

    /// - Parameters:
    ///   - atBegin: called first inside the transaction (`UnitWriter` marks it as the unit's: `holdUnit`).
    ///   - beforeAdvance: called inside the transaction once the unit's rows are written, just before
    ///     the run's cursor moves: `UnitWriter` waits there until every earlier unit has committed, so that units
    ///     written in parallel still commit in filter-id order (a throw rolls the unit back). It is given the
    ///     transaction, to wait where the store sees the wait (`awaitUnit`).
    public func commit(
        _ unit: WorkUnit, to store: any MatchRepository,
        atBegin: (_ tx: any UnitTransaction) throws -> Void = { _ in },
        beforeAdvance: (_ tx: any UnitTransaction) throws -> Void = { _ in }
    ) throws -> WorkUnitOutcome {
        try store.withUnitTransaction { tx in
            try atBegin(tx)
            let written = try write(unit, tx)
            try beforeAdvance(tx)
            try tx.advanceRun(
                unit.runId, owner: unit.runOwner, pastFilter: unit.lastFilterId,
                adding: unit.filterCounters
                    + RunCounters(
                        matchesWritten: written.matchesWritten,
                        notificationsWritten: written.notificationsWritten,
                        digestsHeldBack: written.digestsHeldBack,
                        matchesMutual: written.mutualWritten))
            return written
        }
    }

    /// What every path of a unit's write needs: the unit, its transaction, and which of its filters notify.
    private struct UnitWrite {
        let unit: WorkUnit
        let tx: any UnitTransaction
        /// The unit's new pairs (`WorkUnit.pairs`, made once).
        let pairs: [MatchPair]
        /// The unit's filters whose matches are listed as waiting for a digest (`notify` on, not silent).
        let notifying: Set<Int64>

        var now: Timestamp { unit.clock.now }

        /// A match is listed as waiting for a digest when its filter notifies. One recorded silently (by a
        /// backfill without `--notify`) never enters a digest. One recorded while `notify` is off is not listed;
        /// its filter is noted instead (`noteUnlisted`), and the first run that finds the filter notifying lists
        /// it (`MatchRepository.listUnlistedMatches`), so that its first digest counts it (runs.md).
        func waits(_ pair: MatchPair) -> Bool { notifying.contains(pair.filterId) }

        func noteUnlisted(_ inserted: [MatchPair]) throws {
            guard !unit.silent else { return }
            let ids = inserted.lazy.map(\.filterId).filter { !notifying.contains($0) }
            if !ids.isEmpty { try tx.markUnlisted(UnitCommitter.sortedUnique(Array(ids)), at: now) }
        }
    }

    /// The digests a unit decides: its due filters with new or waiting matches, their states locked.
    private struct Deciding {
        let filters: [NotificationCandidateFilter]
        let lastNotifiedAt: [Int64: Timestamp]
        /// A waiting match counts only if the run found it still qualifies; the unit's new ones always do
        /// (`WaitingMatch.isNew`: they are not looked up pair by pair).
        let waitingQualifies: (MatchPair) -> Bool
    }

    private func write(_ unit: WorkUnit, _ tx: any UnitTransaction) throws -> WorkUnitOutcome {
        let pairs = unit.pairs
        // Pairs recorded before the retention's cutoff are forgotten at this clock, swept or not: the rows of the
        // unit's pairs that the run found so go first, as the sweep would take them, and the pairs are recorded
        // again. So a layout whose sweep ran before this unit (another shard's) and one whose sweep comes after
        // write the same rows.
        if let cutoff = unit.forgottenBefore, !unit.expired.isEmpty {
            let expired = pairs.filter { unit.expired.contains($0) }
            if !expired.isEmpty { try tx.forgetExpired(expired, before: cutoff) }
        }
        let notifyOn = unit.silent ? [] : (unit.notify ?? []).filter { $0.filter.notify }
        let write = UnitWrite(unit: unit, tx: tx, pairs: pairs, notifying: Set(notifyOn.map(\.filter.id)))
        // Notifications paused service-wide (`matcher notifications pause`): the unit decides no digest, so its
        // matches are recorded and listed waiting, no digest is written and no last_notified_at moves.
        let paused = notifyOn.isEmpty ? false : try tx.notificationsPaused()
        let notify = paused ? [] : notifyOn
        // Only filters that are due read their waiting matches: a weekly filter's list is not re-read daily.
        // The states are read unlocked first (a stale time is older, so it never hides a due filter), then
        // the deciding filters are locked and planned with what the lock shows.
        let states = notify.isEmpty ? [:] : try tx.notificationStates(notify.map(\.filter.id))
        let due = notify.filter {
            NotificationPlanner.isDue($0.filter, lastNotifiedAt: states[$0.filter.id], clock: unit.clock)
        }
        let withNew = Set(unit.matches.filter { !$0.profileIds.isEmpty }.map(\.filterId))
        let withWaiting =
            due.isEmpty
            ? []
            : try tx.filtersWithWaitingMatches(due.map(\.filter.id), forgetting: unit.passedOverCutoffs)
        let filters = due.filter { withNew.contains($0.filter.id) || withWaiting.contains($0.filter.id) }
        guard !filters.isEmpty else { return try recordWithoutDigests(write) }

        let deciding = Deciding(
            filters: filters, lastNotifiedAt: try tx.lockNotificationStates(filters.map(\.filter.id)),
            waitingQualifies: { pair in unit.qualifyingWaiting?.contains(pair) ?? true })
        try tx.savepoint()
        if let outcome = try recordMarked(write, deciding) { return outcome }
        // Some pair was recorded meanwhile by another writer: record what is new, then decide from the table.
        try tx.rollbackToSavepoint()
        return try recordThenDecide(write, deciding)
    }

    /// No filter of the unit has a digest to decide: its matches are recorded, and listed waiting or noted.
    private func recordWithoutDigests(_ write: UnitWrite) throws -> WorkUnitOutcome {
        let unit = write.unit
        let rows = write.pairs.map {
            NewMatch(pair: $0, silent: unit.silent, mutual: unit.mutual.contains($0), waits: write.waits($0))
        }
        let inserted = try insertSkippingConflicts(rows, unit, write.tx)
        try write.tx.addWaiting(inserted.filter(write.waits), at: write.now)
        try write.noteUnlisted(inserted)
        return WorkUnitOutcome(
            matchesWritten: inserted.count, notificationsWritten: 0, mutualWritten: unit.mutualCount(inserted))
    }

    /// The common path: the digests are planned with the new matches as just evaluated (their status and blocks
    /// as they stand now, under the lock, for the filters that are due), and each new match is written once,
    /// already marked. Nil when the insert met a pair another writer recorded meanwhile (the caller rolls back
    /// to the savepoint taken before this).
    private func recordMarked(_ write: UnitWrite, _ deciding: Deciding) throws -> WorkUnitOutcome? {
        let unit = write.unit, tx = write.tx, now = write.now
        let waiting = try tx.waitingMatches(deciding.filters, forgetting: unit.passedOverCutoffs)
        let dueUnderLock = deciding.filters.filter {
            NotificationPlanner.isDue(
                $0.filter, lastNotifiedAt: deciding.lastNotifiedAt[$0.filter.id], clock: unit.clock)
        }
        let dueIds = Set(dueUnderLock.map(\.filter.id))
        let dueProfiles = Self.sortedUnique(unit.matches.filter { dueIds.contains($0.filterId) }.flatMap(\.profileIds))
        let fresh =
            dueProfiles.isEmpty
            ? []
            : unit.newMatchesAsWaiting(
                of: dueUnderLock,
                facts: try tx.profileFacts(
                    dueProfiles, ownerIds: Self.sortedUnique(dueUnderLock.map(\.filter.ownerId)), readAt: unit.readAt))
        let decision = planner.decide(
            filters: deciding.filters, waiting: waiting + fresh, lastNotifiedAt: deciding.lastNotifiedAt,
            clock: unit.clock, qualifies: deciding.waitingQualifies, mutual: unit.mutual)
        let planned = decision.planned
        let ids = try tx.writeNotifications(planned, at: now, runId: unit.runId)
        let digests = DigestMarks(planned, ids)
        // Each new match once: its row (marked when a digest counts it), and whether it waits.
        var rows: [NewMatch] = []
        rows.reserveCapacity(write.pairs.count)
        var waitingNow: [MatchPair] = []
        for result in unit.matches {
            let digest = digests.byFilter[result.filterId]
            let listed = write.notifying.contains(result.filterId)
            for profileId in result.profileIds {
                let pair = MatchPair(filterId: result.filterId, profileId: profileId)
                let notificationId = digest.flatMap { $0.counts(profileId) ? $0.id : nil }
                let waitsNow = notificationId == nil && listed
                rows.append(
                    NewMatch(
                        pair: pair, notificationId: notificationId,
                        mutual: !unit.mutual.isEmpty && unit.mutual.contains(pair), waits: waitsNow))
                if waitsNow { waitingNow.append(pair) }
            }
        }
        guard let inserted = try tx.insertMatches(rows, at: now, runId: unit.runId, bulk: unit.bulk) else {
            return nil
        }
        try tx.markNotified(digests.marks(of: waiting.map(\.pair)), mutual: unit.mutual)
        try tx.addWaiting(waitingNow, at: now)
        try write.noteUnlisted(write.pairs)  // every pair was inserted
        try tx.recordNotified(planned.map(\.filterId), at: now)
        try tx.markPassedOver(
            Self.withComebackStarts(
                Self.passedOver(waiting, by: decision, digests, evaluated: unit.evaluated), of: deciding.filters,
                unit.clock))
        return WorkUnitOutcome(
            matchesWritten: inserted, notificationsWritten: planned.count,
            mutualWritten: rows.count { $0.mutual }, digestsHeldBack: decision.heldBack.count)
    }

    /// The fallback, after another writer recorded one of the unit's pairs: the pairs not yet recorded are
    /// recorded unmarked, and the digests are decided from the table as it then stands.
    private func recordThenDecide(_ write: UnitWrite, _ deciding: Deciding) throws -> WorkUnitOutcome {
        let unit = write.unit, tx = write.tx, now = write.now
        let unmarked = write.pairs.map { NewMatch(pair: $0, mutual: unit.mutual.contains($0), waits: write.waits($0)) }
        let inserted = try tx.insertMatchesSkippingRecorded(unmarked, at: now, runId: unit.runId, bulk: unit.bulk)
        try tx.addWaiting(inserted.filter(write.waits), at: now)
        try write.noteUnlisted(inserted)
        let nowWaiting = try tx.waitingMatches(deciding.filters, forgetting: unit.passedOverCutoffs)
        // Read back from the table, the unit's new matches are waiting ones like the others.
        let newPairs = Set(write.pairs)
        let redecided = planner.decide(
            filters: deciding.filters, waiting: nowWaiting, lastNotifiedAt: deciding.lastNotifiedAt,
            clock: unit.clock, qualifies: { newPairs.contains($0) || deciding.waitingQualifies($0) },
            mutual: unit.mutual)
        let replanned = redecided.planned
        let newIds = try tx.writeNotifications(replanned, at: now, runId: unit.runId)
        // A digest counts only matches it was planned from, all of them in `nowWaiting`.
        let newDigests = DigestMarks(replanned, newIds)
        try tx.markNotified(newDigests.marks(of: nowWaiting.map(\.pair)), mutual: unit.mutual)
        try tx.recordNotified(replanned.map(\.filterId), at: now)
        // The unit's own new matches are not passed over by their first digest, as on the common path (which
        // lists them waiting after it decides): only the waiting matches a digest had read before.
        let insertedNow = Set(inserted)
        try tx.markPassedOver(
            Self.withComebackStarts(
                Self.passedOver(
                    nowWaiting, by: redecided, newDigests,
                    evaluated: { !insertedNow.contains($0) && (newPairs.contains($0) || unit.evaluated($0)) }),
                of: deciding.filters, unit.clock))
        return WorkUnitOutcome(
            matchesWritten: inserted.count, notificationsWritten: replanned.count,
            mutualWritten: unit.mutualCount(inserted), digestsHeldBack: redecided.heldBack.count)
    }

    /// The listed matches of `waiting` (read under the filters' locks) that `decision` passes over now: those the
    /// run `evaluated` of its filters that no digest counts, of a held-back filter's too, and not passed over
    /// by an earlier decision (they stay listed for `Retention.comebackDays` after that decision or the filter's
    /// next digest, `Retention.comebackStart`, within their
    /// pair's retention, and each decision reads them again). An entry listed after
    /// the run's read (by another writer, whatever its clock) is neither counted nor passed over: it waits until
    /// a run evaluates it.
    static func passedOver(
        _ waiting: [WaitingMatch], by decision: NotificationDecision, _ digests: DigestMarks,
        evaluated: (MatchPair) -> Bool
    ) -> [MatchPair] {
        let heldBack = Set(decision.heldBack)
        return waiting.lazy.filter { !$0.passedOver }.map(\.pair).filter { pair in
            guard evaluated(pair) else { return false }
            if let digest = digests.byFilter[pair.filterId] { return !digest.counts(pair.profileId) }
            return heldBack.contains(pair.filterId)
        }
    }

    /// Each passed-over pair with when its comeback starts (`Retention.comebackStart`), computed once per filter
    /// among those the pairs belong to (a unit decides up to thousands of filters; few pass a match over).
    static func withComebackStarts(
        _ pairs: [MatchPair], of deciding: [NotificationCandidateFilter], _ clock: EvaluationClock
    ) -> [(pair: MatchPair, comebackFrom: Timestamp)] {
        guard !pairs.isEmpty else { return [] }
        let every = Dictionary(deciding.map { ($0.filter.id, $0.filter.notifyEvery) }, uniquingKeysWith: { a, _ in a })
        var starts: [Int64: Timestamp] = [:]
        return pairs.map { pair in
            if let start = starts[pair.filterId] { return (pair, start) }
            // Every passed-over pair is a deciding filter's; the decision's clock alone would be the old rule.
            let start =
                every[pair.filterId].map {
                    Retention.comebackStart(decidedAt: clock.now, every: $0, in: clock.timeZone)
                } ?? clock.now
            starts[pair.filterId] = start
            return (pair, start)
        }
    }

    /// Inserts in one go; on a conflict, again skipping the pairs already recorded.
    private func insertSkippingConflicts(
        _ rows: [NewMatch], _ unit: WorkUnit, _ tx: any UnitTransaction
    ) throws
        -> [MatchPair]
    {
        guard !rows.isEmpty else { return [] }
        try tx.savepoint()
        if try tx.insertMatches(rows, at: unit.clock.now, runId: unit.runId, bulk: unit.bulk) != nil {
            return rows.map(\.pair)
        }
        try tx.rollbackToSavepoint()
        return try tx.insertMatchesSkippingRecorded(rows, at: unit.clock.now, runId: unit.runId, bulk: unit.bulk)
    }

    /// `ids` sorted, each once.
    private static func sortedUnique(_ ids: [Int64]) -> [Int64] {
        var unique: [Int64] = []
        unique.reserveCapacity(ids.count)
        for id in ids.sorted() where unique.last != id { unique.append(id) }
        return unique
    }
}

extension WorkUnit {
    /// How many of `pairs` the run found mutual.
    func mutualCount(_ pairs: [MatchPair]) -> Int {
        mutual.isEmpty ? 0 : pairs.count { mutual.contains($0) }
    }
}

extension WaitingMatch {
    public var pair: MatchPair { MatchPair(filterId: filterId, profileId: profileId) }
}

/// Which digest counts which match, by filter: a unit writes at most one digest a filter, and a match is
/// looked up by its filter once and then by binary search among the digest's counted profiles, not hashed
/// pair by pair (the first run marks about a million new matches).
struct DigestMarks {
    struct Digest {
        let id: Int64
        /// The profiles the digest counts, sorted.
        let counted: [Int64]

        func counts(_ profileId: Int64) -> Bool { counted.sortedContains(profileId) }
    }

    let byFilter: [Int64: Digest]

    init(_ planned: [PlannedNotification], _ ids: [Int64]) {
        byFilter = Dictionary(
            zip(ids, planned).map { id, notification in
                (notification.filterId, Digest(id: id, counted: notification.countedProfileIds.sorted()))
            },
            uniquingKeysWith: { _, later in later })
    }

    /// The digest ids of those of `pairs` a digest counts.
    func marks(of pairs: [MatchPair]) -> [MatchPair: Int64] {
        var marks: [MatchPair: Int64] = [:]
        for pair in pairs {
            if let digest = byFilter[pair.filterId], digest.counts(pair.profileId) { marks[pair] = digest.id }
        }
        return marks
    }
}
