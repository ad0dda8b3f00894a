import Chronology
import Dispatch

/// A set of candidate rows the bitset engine needs for some condition: the rows of item `item` (its
/// index, and its column's) that pass `test`. Built once per evaluation and shared by every filter that
/// uses it. What a test means for a kind is its definition's `selection(for:clock:)`.
struct BitsetNeed: Hashable, Sendable {
    let item: Int
    let test: ValueTest

    var isCode: Bool {
        if case .holds = test { return true }
        return false
    }
}

/// Where the rows of a need (or of a cached group of needs) are.
enum Posting: Sendable {
    /// No row.
    case empty
    /// A bitset, row `row` of `BitsetIndex.bitsets`, with `population` set bits.
    case dense(row: Int, population: Int)
    /// Ascending, distinct rows: `BitsetIndex.sparseRows[sparseRanges[list]]`.
    case sparse(list: Int, population: Int)

    var population: Int {
        switch self {
        case .empty: 0
        case .dense(_, let population), .sparse(_, let population): population
        }
    }
}

/// Every bitset and posting list one evaluation needs, over a `CandidateBatch`'s rows (cap order).
/// Needs and shared groups are numbered by the caller; postings are looked up by those numbers.
struct BitsetIndex: Sendable {
    /// Candidates (bits of a bitset).
    let rowCount: Int
    /// Every dense bitset: one row per dense need, then one per dense shared group.
    let bitsets: BitMatrix
    /// The posting of need `k`.
    let needPostings: [Posting]
    /// The posting of group `k` (an OR of needs) when it is shared, materialized once; nil otherwise.
    let groupPostings: [Posting?]
    /// Every sparse list, one after another; list `k` is `sparseRows[sparseRanges[k]]`.
    let sparseRows: [Int32]
    let sparseRanges: [Range<Int>]
    /// Bytes of dense bitsets.
    var bitsetBytes: Int { bitsets.byteCount }
    /// Dense bitsets.
    var bitsetCount: Int { bitsets.rowCount }
    var sharedGroupCount: Int { groupPostings.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }

    struct Options: Sendable {
        /// A code's rows are kept as a list rather than a bitset when fewer than rows / `sparseDivisor`.
        var sparseDivisor: Int
        /// At most this many bytes of bitsets for shared OR-groups.
        var groupBudgetBytes: Int
        /// An OR-group is shared when at least this many filters use it.
        var groupMinimumUses: Int
    }

