/// The bitset engine's bitsets: the rows of one matrix, `rowCount` rows of `wordsPerRow` 64-bit words
/// (bit `b` of a row is bit `b & 63` of its word `b >> 6`), zeroed when made, in one allocation that the
/// matrix owns and frees. Rows are numbered from 0; `Posting.dense` names a row.
///
/// This is the engine's one unsafe boundary: no pointer leaves it. Every operation checks its row and its
/// words with `assert` (debug builds, so every test; compiled out of release builds, whose loops run on
/// the raw words as fast as before).
///
/// Sharing (why `@unchecked Sendable` holds): while the index is built, concurrent workers fill distinct
/// rows, never the same one (a row is written by the one worker that owns its need or group); every read
/// happens after all fills returned (`DispatchQueue.concurrentPerform` returns), and the scan only reads.
final class BitMatrix: @unchecked Sendable {
    let rowCount: Int
    let wordsPerRow: Int
    private let storage: UnsafeMutablePointer<UInt64>

    init(rowCount: Int, wordsPerRow: Int) {
        precondition(rowCount >= 0 && wordsPerRow >= 0)
        self.rowCount = rowCount
        self.wordsPerRow = wordsPerRow
        let count = max(rowCount * wordsPerRow, 1)
        storage = .allocate(capacity: count)
        storage.initialize(repeating: 0, count: count)
    }

    deinit {
        storage.deallocate()
    }

    /// Bytes of the rows.
    var byteCount: Int { rowCount * wordsPerRow * 8 }

    /// Word 0 of `row`.
    @inline(__always)
    private func start(of row: Int) -> UnsafeMutablePointer<UInt64> {
        assert(row >= 0 && row < rowCount, "row \(row) outside 0..<\(rowCount)")
        return storage + row * wordsPerRow
    }

    /// Word `words.lowerBound` of `row`, after checking that `words` lies in the row.
    @inline(__always)
    private func start(of row: Int, words: Range<Int>) -> UnsafeMutablePointer<UInt64> {
        assert(words.lowerBound >= 0 && words.upperBound <= wordsPerRow, "words \(words) outside 0..<\(wordsPerRow)")
        return start(of: row) + words.lowerBound
    }

    // MARK: Filling (one worker per row)

    /// Sets bit `bit` of `row`.
    @inline(__always)
    func insert(_ bit: Int, inRow row: Int) {
        assert(bit >= 0 && bit < wordsPerRow << 6, "bit \(bit) outside the row")
        start(of: row)[bit >> 6] |= 1 << UInt64(bit & 63)
    }

    /// Sets word `word` of `row` to `value`.
    @inline(__always)
    func setWord(_ word: Int, ofRow row: Int, to value: UInt64) {
        assert(word >= 0 && word < wordsPerRow, "word \(word) outside 0..<\(wordsPerRow)")
        start(of: row)[word] = value
    }

    /// Makes `row` a copy of `words` (a whole row's words).
    func assign(row: Int, from words: [UInt64]) {
        assert(words.count == wordsPerRow, "\(words.count) words for a row of \(wordsPerRow)")
        let target = start(of: row)
        for word in 0..<wordsPerRow { target[word] = words[word] }
    }

    /// ORs row `source` into row `row` (distinct rows).
    func formUnion(row: Int, with source: Int) {
        assert(row != source)
        let target = start(of: row)
        let other = UnsafePointer(start(of: source))
        for word in 0..<wordsPerRow { target[word] |= other[word] }
    }

    // MARK: Reading (after every fill)

    /// Word `word` of `row`.
    @inline(__always)
    func word(_ word: Int, ofRow row: Int) -> UInt64 {
        assert(word >= 0 && word < wordsPerRow, "word \(word) outside 0..<\(wordsPerRow)")
        return start(of: row)[word]
    }

    /// How many bits of `row` are set.
    func population(ofRow row: Int) -> Int {
        let source = UnsafePointer(start(of: row))
        var population = 0
        for word in 0..<wordsPerRow { population += source[word].nonzeroBitCount }
        return population
    }

    /// Calls `body` with each set bit of `row`, ascending.
    func forEachSetBit(inRow row: Int, _ body: (Int) -> Void) {
        let source = UnsafePointer(start(of: row))
        for word in 0..<wordsPerRow {
            var bits = source[word]
            while bits != 0 {
                body(word << 6 + bits.trailingZeroBitCount)
                bits &= bits &- 1
            }
        }
    }

    // MARK: The scan: words `words` of rows (one chunk) into the first `words.count` words of a chunk

