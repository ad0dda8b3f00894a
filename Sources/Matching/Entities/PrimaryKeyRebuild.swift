/// The size of `filter_matches`' primary key against its packed size: the same entries built at
/// PostgreSQL's default fill (90 %).
public struct PrimaryKeySize: Sendable, Hashable {
    public let bytes: Int64
    /// Entries: as the last VACUUM or ANALYZE counted them, or the statistics' live rows before any has.
    public let entries: Int64

    public init(bytes: Int64, entries: Int64) {
        self.bytes = bytes
        self.entries = entries
    }

    public var packedBytes: Int64 { Self.packedBytes(entries: entries) }
    /// How many times its packed size the key is (1.0 for an empty table).
    public var ratio: Double { packedBytes > 0 ? Double(bytes) / Double(packedBytes) : 1 }

    /// The size of a B-tree built fresh over `entries` keys of two bigints: 8-byte tuple headers, 16 bytes of
    /// key and a 4-byte line pointer on leaf pages filled to 90 % (PostgreSQL's default fillfactor for a
    /// build), pivots of 20 bytes on inner pages filled to 70 %, and the metapage.
    public static func packedBytes(entries: Int64) -> Int64 {
        guard entries > 0 else { return 8192 }
        let usable = 8192 - 24 - 16
        let leafEntries = Int64((usable - usable / 10) / 28)
        let innerEntries = Int64(usable * 7 / 10 / 20)
        var pages: Int64 = 1
        var level = (entries + leafEntries - 1) / leafEntries
        pages += level
        while level > 1 {
            level = (level + innerEntries - 1) / innerEntries
            pages += level
        }
        return pages * 8192
    }
}

/// What `matcher reindex` did with the primary key.
public struct PrimaryKeyRebuild: Sendable, Hashable {
    /// The index's name (`filter_matches_pkey`).
    public let index: String
    public let before: PrimaryKeySize
    /// Nil when the key was below the ratio and left alone.
    public let after: PrimaryKeySize?
    public let minimumRatio: Double
    /// Indexes an interrupted `REINDEX ... CONCURRENTLY` left behind (invalid, `*_ccnew*` or `*_ccold*`), dropped first.
    public let droppedLeftovers: [String]
    public let seconds: Double

    public init(
        index: String, before: PrimaryKeySize, after: PrimaryKeySize?, minimumRatio: Double,
        droppedLeftovers: [String], seconds: Double
    ) {
        self.index = index
        self.before = before
        self.after = after
        self.minimumRatio = minimumRatio
        self.droppedLeftovers = droppedLeftovers
        self.seconds = seconds
    }
}