    /// Builds the postings of `needs`, and of the groups (OR-groups of two or more needs, by need
    /// number, with how many filters use each) worth sharing. `items[k]` is the item of index `k` when a
    /// need reads its column: its definition gives the ordered keys that bounds compare.
    static func build(
        batch: CandidateBatch, needs: [BitsetNeed], groups: [[Int32]], groupUses: [Int],
        items: [AnyMasterItem?], clock: EvaluationClock, options: Options
    ) -> BitsetIndex {
        let rowCount = batch.count
        let wordCount = (rowCount + 63) >> 6
        let columns = batch.columns
        let sparseLimit = rowCount / max(options.sparseDivisor, 1)

        // 1. How many rows each code need has, item by item in parallel.
        let byItem = Dictionary(grouping: needs.indices, by: { needs[$0].item }).map { ($0.key, $0.value) }
        let codeItems = byItem.map { ($0.0, $0.1.filter { needs[$0].isCode }) }.filter { !$0.1.isEmpty }
        let counted = ResultSlots<[Int]>(count: codeItems.count)
        DispatchQueue.concurrentPerform(iterations: codeItems.count) { index in
            let (item, itemNeeds) = codeItems[index]
            counted.set(
                index,
                Self.codePopulations(
                    columns.columns[item], needs: itemNeeds.map { needs[$0] },
                    rowCount: rowCount))
        }
        var codePopulation = [Int](repeating: -1, count: needs.count)
        for (index, populations) in counted.values().enumerated() {
            for (need, population) in zip(codeItems[index].1, populations) { codePopulation[need] = population }
        }

        // 2. Which needs get a bitset (codes: when common enough; every bound and flag), which a list;
        // which shared groups get a bitset too, within the budget.
        var postings = [Posting](repeating: .empty, count: needs.count)
        var denseNeeds: [Int] = []
        var listed = [Bool](repeating: false, count: needs.count)
        for need in needs.indices {
            let population = codePopulation[need]
            if population < 0 || population >= max(sparseLimit, 1) {
                denseNeeds.append(need)
            } else if population > 0 {
                listed[need] = true
            }
        }
        let wordBytes = wordCount * 8
        var budget = options.groupBudgetBytes
        var denseGroups: [Int] = []
        var sparseGroups: [Int] = []
        let shared = groups.indices.filter { groupUses[$0] >= options.groupMinimumUses && groups[$0].count >= 2 }
            .sorted { groupUses[$0] != groupUses[$1] ? groupUses[$0] > groupUses[$1] : $0 < $1 }
        for group in shared {
            let estimate = groups[group].reduce(0) { total, need in
                total + (codePopulation[Int(need)] >= 0 ? codePopulation[Int(need)] : rowCount)
            }
            if estimate < sparseLimit {
                sparseGroups.append(group)
            } else if wordBytes <= budget {
                budget -= wordBytes
                denseGroups.append(group)
            }
        }

        // 3. The bitsets: one row per dense need, then one per dense group.
        let bitsets = BitMatrix(rowCount: denseNeeds.count + denseGroups.count, wordsPerRow: wordCount)
        var denseRows = [Int](repeating: -1, count: needs.count)
        for (row, need) in denseNeeds.enumerated() { denseRows[need] = row }

        // 4. Fill the bitsets and lists, item by item in parallel (each need's row by its item's worker).
        let frozenRows = denseRows
        let frozenListed = listed
        let filled = ResultSlots<Filled>(count: byItem.count)
        DispatchQueue.concurrentPerform(iterations: byItem.count) { index in
            let (item, itemNeeds) = byItem[index]
            filled.set(
                index,
                Self.fill(
                    itemNeeds, needs: needs, item: items[item], column: columns.columns[item], listed: frozenListed,
                    denseRows: frozenRows, bitsets: bitsets, rowCount: rowCount, clock: clock))
        }
        var sparseLists: [[Int32]] = []
        for result in filled.values() {
            for (need, population) in result.populations {
                postings[need] = population == 0 ? .empty : .dense(row: denseRows[need], population: population)
            }
            for (need, rows) in result.lists where !rows.isEmpty {
                postings[need] = .sparse(list: sparseLists.count, population: rows.count)
                sparseLists.append(rows)
            }
        }

        // 5. The shared groups: bitsets (in parallel, a row per group) and merged lists.
        var groupPostings = [Posting?](repeating: nil, count: groups.count)
        let frozenPostings = postings
        let frozenLists = sparseLists
        let groupPopulations = ResultSlots<Int>(count: denseGroups.count)
        let firstGroupRow = denseNeeds.count
        let frozenGroups = denseGroups
        DispatchQueue.concurrentPerform(iterations: frozenGroups.count) { index in
            let target = firstGroupRow + index
            for need in groups[frozenGroups[index]] {
                switch frozenPostings[Int(need)] {
                case .empty:
                    break
                case .dense(let source, _):
                    bitsets.formUnion(row: target, with: source)
                case .sparse(let list, _):
                    for row in frozenLists[list] { bitsets.insert(Int(row), inRow: target) }
                }
            }
            groupPopulations.set(index, bitsets.population(ofRow: target))
        }
        for (index, population) in groupPopulations.values().enumerated() {
            groupPostings[denseGroups[index]] =
                population == 0 ? .empty : .dense(row: firstGroupRow + index, population: population)
        }
        for group in sparseGroups {
            let rows = mergedRows(groups[group].map { postings[Int($0)] }, lists: sparseLists, bitsets: bitsets)
            if rows.isEmpty {
                groupPostings[group] = .empty
            } else {
                groupPostings[group] = .sparse(list: sparseLists.count, population: rows.count)
                sparseLists.append(rows)
            }
        }

        var sparseRows: [Int32] = []
        sparseRows.reserveCapacity(sparseLists.reduce(0) { $0 + $1.count })
        var sparseRanges: [Range<Int>] = []
        for list in sparseLists {
            sparseRanges.append(sparseRows.count..<sparseRows.count + list.count)
            sparseRows.append(contentsOf: list)
        }
        return BitsetIndex(
            rowCount: rowCount, bitsets: bitsets, needPostings: postings,
            groupPostings: groupPostings, sparseRows: sparseRows, sparseRanges: sparseRanges)
    }

