import Chronology
import Dispatch

/// What a run finds for its digests before it writes (runs.md): which waiting matches still qualify (a digest
/// shows what the filter means at the run's clock) and which pairs are mutual ("Mutual matches"). The reads
/// follow the day's work (the waiting matches of the run's notify filters, the run's new pairs), never the
/// history.
struct DigestFindings: Sendable {
    /// The waiting matches still candidates at the run's clock; nil when the run writes no notifications.
    let qualifyingWaiting: Set<MatchPair>?
    /// The waiting matches the run read and found no longer candidates (usually few): with the qualifying ones,
    /// the entries a digest decision may pass over (`UnitCommitter.passedOver`).
    var unqualifiedWaiting: Set<MatchPair> = []
    /// Among the run's new pairs and the qualifying waiting matches, those found mutual.
    let mutual: Set<MatchPair>
    /// What reading the waiting matches' profiles met (odd values, quarantined rows), and the ids it read:
    /// the run counts and lists them as it does its candidates' (`ReadIssues.including`).
    var waitingRead: ReadReport = .empty
    var waitingProfileIds: [Int64] = []
    /// What the mutual check read beyond the run's own reads (the matched profiles' filters, their owners and the
    /// owners' rows): counted like the run's reads too.
    var mutualRead = MutualFinder.Reads()

    /// The run's read issues with those of the digests' reads: the waiting matches' profiles, and the filters and
    /// profiles the mutual check read. A row met by several reads is counted once.
    func issues(including runRead: ReadIssues) -> ReadIssues {
        runRead.including(waitingRead, read: waitingProfileIds)
            .including(filters: mutualRead.filters, owners: mutualRead.owners)
            .including(mutualRead.profiles, read: mutualRead.profileIds)
    }

    static func gather(
        prepared: PreparedFilters, chosen: [SavedFilter], found: [Int64: [Int64]],
        plan: MatchingPass.Plan, blocks candidateBlocks: BlockSet, repositories: MatchingRepositories,
        engine: any MatchEngine, candidates: ProfileColumns? = nil
    ) throws -> DigestFindings {
        var blocks = candidateBlocks
        var qualifying: Set<MatchPair>?
        var unqualified: Set<MatchPair> = []
        var waitingRead = ReadReport.empty
        var waitingProfileIds: [Int64] = []
        if plan.writesNotifications {
            // Only the filters a digest may be due for at the run's clock: a weekly filter's list (with the
            // matches its digests passed over, kept until the retention) is read on its digest's day, not daily.
            let notifying = prepared.all.filter { $0.filter.notify }.map(\.filter)
            let last = notifying.isEmpty ? [:] : try repositories.matches.lastNotified(filterIds: notifying.map(\.id))
            let due = notifying.filter { NotificationPlanner.isDue($0, lastNotifiedAt: last[$0.id], clock: plan.clock) }
                .map(\.id).sorted()
            let waiting =
                due.isEmpty
                ? WaitingProfiles(pairs: [], profiles: .empty)
                : try repositories.matches.waitingProfiles(
                    filterIds: due, forgetting: plan.passedOverCutoffs)
            // The run read the blocks of its candidates; a waiting match's profile need not be one.
            if !waiting.pairs.isEmpty {
                blocks = blocks.union(try repositories.blocks.blocks(involving: waiting.profiles.ids))
            }
            waitingRead = waiting.profiles.readReport
            waitingProfileIds = waiting.profiles.ids
            let kept = Self.qualifying(waiting, prepared: prepared, blocks: blocks, clock: plan.clock)
            unqualified = Set(waiting.pairs.lazy.filter { !kept.contains($0) })
            qualifying = kept
        }
        let finder = MutualFinder(
            engine: engine, profiles: repositories.profiles, filters: repositories.filters, blocks: blocks,
            clock: plan.clock, known: prepared,
            knownIneligible: Set(chosen.map(\.id)).subtracting(prepared.coveredSince), candidates: candidates)
        let pairs = PairsToJudge(found: found, waiting: qualifying ?? [], filters: prepared)
        var mutualRead = MutualFinder.Reads()
        let mutual = try finder.find(pairs, reads: &mutualRead)
        return DigestFindings(
            qualifyingWaiting: qualifying, unqualifiedWaiting: unqualified, mutual: mutual,
            waitingRead: waitingRead, waitingProfileIds: waitingProfileIds, mutualRead: mutualRead)
    }

