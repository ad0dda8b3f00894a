import Dispatch
import Foundation

/// The fast engine: every filter compiled once per run into an AND of OR-groups over shared bitsets
/// (one bit per candidate, in the cap's order), evaluated 64 candidates per word and 64 words per
/// chunk, filters spread across cores in blocks. A filter's scan stops at its `limit`-th candidate
/// that `exclusions` lets through, so its answer is exactly the reference engine's.
///
/// Which stored values satisfy a condition is not written here: each condition's item gives it, as a
/// `ValueSelection` (an AND of OR-groups of `ValueTest`s) from its kind definition in
/// `Sources/Matching/MasterItems/Kinds`, beside the `evaluate` the reference evaluator uses. The engine
/// only builds the rows of each test:
///
/// - Code tests (single and multi choice) get a bitset each, built for the codes filters list only; a
///   rare code (communities) keeps a sorted list of rows instead, which also lets a scan skip chunks.
/// - Bound tests use cumulative bitsets (`key <= b`, `key >= b`) over the ordered keys the item's
///   definition gives per batch (`orderedKeys`: a range's value, age on the run's date, a timestamp).
/// - A lower bound on `last_login` is a prefix of the candidates (they are in `last_login_at` order).
/// - anyOf lists used by several filters are OR-ed once into a shared bitset, within a memory budget.
/// - In each chunk a filter ANDs its groups, most selective first, and stops at the first empty result.
public struct BitsetMatchEngine: MatchEngine {
    public struct Options: Sendable {
        /// At most this many filters evaluated together, chunk by chunk, by one worker (fewer when
        /// there are few filters, so that every core gets several blocks). Larger blocks read each
        /// bitset fewer times; the bitsets a block uses in one chunk should stay in the core's L2.
        public var filtersPerBlock = 2048
        /// A code's rows are a list rather than a bitset when fewer than candidates / `sparseDivisor`.
        public var sparseDivisor = 64
        /// At most this many bytes of bitsets for anyOf lists shared by several filters.
        public var sharedGroupBudgetBytes = 128 << 20
        /// An anyOf list is shared when at least this many filters use it.
        public var sharedGroupMinimumUses = 2

        public init() {}
    }

    /// What one evaluation did, for benchmarks and logs.
    public struct Statistics: Sendable {
        public var planSeconds = 0.0
        public var indexSeconds = 0.0
        public var scanSeconds = 0.0
        /// Bytes of bitsets built (codes, bounds, flags, shared groups).
        public var bitsetBytes = 0
        public var bitsets = 0
        public var sparseRows = 0
        public var sharedGroups = 0
    }

    /// Every filter's answer (in the filters' order), how many candidates satisfy its conditions
    /// (before exclusions and `limit`; only from `evaluateCounting`, else 0), and statistics.
    public struct CountingEvaluation: Sendable {
        public let results: [FilterResult]
        public let matchCounts: [Int]
        public let statistics: Statistics
    }

    public let options: Options

    public init(options: Options = Options()) {
        self.options = options
    }

    public func evaluate(
        _ filters: [PreparedFilter], against batch: CandidateBatch, limit: Int,
        clock: EvaluationClock, exclusions: MatchExclusions
    ) -> [FilterResult] {
        run(filters, batch: batch, limit: limit, clock: clock, exclusions: exclusions, counting: false).results
    }

    /// Each filter's own limit, in the same pass: the scan stops each filter at its own `limits[i]`-th
    /// candidate. Equal limits take the single limit's path (the same scan, no per-filter lookup).
    public func evaluate(
        _ filters: [PreparedFilter], against batch: CandidateBatch, limits: [Int],
        clock: EvaluationClock, exclusions: MatchExclusions
    ) -> [FilterResult] {
        precondition(limits.count == filters.count, "one limit per filter")
        if let first = limits.first, limits.allSatisfy({ $0 == first }) {
            return evaluate(filters, against: batch, limit: first, clock: clock, exclusions: exclusions)
        }
        return run(
            filters, batch: batch, limit: limits.max() ?? 0, limits: limits.map { max($0, 0) }, clock: clock,
            exclusions: exclusions, counting: false
        ).results
    }