    /// The ascending distinct rows of the union of `postings` (small ones: a dense one is expanded).
    static func mergedRows(_ postings: [Posting], lists: [[Int32]], bitsets: BitMatrix) -> [Int32] {
        var rows: [Int32] = []
        for posting in postings {
            switch posting {
            case .empty:
                break
            case .sparse(let list, _):
                rows.append(contentsOf: lists[list])
            case .dense(let row, _):
                bitsets.forEachSetBit(inRow: row) { rows.append(Int32($0)) }
            }
        }
        if postings.count > 1 { sortUnique(&rows) }
        return rows
    }

    /// Sorts `rows` and removes repetitions.
    static func sortUnique(_ rows: inout [Int32]) {
        rows.sort()
        var unique = 0
        for index in rows.indices where index == 0 || rows[index] != rows[unique - 1] {
            rows[unique] = rows[index]
            unique += 1
        }
        rows.removeLast(rows.count - unique)
    }

    /// How many rows hold each `.code` need of one item's column.
    private static func codePopulations(_ column: ProfileColumns.Column, needs: [BitsetNeed], rowCount: Int) -> [Int] {
        switch column {
        case .codes(let codes):
            var histogram = [Int](repeating: 0, count: 1 << 16)
            codes.withUnsafeBufferPointer { codes in
                for row in 0..<rowCount { histogram[Int(codes[row]) + 32768] += 1 }
            }
            return needs.map { need in
                guard case .holds(let code) = need.test, let narrow = Int16(exactly: code) else { return 0 }
                return histogram[Int(narrow) + 32768]
            }
        case .codeSets(let sets):
            let table = codeTable(needs)
            var lastRow = [Int32](repeating: -1, count: needs.count)
            var populations = [Int](repeating: 0, count: needs.count)
            sets.offsets.withUnsafeBufferPointer { offsets in
                sets.values.withUnsafeBufferPointer { values in
                    for row in 0..<rowCount {
                        for element in offsets[row]..<offsets[row + 1] {
                            let index = Int(table.lookup(values[element]))
                            if index >= 0 && lastRow[index] != Int32(row) {
                                lastRow[index] = Int32(row)
                                populations[index] += 1
                            }
                        }
                    }
                }
            }
            return populations
        default:
            return needs.map { _ in 0 }  // a code condition on a column without codes never matches
        }
    }

    private static func codeTable(_ needs: [BitsetNeed]) -> CodeTable {
        var table = CodeTable(capacity: needs.count)
        for (index, need) in needs.enumerated() {
            guard case .holds(let code) = need.test else { continue }
            table.insert(code, Int32(index))
        }
        return table
    }

    /// What `fill` made for one item: each dense need's population, each listed need's rows.
    struct Filled: Sendable {
        var populations: [(Int, Int)] = []
        var lists: [(Int, [Int32])] = []
    }