    /// The waiting pairs whose profile is still a candidate of the filter as it is now: the profile exists
    /// and is active, is not the owner, no block either way (as the run read them; checked again at commit),
    /// and satisfies the filter's current conditions (owner's current plan applied) at the run's clock.
    static func qualifying(
        _ waiting: WaitingProfiles, prepared: PreparedFilters, blocks: BlockSet,
        clock: EvaluationClock
    ) -> Set<MatchPair> {
        let pairs = waiting.pairs
        guard !pairs.isEmpty else { return [] }
        let columns = waiting.profiles
        let rowOf = Dictionary(columns.ids.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        let chunks = max(1, min(64, pairs.count / 4_096))
        let slots = ResultSlots<[MatchPair]>(count: chunks)
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            let lower = pairs.count * chunk / chunks, upper = pairs.count * (chunk + 1) / chunks
            var kept: [MatchPair] = []
            for pair in pairs[lower..<upper] {
                guard let filter = prepared[pair.filterId], let row = rowOf[pair.profileId],
                    PairEligibility.isActive(columns.statuses[row]),
                    !PairEligibility.excludes(profileId: pair.profileId, ownerId: filter.owner.id, blocks: blocks),
                    ReferenceEvaluator.satisfies(columns, row: row, filter.conditions, clock: clock)
                else { continue }
                kept.append(pair)
            }
            slots.set(chunk, kept)
        }
        return Set(slots.values().joined())
    }
}

/// The pairs whose mutuality a run judges: its new pairs and the qualifying waiting matches (never both: a
/// waiting match is recorded, a new pair is not), each with its filter's owner; walked without copying them.
struct PairsToJudge {
    let found: [Int64: [Int64]]
    let waiting: Set<MatchPair>
    let filters: PreparedFilters

    func forEach(_ body: (_ pair: MatchPair, _ ownerId: Int64) -> Void) {
        for (filterId, ids) in found {
            guard let owner = filters[filterId]?.owner.id else { continue }
            for id in ids { body(MatchPair(filterId: filterId, profileId: id), owner) }
        }
        for pair in waiting {
            if let owner = filters[pair.filterId]?.owner.id { body(pair, owner) }
        }
    }
}

/// Finds which (F, P) pairs are mutual (runs.md "Mutual matches"): P has a filter G (not deleted, valid, not
/// suspended, P's plan applied, P active) that F's owner O satisfies at the run's clock, O active, no block
/// either way. Evaluated with the match engine: the matched profiles' filters against their pairs' owners,
/// in blocks of filters, each block against only the owners paired with its filters' owners, so that the
/// work and memory follow the pairs.
struct MutualFinder {
    let engine: any MatchEngine
    let profiles: any ProfileRepository
    let filters: any FilterRepository
    let blocks: BlockSet
    let clock: EvaluationClock
    /// Filters the run already prepared (used as they are), and the ids of the filters the run read and found not
    /// eligible (invalid, quarantined, suspended, owner inactive): every filter it read but did not prepare, except
    /// those it left out only because newer runs covered their owners.
    let known: PreparedFilters
    let knownIneligible: Set<Int64>
    /// The run's candidates as it read them: when every owner to judge is among them (a first run, a backfill of
    /// everyone), their columns are taken from here instead of read again.
    var candidates: ProfileColumns? = nil

    static let blockSize = 1_024

    /// What `find` read of the app's tables: the run counts their odd and unreadable rows (runs.md, "Eligibility":
    /// the summary counts the profiles and filters a run read that held such values).
    struct Reads: Sendable {
        /// The matched profiles' filters.
        var filters: [SavedFilter] = []
        /// The owners found for those filters the run had not prepared (one missing here has no profile row).
        var owners: [Int64: FilterOwner] = [:]
        /// What reading the pairs' owners' rows met, and their ids (nothing when taken from the candidates).
        var profiles: ReadReport = .empty
        var profileIds: [Int64] = []
    }