    /// `evaluate`, and also counts every candidate satisfying each filter's conditions (the scan then
    /// never stops early).
    public func evaluateCounting(
        _ filters: [PreparedFilter], against batch: CandidateBatch, limit: Int,
        clock: EvaluationClock, exclusions: MatchExclusions
    ) -> CountingEvaluation {
        run(filters, batch: batch, limit: limit, clock: clock, exclusions: exclusions, counting: true)
    }

    /// `evaluate` with statistics.
    public func evaluateWithStatistics(
        _ filters: [PreparedFilter], against batch: CandidateBatch, limit: Int,
        clock: EvaluationClock, exclusions: MatchExclusions
    ) -> CountingEvaluation {
        run(filters, batch: batch, limit: limit, clock: clock, exclusions: exclusions, counting: false)
    }

    /// With `limits` (one per filter, none negative), each filter stops at its own; `limit` is then their largest.
    private func run(
        _ filters: [PreparedFilter], batch: CandidateBatch, limit: Int, limits: [Int]? = nil,
        clock: EvaluationClock, exclusions: MatchExclusions, counting: Bool
    ) -> CountingEvaluation {
        var statistics = Statistics()
        let limit = max(limit, 0)
        if filters.isEmpty {
            return CountingEvaluation(results: [], matchCounts: [], statistics: statistics)
        }
        if batch.count == 0 || (limit == 0 && !counting) {
            return CountingEvaluation(
                results: filters.map { FilterResult(filterId: $0.filter.id, profileIds: []) },
                matchCounts: Array(repeating: 0, count: filters.count), statistics: statistics)
        }

        // Plan every filter, and number what they need.
        var started = ContinuousClock.now
        let plans = CompiledPlans(filters, clock: clock)
        statistics.planSeconds = Self.seconds(since: started)

        started = ContinuousClock.now
        let index = BitsetIndex.build(
            batch: batch, needs: plans.needs, groups: plans.groups, groupUses: plans.groupUses, items: plans.items,
            clock: clock,
            options: .init(
                sparseDivisor: options.sparseDivisor, groupBudgetBytes: options.sharedGroupBudgetBytes,
                groupMinimumUses: options.sharedGroupMinimumUses))
        let skip = ExclusionIndex(exclusions)
        statistics.indexSeconds = Self.seconds(since: started)
        statistics.bitsetBytes = index.bitsetBytes
        statistics.bitsets = index.bitsetCount
        statistics.sparseRows = index.sparseRows.count
        statistics.sharedGroups = index.sharedGroupCount

        // Scan, block by block of filters, in parallel.
        started = ContinuousClock.now
        let workers = max(ProcessInfo.processInfo.activeProcessorCount, 1)
        let blockSize = max(1, min(options.filtersPerBlock, (filters.count + workers * 8 - 1) / (workers * 8)))
        let blockCount = (filters.count + blockSize - 1) / blockSize
        let blocks = ResultSlots<BlockOutcome>(count: blockCount)
        let logins = batch.columns.lastLoginAt
        let ids = batch.ids
        let filterIds = filters.map(\.filter.id)
        let ownerIds = filters.map(\.owner.id)
        DispatchQueue.concurrentPerform(iterations: blockCount) { block in
            let range = block * blockSize..<min(filters.count, block * blockSize + blockSize)
            let outcome =
                if let limits {
                    Self.scanBlock(
                        range, plans: plans, index: index, logins: logins, ids: ids, filterIds: filterIds,
                        ownerIds: ownerIds, limit: EachLimit(Array(limits[range])), counting: counting, skip: skip)
                } else {
                    Self.scanBlock(
                        range, plans: plans, index: index, logins: logins, ids: ids, filterIds: filterIds,
                        ownerIds: ownerIds, limit: SameLimit(limit), counting: counting, skip: skip)
                }
            blocks.set(block, outcome)
        }
        var results: [FilterResult] = []
        var counts: [Int] = []
        results.reserveCapacity(filters.count)
        counts.reserveCapacity(filters.count)
        for outcome in blocks.values() {
            results += outcome.results
            counts += outcome.counts
        }
        statistics.scanSeconds = Self.seconds(since: started)
        return CountingEvaluation(results: results, matchCounts: counts, statistics: statistics)
    }