    /// The code needs of one item: dense ones set in their bitsets, listed ones as rows.
    private static func fillCodes(
        _ itemNeeds: [Int], needs: [BitsetNeed], column: ProfileColumns.Column,
        listed: [Bool], denseRows: [Int], bitsets: BitMatrix, rowCount: Int
    ) -> Filled {
        // Local slot k: needs itemNeeds[k]; a bitset (row targets[k]) when targets[k] >= 0, else a list.
        let targets: [Int] = itemNeeds.map { denseRows[$0] }
        var lists = Array(repeating: [Int32](), count: itemNeeds.count)
        var populations = [Int](repeating: 0, count: itemNeeds.count)
        @inline(__always) func take(_ k: Int, _ row: Int) {
            let target = targets[k]
            if target >= 0 {
                bitsets.insert(row, inRow: target)
            } else {
                lists[k].append(Int32(row))
            }
            populations[k] += 1
        }
        switch column {
        case .codes(let codes):
            var slot = [Int32](repeating: -1, count: 1 << 16)
            for (k, need) in itemNeeds.enumerated() {
                guard case .holds(let code) = needs[need].test, let narrow = Int16(exactly: code),
                    denseRows[need] >= 0 || listed[need]
                else { continue }
                slot[Int(narrow) + 32768] = Int32(k)
            }
            codes.withUnsafeBufferPointer { codes in
                for row in 0..<rowCount {
                    let k = slot[Int(codes[row]) + 32768]
                    if k >= 0 { take(Int(k), row) }
                }
            }
        case .codeSets(let sets):
            var table = CodeTable(capacity: itemNeeds.count)
            for (k, need) in itemNeeds.enumerated() {
                guard case .holds(let code) = needs[need].test, denseRows[need] >= 0 || listed[need] else {
                    continue
                }
                table.insert(code, Int32(k))
            }
            var lastRow = [Int32](repeating: -1, count: itemNeeds.count)
            sets.offsets.withUnsafeBufferPointer { offsets in
                sets.values.withUnsafeBufferPointer { values in
                    for row in 0..<rowCount {
                        for element in offsets[row]..<offsets[row + 1] {
                            let k = Int(table.lookup(values[element]))
                            if k >= 0 && lastRow[k] != Int32(row) {
                                lastRow[k] = Int32(row)
                                take(k, row)
                            }
                        }
                    }
                }
            }
        default:
            break
        }
        var filled = Filled()
        for (k, need) in itemNeeds.enumerated() {
            if targets[k] >= 0 {
                filled.populations.append((need, populations[k]))
            } else if listed[need] {
                filled.lists.append((need, lists[k]))
            }
        }
        return filled
    }

    /// Fills the bitsets and lists of one item's needs (by number); `denseRows[need]` is the need's row of
    /// `bitsets`, -1 when it has none (a listed or an empty code).
    private static func fill(
        _ itemNeeds: [Int], needs: [BitsetNeed], item: AnyMasterItem?, column: ProfileColumns.Column, listed: [Bool],
        denseRows: [Int], bitsets: BitMatrix, rowCount: Int, clock: EvaluationClock
    ) -> Filled {
        let wordCount = (rowCount + 63) >> 6
        let codeNeeds = itemNeeds.filter { needs[$0].isCode }
        var result =
            codeNeeds.isEmpty
            ? Filled()
            : fillCodes(
                codeNeeds, needs: needs, column: column, listed: listed, denseRows: denseRows, bitsets: bitsets,
                rowCount: rowCount)
        var cuts: [(Int, ValueTest)] = []
        for need in itemNeeds {
            switch needs[need].test {
            case .holds:
                break
            case .flag(let value):
                let target = denseRows[need]
                var population = 0
                if case .flags(let bits) = column {
                    bits.words.withUnsafeBufferPointer { source in
                        for word in 0..<wordCount {
                            let bits = value ? source[word] : ~source[word] & tailMask(word: word, rowCount: rowCount)
                            bitsets.setWord(word, ofRow: target, to: bits)
                            population += bits.nonzeroBitCount
                        }
                    }
                }
                result.populations.append((need, population))
            case .atLeast, .atMost:
                cuts.append((need, needs[need].test))
            }
        }
        if !cuts.isEmpty {
            // A bound on a column without ordered keys never matches: every bitset stays empty.
            if let ordered = item?.orderedKeys(of: column, clock: clock) {
                result.populations += fillCuts(
                    cuts, ordered: ordered, denseRows: denseRows, bitsets: bitsets, rowCount: rowCount)
            } else {
                result.populations += cuts.map { ($0.0, 0) }
            }
        }
        return result
    }

