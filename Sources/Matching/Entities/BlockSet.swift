/// Answers whether two members have blocked one another (`blocks`), in either direction.
public protocol BlockLookup: Sendable {
    func blocksEitherWay(_ a: Int64, _ b: Int64) -> Bool
}

/// A set of `(blocker_id, blocked_id)` rows.
///
/// A pair is one hash lookup each way (`blocksEitherWay`). Where many pairs share a member (a filter's owner
/// and its matches), `counterparts(of:)` gives that member's other sides once, sorted, so each pair is a
/// binary search in a list that is almost always empty instead of two hash lookups.
public struct BlockSet: BlockLookup, Hashable {
    private struct Pair: Hashable, Sendable {
        let blocker: Int64
        let blocked: Int64
    }

    private let pairs: Set<Pair>
    /// Every member with a block either way, ascending; `others[bounds[i]..<bounds[i + 1]]` are the members
    /// on the other side of `members[i]`'s blocks, ascending, each once. Derived from `pairs`.
    private let members: [Int64]
    private let bounds: [Int]
    private let others: [Int64]

    public init(_ pairs: [(blocker: Int64, blocked: Int64)]) {
        self.init(pairs: Set(pairs.map { Pair(blocker: $0.blocker, blocked: $0.blocked) }))
    }

    private init(pairs: Set<Pair>) {
        self.pairs = pairs
        var sides: [(member: Int64, other: Int64)] = []
        sides.reserveCapacity(pairs.count * 2)
        for pair in pairs {
            sides.append((pair.blocker, pair.blocked))
            sides.append((pair.blocked, pair.blocker))
        }
        sides.sort { $0.member != $1.member ? $0.member < $1.member : $0.other < $1.other }
        var members: [Int64] = []
        var bounds: [Int] = []
        var others: [Int64] = []
        others.reserveCapacity(sides.count)
        for side in sides {
            if members.last != side.member {
                members.append(side.member)
                bounds.append(others.count)
            } else if others.last == side.other {
                continue  // blocked both ways: once
            }
            others.append(side.other)
        }
        bounds.append(others.count)
        self.members = members
        self.bounds = bounds
        self.others = others
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

    /// The members `member` has a block with, either way, ascending (almost always none):
    /// `blocksEitherWay(member, x)` is `counterparts(of: member).sortedContains(x)`.
    public func counterparts(of member: Int64) -> ArraySlice<Int64> {
        var low = 0
        var high = members.count
        while low < high {
            let middle = (low + high) >> 1
            if members[middle] < member { low = middle + 1 } else { high = middle }
        }
        guard low < members.count, members[low] == member else { return [] }
        return others[bounds[low]..<bounds[low + 1]]
    }

    /// The blocks of both sets (a new value).
    public func union(_ other: BlockSet) -> BlockSet {
        other.pairs.isEmpty ? self : BlockSet(pairs: pairs.union(other.pairs))
    }
}