    private static func seconds(since start: ContinuousClock.Instant) -> Double {
        (ContinuousClock.now - start).seconds
    }

    struct BlockOutcome: Sendable {
        let results: [FilterResult]
        let counts: [Int]
    }

    /// The block's filters resolved to what the scan reads (`ScanFilter`, `ScanGroup`), then the
    /// chunk-major scan.
    private static func scanBlock<Limit: ScanLimit>(
        _ range: Range<Int>, plans: CompiledPlans, index: BitsetIndex, logins: [Int64],
        ids: [Int64], filterIds: [Int64], ownerIds: [Int64], limit: Limit, counting: Bool,
        skip: ExclusionIndex
    ) -> BlockOutcome {
        let rowCount = index.rowCount
        var filters = [ScanFilter](repeating: .unscanned, count: range.count)
        var groups: [ScanGroup] = []
        groups.reserveCapacity(range.count * 8)
        var bitsetRows: [Int] = []
        bitsetRows.reserveCapacity(range.count * 12)
        var localRows: [Int32] = []
        var live: [Int] = []
        // One filter's groups: (estimate, its bitsets' rows, its lists) as ranges of the scratch below.
        var resolved: [(estimate: Int, dense: Range<Int>, lists: Range<Int>)] = []
        var denseScratch: [Int] = []
        var listScratch: [Int] = []
        var order: [Int] = []
        for (local, filter) in range.enumerated() {
            if plans.never[filter] { continue }
            let prefixRows =
                plans.login[filter] == Int64.min ? rowCount : Self.prefix(logins, atLeast: plans.login[filter])
            if prefixRows == 0 { continue }
            // Resolve each group to bitsets and lists.
            resolved.removeAll(keepingCapacity: true)
            denseScratch.removeAll(keepingCapacity: true)
            listScratch.removeAll(keepingCapacity: true)
            var never = false
            for term in plans.terms[plans.termStarts[filter]..<plans.termStarts[filter + 1]] {
                let denseStart = denseScratch.count, listStart = listScratch.count
                var estimate = 0
                func take(_ posting: Posting) {
                    switch posting {
                    case .empty: break
                    case .dense(let row, let population): denseScratch.append(row); estimate += population
                    case .sparse(let list, let population): listScratch.append(list); estimate += population
                    }
                }
                if term >= 0 {
                    take(index.needPostings[Int(term)])
                } else if let shared = index.groupPostings[Int(-term - 1)] {
                    take(shared)
                } else {
                    for need in plans.groups[Int(-term - 1)] { take(index.needPostings[Int(need)]) }
                }
                if denseScratch.count == denseStart && listScratch.count == listStart {
                    never = true
                    break
                }
                resolved.append(
                    (min(estimate, rowCount), denseStart..<denseScratch.count, listStart..<listScratch.count))
            }
            if never { continue }
            // Most selective first.
            order.removeAll(keepingCapacity: true)
            order += resolved.indices
            order.sort { resolved[$0].estimate < resolved[$1].estimate }
            let firstGroup = groups.count
            for position in order {
                let group = resolved[position]
                let bitsets = bitsetRows.count..<bitsetRows.count + group.dense.count
                bitsetRows += denseScratch[group.dense]
                if group.lists.isEmpty {
                    groups.append(ScanGroup(bitsets: bitsets, listSource: .index, list: 0..<0))
                } else if group.lists.count == 1 {
                    let rows = index.sparseRanges[listScratch[group.lists.lowerBound]]
                    groups.append(ScanGroup(bitsets: bitsets, listSource: .index, list: rows))
                } else {
                    let start = localRows.count
                    for list in listScratch[group.lists] { localRows += index.sparseRows[index.sparseRanges[list]] }
                    var merged = Array(localRows[start...])
                    BitsetIndex.sortUnique(&merged)
                    localRows.replaceSubrange(start..., with: merged)
                    groups.append(ScanGroup(bitsets: bitsets, listSource: .local, list: start..<localRows.count))
                }
            }
            filters[local] = ScanFilter(
                groups: firstGroup..<groups.count, words: (prefixRows + 63) >> 6, rows: prefixRows)
            live.append(local)
        }

        // The scan.
        var found = Array(repeating: [Int64](), count: range.count)
        var counts = Array(repeating: 0, count: range.count)
        let recorded = range.map { skip.recorded(filterId: filterIds[$0]) }
        let blocked = range.map { skip.blocked(owner: ownerIds[$0]) }
        var kernel = Kernel(
            filters: filters, groups: groups, bitsetRows: bitsetRows, bitsets: index.bitsets,
            indexRows: index.sparseRows, localRows: localRows)
        kernel.scan(live: live, limit: limit, counting: counting, counts: &counts) { local, row in
            let id = ids[row]
            if !skip.excludes(
                owner: ownerIds[range.lowerBound + local], recorded: recorded[local], blocked: blocked[local],
                profileId: id)
            {
                found[local].append(id)
            }
            return found[local].count
        }
        let results = range.enumerated().map { local, filter in
            FilterResult(filterId: filterIds[filter], profileIds: found[local])
        }
        return BlockOutcome(results: results, counts: counts)
    }