    /// The ones of word `word` that are rows (all but the bits past the last row).
    @inline(__always)
    static func tailMask(word: Int, rowCount: Int) -> UInt64 {
        let valid = rowCount - word << 6
        return valid >= 64 ? ~0 : (1 << UInt64(valid)) &- 1
    }

    /// The bitsets of `atLeast` / `atMost` needs on one column's ordered keys (as its item's definition
    /// gives them): rows sorted into buckets between the bounds, then one sweep up (atMost) and one down
    /// (atLeast). A row whose key is not defined is in no bitset.
    private static func fillCuts(
        _ cuts: [(Int, ValueTest)], ordered: OrderedKeys, denseRows: [Int], bitsets: BitMatrix, rowCount: Int
    ) -> [(Int, Int)] {
        let wordCount = (rowCount + 63) >> 6
        precondition(ordered.keys.count == rowCount, "one ordered key per row")
        let values = ordered.keys
        let answered = ordered.defined
        // Split points: value <= split[k] for atMost(split[k]); value > split[k] for atLeast(split[k] + 1).
        var splitSet = Set<Int64>()
        for (_, cut) in cuts {
            switch cut {
            case .atMost(let bound): splitSet.insert(bound)
            case .atLeast(let bound) where bound > Int64.min: splitSet.insert(bound - 1)
            default: break
            }
        }
        let splits = splitSet.sorted()
        // Bucket of a value: the first split it does not exceed (splits.count when above all).
        @inline(__always) func bucket(_ value: Int64) -> Int {
            var low = 0, high = splits.count
            while low < high {
                let middle = (low + high) >> 1
                if splits[middle] < value { low = middle + 1 } else { high = middle }
            }
            return low
        }
        let bucketCount = splits.count + 1
        var starts = [Int](repeating: 0, count: bucketCount + 1)
        var bucketOf = [Int32](repeating: -1, count: rowCount)
        for row in 0..<rowCount where answered[row] {
            let b = bucket(values[row])
            bucketOf[row] = Int32(b)
            starts[b + 1] += 1
        }
        for b in 0..<bucketCount { starts[b + 1] += starts[b] }
        var next = starts
        var sorted = [Int32](repeating: 0, count: starts[bucketCount])
        for row in 0..<rowCount where bucketOf[row] >= 0 {
            let b = Int(bucketOf[row])
            sorted[next[b]] = Int32(row)
            next[b] += 1
        }
        bucketOf = []
        var atMostBySplit: [Int: Int] = [:]
        var atLeastBySplit: [Int: Int] = [:]  // keyed by the split just below the bound
        var everyAnswered: [Int] = []
        let splitIndex = Dictionary(uniqueKeysWithValues: splits.enumerated().map { ($1, $0) })
        for (need, cut) in cuts {
            switch cut {
            case .atMost(let bound): atMostBySplit[splitIndex[bound]!] = need
            case .atLeast(let bound) where bound > Int64.min: atLeastBySplit[splitIndex[bound - 1]!] = need
            default: everyAnswered.append(need)
            }
        }
        var result: [(Int, Int)] = []
        var running = [UInt64](repeating: 0, count: wordCount)
        // Up: after bucket k, `running` holds every value <= splits[k].
        var population = 0
        for k in 0..<splits.count {
            for index in starts[k]..<starts[k + 1] {
                let row = Int(sorted[index])
                running[row >> 6] |= 1 << UInt64(row & 63)
            }
            population += starts[k + 1] - starts[k]
            if let need = atMostBySplit[k] {
                bitsets.assign(row: denseRows[need], from: running)
                result.append((need, population))
            }
        }
        // Down: after bucket k + 1, `running` holds every value > splits[k].
        for word in 0..<wordCount { running[word] = 0 }
        population = 0
        var k = splits.count - 1
        while k >= 0 {
            for index in starts[k + 1]..<starts[k + 2] {
                let row = Int(sorted[index])
                running[row >> 6] |= 1 << UInt64(row & 63)
            }
            population += starts[k + 2] - starts[k + 1]
            if let need = atLeastBySplit[k] {
                bitsets.assign(row: denseRows[need], from: running)
                result.append((need, population))
            }
            k -= 1
        }
        for need in everyAnswered {
            let target = denseRows[need]
            for row in sorted { bitsets.insert(Int(row), inRow: target) }
            result.append((need, sorted.count))
        }
        return result
    }
}

