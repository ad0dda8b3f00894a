/// One of `count` disjoint slices of the filters, by `owner_id mod count` (runs.md "Shards").
public struct Shard: Sendable, Hashable, CustomStringConvertible {
    public let index: Int
    public let count: Int

    /// The whole: one unsharded run.
    public static let all = Shard(uncheckedIndex: 0, count: 1)

    /// The most shards a run can be split into (each shard's run lock encodes N in 15 bits).
    public static let maximumCount = 32_767

    public init(index: Int, count: Int) throws(ShardError) {
        guard count >= 1 else { throw ShardError(text: "\(index)/\(count)", problem: "N must be at least 1") }
        guard count <= Shard.maximumCount else {
            throw ShardError(text: "\(index)/\(count)", problem: "N must be at most \(Shard.maximumCount)")
        }
        guard index >= 0, index < count else {
            throw ShardError(text: "\(index)/\(count)", problem: "K must satisfy 0 <= K < N")
        }
        self.index = index
        self.count = count
    }

    private init(uncheckedIndex: Int, count: Int) {
        self.index = uncheckedIndex
        self.count = count
    }

    /// Parses `K/N`.
    public init(parsing text: String) throws(ShardError) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let k = Int(parts[0]), let n = Int(parts[1]) else {
            throw ShardError(text: text, problem: "expected K/N, for example 0/4")
        }
        try self.init(index: k, count: n)
    }

    /// Whether this shard owns filters of `ownerId` (PostgreSQL's `owner_id % N = K` for non-negative ids;
    /// a negative id is placed by its non-negative remainder so every id lands in exactly one shard).
    public func owns(ownerId: Int64) -> Bool {
        let n = Int64(count)
        let r = ownerId % n
        return (r < 0 ? r + n : r) == Int64(index)
    }

    public var description: String { "\(index)/\(count)" }
}

public struct ShardError: Error, Sendable, Hashable, CustomStringConvertible {
    public let text: String
    public let problem: String
    public var description: String { "--shard \(text): \(problem)" }
}