    /// How many leading candidates have `last_login_at >= threshold` (they are in descending order).
    static func prefix(_ logins: [Int64], atLeast threshold: Int64) -> Int {
        var low = 0, high = logins.count
        while low < high {
            let middle = (low + high) >> 1
            if logins[middle] >= threshold { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

/// Where a block's scan stops each filter (by its index in the block): a generic parameter, so that the scan
/// of one limit for all (`SameLimit`) is compiled as before, without a lookup per filter.
private protocol ScanLimit {
    subscript(filter: Int) -> Int { get }
}

/// Every filter's limit the same.
private struct SameLimit: ScanLimit {
    let value: Int
    init(_ value: Int) { self.value = value }
    @inline(__always) subscript(filter: Int) -> Int { value }
}

/// A limit per filter of the block.
private struct EachLimit: ScanLimit {
    let values: [Int]
    init(_ values: [Int]) { self.values = values }
    @inline(__always) subscript(filter: Int) -> Int { values[filter] }
}

/// One filter of a block's scan: its OR-groups, `Kernel.groups[groups]` (most selective first; none: every
/// candidate), and the prefix of the candidates it scans (its `last_login` cut) in words and in rows.
private struct ScanFilter {
    var groups: Range<Int>
    var words: Int
    var rows: Int

    /// A filter that is not scanned (it never matches).
    static let unscanned = ScanFilter(groups: 0..<0, words: 0, rows: 0)
}

/// One OR-group of a filter in a block's scan: its bitsets (rows of the index's `BitMatrix`, listed at
/// `Kernel.bitsetRows[bitsets]`) and at most one list of candidates, ascending and distinct:
/// `indexRows[list]` (one of the index's sparse lists) or `localRows[list]` (several merged for the block).
private struct ScanGroup {
    enum ListSource { case index, local }

    var bitsets: Range<Int>
    var listSource: ListSource
    var list: Range<Int>
}

/// The chunk-major scan of one block of filters: for each chunk of 64 words (4,096 candidates), each
/// live filter ANDs its groups into `acc`, counts and extracts its set bits in order.
private struct Kernel {
    static let chunkWords = ChunkWords.capacity

    let filters: [ScanFilter]
    let groups: [ScanGroup]
    let bitsetRows: [Int]
    let bitsets: BitMatrix
    let indexRows: [Int32]
    let localRows: [Int32]
    /// Per group: where its list is read up to (lists are read once, chunk after chunk).
    var cursors: [Int]

    init(
        filters: [ScanFilter], groups: [ScanGroup], bitsetRows: [Int], bitsets: BitMatrix, indexRows: [Int32],
        localRows: [Int32]
    ) {
        self.filters = filters
        self.groups = groups
        self.bitsetRows = bitsetRows
        self.bitsets = bitsets
        self.indexRows = indexRows
        self.localRows = localRows
        cursors = groups.map(\.list.lowerBound)
    }

    /// `accept(filter, row)` records the row unless excluded and returns the filter's found count.
    mutating func scan<Limit: ScanLimit>(
        live: [Int], limit limits: Limit, counting: Bool, counts: inout [Int], accept: (Int, Int) -> Int
    ) {
        var live = live
        var maxWords = 0
        for filter in live { maxWords = max(maxWords, filters[filter].words) }
        var foundCount = [Int](repeating: 0, count: filters.count)
        var acc = ChunkWords()
        var tmp = ChunkWords()
        var chunk = 0
        while chunk < maxWords && !live.isEmpty {
            var position = 0
            while position < live.count {
                let filter = live[position]
                let prefixWords = filters[filter].words
                let limit = limits[filter]
                if chunk >= prefixWords || (!counting && foundCount[filter] >= limit) {
                    live.swapAt(position, live.count - 1)
                    live.removeLast()
                    continue
                }
                let length = min(Self.chunkWords, prefixWords - chunk)
                if evaluate(filter, words: chunk..<chunk + length, acc: &acc, tmp: &tmp) {
                    if chunk + length == prefixWords {
                        let tail = filters[filter].rows & 63
                        if tail != 0 { acc[length - 1] &= (1 << UInt64(tail)) &- 1 }
                    }
                    if counting { counts[filter] += acc.population(length) }
                    if foundCount[filter] < limit {
                        var found = foundCount[filter]
                        words: for word in 0..<length {
                            var bits = acc[word]
                            while bits != 0 {
                                let row = (chunk + word) << 6 + bits.trailingZeroBitCount
                                bits &= bits &- 1
                                found = accept(filter, row)
                                if found >= limit { break words }
                            }
                        }
                        foundCount[filter] = found
                    }
                }
                position += 1
            }
            chunk += Self.chunkWords
        }
    }

    /// Whether the group is one bitset and no (remaining) list.
    @inline(__always)
    private func isSingleBitset(_ group: Int) -> Bool {
        groups[group].bitsets.count == 1 && cursors[group] == groups[group].list.upperBound
    }

    /// The OR of the group's bitsets over `words` into `chunk` (its first bitset loaded, the others ORed).
    @inline(__always)
    private func loadUnion(_ bitsets: Range<Int>, words: Range<Int>, into chunk: inout ChunkWords) {
        _ = self.bitsets.load(bitsetRows[bitsets.lowerBound], words: words, into: &chunk)
        for ref in bitsets.lowerBound + 1..<bitsets.upperBound {
            self.bitsets.formUnion(bitsetRows[ref], words: words, into: &chunk)
        }
    }

    /// ANDs the filter's groups over the chunk `words` (at most 64) into `acc`; false when empty.
    @inline(__always)
    private mutating func evaluate(
        _ filter: Int, words: Range<Int>, acc: inout ChunkWords, tmp: inout ChunkWords
    ) -> Bool {
        let filterGroups = filters[filter].groups
        let length = words.count
        if filterGroups.isEmpty {
            acc.fill(length, with: ~0)
            return true
        }
        let firstRow = words.lowerBound << 6
        let endRow = words.upperBound << 6
        var group = filterGroups.lowerBound
        while group < filterGroups.upperBound {
            defer { group += 1 }
            let first = group == filterGroups.lowerBound
            // Two single bitsets in a row (after the first group): one pass for both.
            if !first && group + 1 < filterGroups.upperBound && isSingleBitset(group) && isSingleBitset(group + 1) {
                let one = bitsetRows[groups[group].bitsets.lowerBound]
                let two = bitsetRows[groups[group + 1].bitsets.lowerBound]
                if bitsets.intersect(one, two, words: words, into: &acc) == 0 { return false }
                group += 1
                continue
            }
            let dense = groups[group].bitsets
            let listEnd = groups[group].list.upperBound
            var any: UInt64 = 0
            if cursors[group] == listEnd {
                // Dense only (or a list already consumed).
                if dense.isEmpty { return false }
                if dense.count == 1 {
                    let row = bitsetRows[dense.lowerBound]
                    any =
                        first
                        ? bitsets.load(row, words: words, into: &acc) : bitsets.intersect(row, words: words, into: &acc)
                } else {
                    loadUnion(dense, words: words, into: &tmp)
                    any = first ? acc.assign(length, from: tmp) : acc.intersect(length, with: tmp)
                }
            } else {
                // A list of rows, maybe with bitsets: skip rows of earlier chunks, take this chunk's.
                let rows = groups[group].listSource == .index ? indexRows : localRows
                var cursor = cursors[group]
                while cursor < listEnd && Int(rows[cursor]) < firstRow { cursor += 1 }
                if dense.isEmpty {
                    if cursor == listEnd || Int(rows[cursor]) >= endRow {
                        cursors[group] = cursor
                        return false
                    }
                    tmp.fill(length, with: 0)
                } else {
                    loadUnion(dense, words: words, into: &tmp)
                }
                while cursor < listEnd {
                    let row = Int(rows[cursor])
                    if row >= endRow { break }
                    tmp.insert(row - firstRow)
                    cursor += 1
                }
                cursors[group] = cursor
                any = first ? acc.assign(length, from: tmp) : acc.intersect(length, with: tmp)
            }
            if any == 0 { return false }
        }
        return true
    }
}

/// Every filter's plan with its needs and OR-groups numbered, in flat arrays.
struct CompiledPlans: Sendable {
    /// Distinct needs; a need's number is its index.
    let needs: [BitsetNeed]
    /// The items the filters' conditions name, by index (`AnyMasterItem.index`); nil for the others.
    let items: [AnyMasterItem?]
    /// Distinct OR-groups of two or more needs (by number), and how many filters use each.
    let groups: [[Int32]]
    let groupUses: [Int]
    /// Per filter.
    let never: [Bool]
    /// Per filter: the `last_login_at` threshold, `Int64.min` for none.
    let login: [Int64]
    /// Filter `f`'s groups are `terms[termStarts[f] ..< termStarts[f + 1]]`: a need number (a group of
    /// one need) when >= 0, else group number `-term - 1`.
    let termStarts: [Int]
    let terms: [Int32]

    init(_ filters: [PreparedFilter], clock: EvaluationClock) {
        // Plans and numbering by parts in parallel, then the parts' numbers merged.
        let partSize = 4096
        let partCount = (filters.count + partSize - 1) / partSize
        let slots = ResultSlots<Part>(count: partCount)
        DispatchQueue.concurrentPerform(iterations: partCount) { part in
            let range = part * partSize..<min(filters.count, part * partSize + partSize)
            var plans = Part(range.map { FilterPlan(filters[$0].conditions, clock: clock) })
            for filter in range { plans.note(filters[filter].conditions) }
            slots.set(part, plans)
        }
        var numbers = Numbering()
        var never: [Bool] = []
        var login: [Int64] = []
        var termStarts: [Int] = [0]
        var terms: [Int32] = []
        never.reserveCapacity(filters.count)
        login.reserveCapacity(filters.count)
        termStarts.reserveCapacity(filters.count + 1)
        var items: [AnyMasterItem?] = []
        for part in slots.values() {
            for case let item? in part.items {
                if item.index >= items.count { items += Array(repeating: nil, count: item.index + 1 - items.count) }
                items[item.index] = item
            }
            let needMap = part.numbers.needs.map { numbers.number($0) }
            var groupMap: [Int32] = []
            for (group, members) in part.numbers.groups.enumerated() {
                groupMap.append(
                    numbers.number(group: members.map { needMap[Int($0)] }, uses: part.numbers.groupUses[group]))
            }
            never += part.never
            login += part.login
            let base = terms.count
            terms += part.terms.map { $0 >= 0 ? needMap[Int($0)] : -groupMap[Int(-$0 - 1)] - 1 }
            termStarts += part.termEnds.map { $0 + base }
        }
        self.needs = numbers.needs
        self.items = items
        self.groups = numbers.groups
        self.groupUses = numbers.groupUses
        self.never = never
        self.login = login
        self.termStarts = termStarts
        self.terms = terms
    }

    /// Distinct needs and groups, numbered in order of first use.
    struct Numbering: Sendable {
        var needs: [BitsetNeed] = []
        var groups: [[Int32]] = []
        var groupUses: [Int] = []
        private var needNumbers: [BitsetNeed: Int32] = [:]
        private var groupNumbers: [[Int32]: Int32] = [:]

        mutating func number(_ need: BitsetNeed) -> Int32 {
            if let number = needNumbers[need] { return number }
            let number = Int32(needs.count)
            needNumbers[need] = number
            needs.append(need)
            return number
        }

        mutating func number(group members: [Int32], uses: Int) -> Int32 {
            if let number = groupNumbers[members] {
                groupUses[Int(number)] += uses
                return number
            }
            let number = Int32(groups.count)
            groupNumbers[members] = number
            groups.append(members)
            groupUses.append(uses)
            return number
        }
    }

    /// Some filters' plans with their own numbering.
    struct Part: Sendable {
        var numbers = Numbering()
        var never: [Bool] = []
        var login: [Int64] = []
        /// Per filter: the end of its terms in `terms`.
        var termEnds: [Int] = []
        var terms: [Int32] = []
        /// The items the part's conditions name, by index.
        var items: [AnyMasterItem?] = []

        /// Notes the items of `conditions`.
        mutating func note(_ conditions: FilterConditions) {
            for condition in conditions.conditions {
                let index = condition.item.index
                if index >= items.count { items += Array(repeating: nil, count: index + 1 - items.count) }
                if items[index] == nil { items[index] = condition.item }
            }
        }

        init(_ plans: [FilterPlan]) {
            for plan in plans {
                never.append(plan.never)
                login.append(plan.loginThreshold ?? Int64.min)
                if !plan.never {
                    for group in plan.groups {
                        if group.count == 1 {
                            terms.append(numbers.number(group[0]))
                        } else {
                            terms.append(-numbers.number(group: group.map { numbers.number($0) }, uses: 1) - 1)
                        }
                    }
                }
                termEnds.append(terms.count)
            }
        }
    }
}

/// `MatchExclusions.excludes`, answered faster: the recorded pairs grouped by filter (sorted profile
/// ids), the owner compared directly, and the blocks looked up once per owner (`BlockSet.counterparts`), so
/// that a pair is binary searches in two short lists, not hash lookups.
struct ExclusionIndex: Sendable {
    private let byFilter: [Int64: [Int64]]
    private let blocks: BlockSet

    init(_ exclusions: MatchExclusions) {
        var byFilter: [Int64: [Int64]] = [:]
        for pair in exclusions.existing { byFilter[pair.filterId, default: []].append(pair.profileId) }
        for key in byFilter.keys { byFilter[key]!.sort() }
        self.byFilter = byFilter
        self.blocks = exclusions.blocks
    }

    /// The profiles recorded for the filter, sorted.
    func recorded(filterId: Int64) -> [Int64] { byFilter[filterId] ?? [] }

    /// The members the owner has a block with, either way, sorted.
    func blocked(owner: Int64) -> ArraySlice<Int64> { blocks.counterparts(of: owner) }

    /// Exactly `MatchExclusions.excludes(filter, profileId:)`, given the filter's owner, `recorded(filterId:)`
    /// and `blocked(owner:)`.
    @inline(__always)
    func excludes(owner: Int64, recorded: [Int64], blocked: ArraySlice<Int64>, profileId: Int64) -> Bool {
        if PairEligibility.isOwner(profileId: profileId, ownerId: owner) { return true }
        if !blocked.isEmpty, blocked.sortedContains(profileId) { return true }
        return !recorded.isEmpty && recorded.sortedContains(profileId)
    }
}