    /// `chunk = row[words]`; returns the OR of the words (0: none set).
    @inline(__always)
    func load(_ row: Int, words: Range<Int>, into chunk: inout ChunkWords) -> UInt64 {
        let source = UnsafePointer(start(of: row, words: words))
        let target = chunk.words(words.count)
        var any: UInt64 = 0
        for word in 0..<words.count {
            let value = source[word]
            target[word] = value
            any |= value
        }
        return any
    }

    /// `chunk |= row[words]`.
    @inline(__always)
    func formUnion(_ row: Int, words: Range<Int>, into chunk: inout ChunkWords) {
        let source = UnsafePointer(start(of: row, words: words))
        let target = chunk.words(words.count)
        for word in 0..<words.count { target[word] |= source[word] }
    }

    /// `chunk &= row[words]`; returns the OR of the result (0: none left).
    @inline(__always)
    func intersect(_ row: Int, words: Range<Int>, into chunk: inout ChunkWords) -> UInt64 {
        let source = UnsafePointer(start(of: row, words: words))
        let target = chunk.words(words.count)
        var any: UInt64 = 0
        for word in 0..<words.count {
            let value = target[word] & source[word]
            target[word] = value
            any |= value
        }
        return any
    }

    /// `chunk &= one[words] & two[words]` in one pass; returns the OR of the result (0: none left).
    @inline(__always)
    func intersect(_ one: Int, _ two: Int, words: Range<Int>, into chunk: inout ChunkWords) -> UInt64 {
        let first = UnsafePointer(start(of: one, words: words))
        let second = UnsafePointer(start(of: two, words: words))
        let target = chunk.words(words.count)
        var any: UInt64 = 0
        for word in 0..<words.count {
            let value = target[word] & first[word] & second[word]
            target[word] = value
            any |= value
        }
        return any
    }
}

/// The words of one chunk of the scan (at most `capacity`, 4,096 candidates), which a worker ANDs and ORs
/// rows of a `BitMatrix` into: owned by that worker alone (not copyable), freed when it goes. Word `w`
/// is word `chunk + w` of the rows; bit `b` of the chunk is candidate `chunk << 6 + b`.
struct ChunkWords: ~Copyable {
    static let capacity = 64
    private let storage: UnsafeMutablePointer<UInt64>

    init() {
        storage = .allocate(capacity: Self.capacity)
        storage.initialize(repeating: 0, count: Self.capacity)
    }

    deinit {
        storage.deallocate()
    }

    /// The first `count` words, for `BitMatrix`'s loops (never kept).
    @inline(__always)
    fileprivate mutating func words(_ count: Int) -> UnsafeMutablePointer<UInt64> {
        assert(count >= 0 && count <= Self.capacity, "\(count) words in a chunk of \(Self.capacity)")
        return storage
    }

    @inline(__always)
    subscript(word: Int) -> UInt64 {
        get {
            assert(word >= 0 && word < Self.capacity, "word \(word) outside the chunk")
            return storage[word]
        }
        set {
            assert(word >= 0 && word < Self.capacity, "word \(word) outside the chunk")
            storage[word] = newValue
        }
    }

    /// Sets bit `bit` (a candidate's offset from the chunk's first).
    @inline(__always)
    mutating func insert(_ bit: Int) {
        assert(bit >= 0 && bit < Self.capacity << 6, "bit \(bit) outside the chunk")
        storage[bit >> 6] |= 1 << UInt64(bit & 63)
    }

    /// Sets the first `count` words to `value`.
    @inline(__always)
    mutating func fill(_ count: Int, with value: UInt64) {
        let target = words(count)
        for word in 0..<count { target[word] = value }
    }

    /// The first `count` words become `other`'s; returns their OR (0: none set).
    @inline(__always)
    mutating func assign(_ count: Int, from other: borrowing ChunkWords) -> UInt64 {
        let target = words(count)
        let source = UnsafePointer(other.storage)
        var any: UInt64 = 0
        for word in 0..<count {
            let value = source[word]
            target[word] = value
            any |= value
        }
        return any
    }

    /// The first `count` words are ANDed with `other`'s; returns the OR of the result (0: none left).
    @inline(__always)
    mutating func intersect(_ count: Int, with other: borrowing ChunkWords) -> UInt64 {
        let target = words(count)
        let source = UnsafePointer(other.storage)
        var any: UInt64 = 0
        for word in 0..<count {
            let value = target[word] & source[word]
            target[word] = value
            any |= value
        }
        return any
    }

    /// How many bits of the first `count` words are set.
    @inline(__always)
    func population(_ count: Int) -> Int {
        assert(count >= 0 && count <= Self.capacity, "\(count) words in a chunk of \(Self.capacity)")
        var total = 0
        for word in 0..<count { total &+= storage[word].nonzeroBitCount }
        return total
    }
}