    /// Among `pairs` (each with its filter's owner), those mutual; `reads` gets what was read to judge them.
    func find(_ pairs: PairsToJudge, reads: inout Reads) throws -> Set<MatchPair> {
        var matchedSet = Set<Int64>()
        pairs.forEach { pair, _ in matchedSet.insert(pair.profileId) }
        guard !matchedSet.isEmpty else { return [] }
        let matched = matchedSet.sorted()
        let theirs = try filters.filters(ownedBy: matched)
        reads.filters = theirs
        guard !theirs.isEmpty else { return [] }
        let unknownOwners = Set(theirs.filter { known[$0.id] == nil }.map(\.ownerId))
        let theirOwners = unknownOwners.isEmpty ? [:] : try profiles.owners(ids: unknownOwners.sorted())
        reads.owners = theirOwners
        var reverse: [PreparedFilter] = []
        for filter in theirs {
            if let ready = known[filter.id] {
                reverse.append(ready)
                continue
            }
            guard !knownIneligible.contains(filter.id), filter.quarantineReason == nil, !filter.isDeleted,
                let owner = theirOwners[filter.ownerId], owner.isActive,
                let conditions = try? filter.decodedConditions(), !conditions.isSuspended(forOwnerPlan: owner.plan)
            else { continue }
            reverse.append(
                PreparedFilter(
                    filter: filter, owner: owner,
                    conditions: conditions.effective(forOwnerPlan: owner.plan).conditions))
        }
        guard !reverse.isEmpty else { return [] }

        // The pairs of each matched profile that has a filter, and the owners on their other side.
        let withFilters = Set(reverse.map(\.owner.id))
        var byMatched: [Int64: [(pair: MatchPair, ownerId: Int64)]] = [:]
        pairs.forEach { pair, ownerId in
            if withFilters.contains(pair.profileId) { byMatched[pair.profileId, default: []].append((pair, ownerId)) }
        }
        guard !byMatched.isEmpty else { return [] }
        let ownerIds = Array(Set(byMatched.values.joined().map(\.ownerId))).sorted()
        let ownerColumns = try columns(of: ownerIds)
        reads.profiles = ownerColumns.readReport
        reads.profileIds = ownerColumns.ids
        let rowOf = Dictionary(ownerColumns.ids.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        let pairsOf = byMatched

        // Blocks of filters, evaluated on all cores at once: one block is too small to spread.
        let judging = reverse.sorted { ($0.owner.id, $0.filter.id) < ($1.owner.id, $1.filter.id) }
        let exclusions = MatchExclusions(existing: [], blocks: blocks)
        let blockCount = (judging.count + Self.blockSize - 1) / Self.blockSize
        let found = ResultSlots<[MatchPair]>(count: blockCount)
        DispatchQueue.concurrentPerform(iterations: blockCount) { index in
            let block = Array(judging[index * Self.blockSize..<min((index + 1) * Self.blockSize, judging.count)])
            var rows = Set<Int>()
            for owner in Set(block.map(\.owner.id)) {
                for entry in pairsOf[owner] ?? [] { if let row = rowOf[entry.ownerId] { rows.insert(row) } }
            }
            var mutual: [MatchPair] = []
            defer { found.set(index, mutual) }
            guard !rows.isEmpty else { return }
            let batch = CandidateBatch(ownerColumns.selecting(rows: rows.sorted()))
            guard batch.count > 0 else { return }
            let byId = Dictionary(block.map { ($0.filter.id, $0) }, uniquingKeysWith: { a, _ in a })
            for result in engine.evaluate(
                block, against: batch, limit: batch.count, clock: clock, exclusions: exclusions)
            where !result.profileIds.isEmpty {
                guard let filter = byId[result.filterId] else { continue }
                let liked = Set(result.profileIds)
                for entry in pairsOf[filter.owner.id] ?? [] where liked.contains(entry.ownerId) {
                    mutual.append(entry.pair)
                }
            }
        }
        return Set(found.values().joined())
    }

    /// The owners' current columns: the run's candidates' rows when every owner is among them, else read.
    private func columns(of ownerIds: [Int64]) throws -> ProfileColumns {
        if let candidates {
            let wanted = Set(ownerIds)
            var rows: [Int] = []
            rows.reserveCapacity(wanted.count)
            var seen = Set<Int64>()
            for (row, id) in candidates.ids.enumerated() where wanted.contains(id) && seen.insert(id).inserted {
                rows.append(row)
            }
            if rows.count == wanted.count { return candidates.selecting(rows: rows) }
        }
        return try profiles.profileColumns(ids: ownerIds)
    }
}