/// An open-addressing hash table from Int32 keys to Int32 values (multi-choice codes to need slots, birth days
/// to ages in `RangeItemDefinition.orderedKeys`),
/// much faster than `Dictionary` in the per-element loops. Grows as needed.
struct CodeTable {
    private var keys: [Int32]
    private var values: [Int32]
    private var used: [Bool]
    private var mask: Int
    private(set) var count = 0

    init(capacity: Int) {
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        keys = Array(repeating: 0, count: size)
        values = Array(repeating: -1, count: size)
        used = Array(repeating: false, count: size)
        mask = size - 1
    }

    /// Keys are codes that users choose (filters' lists, profiles' sets): the slot mixes in a seed drawn
    /// once per process, so nobody can craft codes that pile into one probe chain (issue 14).
    private static let processSeed = UInt64.random(in: .min ... .max)
    private let seed = CodeTable.processSeed

    @inline(__always)
    private func slot(_ key: Int32) -> Int {
        var x = UInt64(UInt32(bitPattern: key)) ^ seed  // murmur3's fmix64 of the seeded key
        x = (x ^ (x >> 33)) &* 0xFF51_AFD7_ED55_8CCD
        x = (x ^ (x >> 33)) &* 0xC4CE_B9FE_1A85_EC53
        return Int(truncatingIfNeeded: x ^ (x >> 33)) & mask
    }

    mutating func insert(_ key: Int32, _ value: Int32) {
        if (count + 1) * 2 > keys.count { grow() }
        var index = slot(key)
        while used[index] {
            if keys[index] == key { values[index] = value; return }
            index = (index + 1) & mask
        }
        used[index] = true
        keys[index] = key
        values[index] = value
        count += 1
    }

    /// The value of `key`, or -1.
    @inline(__always)
    func lookup(_ key: Int32) -> Int32 {
        var index = slot(key)
        while used[index] {
            if keys[index] == key { return values[index] }
            index = (index + 1) & mask
        }
        return -1
    }

    /// The value of `key`, or nil.
    @inline(__always)
    func lookupValue(_ key: Int32) -> Int32? {
        var index = slot(key)
        while used[index] {
            if keys[index] == key { return values[index] }
            index = (index + 1) & mask
        }
        return nil
    }

    private mutating func grow() {
        let oldKeys = keys, oldValues = values, oldUsed = used
        let size = keys.count * 2
        keys = Array(repeating: 0, count: size)
        values = Array(repeating: -1, count: size)
        used = Array(repeating: false, count: size)
        mask = size - 1
        count = 0
        for index in oldKeys.indices where oldUsed[index] {
            insert(oldKeys[index], oldValues[index])
        }
    }
}
