/// Answers whether two members have blocked one another (`blocks`), in either direction.
public protocol BlockLookup: Sendable {
    func blocksEitherWay(_ a: Int64, _ b: Int64) -> Bool
}

/// A set of `(blocker_id, blocked_id)` rows.
public struct BlockSet: BlockLookup, Hashable {
    private struct Pair: Hashable, Sendable {
        let blocker: Int64
        let blocked: Int64
    }

    private let pairs: Set<Pair>

    public init(_ pairs: [(blocker: Int64, blocked: Int64)]) {
        self.pairs = Set(pairs.map { Pair(blocker: $0.blocker, blocked: $0.blocked) })
    }

    public static let none = BlockSet([])

    public var count: Int { pairs.count }

    /// Whether `blocker` has blocked `blocked` (one direction).
    public func blocks(_ blocker: Int64, _ blocked: Int64) -> Bool {
        pairs.contains(Pair(blocker: blocker, blocked: blocked))
    }

    public func blocksEitherWay(_ a: Int64, _ b: Int64) -> Bool {
        !pairs.isEmpty && (blocks(a, b) || blocks(b, a))
    }

    /// The blocks of both sets (a new value).
    public func union(_ other: BlockSet) -> BlockSet {
        other.pairs.isEmpty ? self : BlockSet(pairs: pairs.union(other.pairs))
    }

    private init(pairs: Set<Pair>) {
        self.pairs = pairs
    }
}
