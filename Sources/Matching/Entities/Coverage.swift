import Chronology

/// A shard's last successful incremental run: the filters of the owners in `shard` have seen every
/// profile change up to `mark`.
public struct CoverageEntry: Sendable, Hashable, Codable {
    public let shard: Shard
    public let mark: ChangeMark
    /// When the mark was taken, by the store's clock. Orders entries: a mark taken later sees every
    /// change an earlier one saw.
    public let takenAt: Timestamp
    /// The time zone the run evaluated in (nil for progress recorded before zones were kept).
    public let timeZone: String?

    public init(shard: Shard, mark: ChangeMark, takenAt: Timestamp, timeZone: String? = nil) {
        self.shard = shard
        self.mark = mark
        self.takenAt = takenAt
        self.timeZone = timeZone
    }
}

/// Where change capture stands for every owner, whatever shard layouts ran before (runs.md "Shards").
///
/// Each layout's shard that succeeded leaves an entry. The filters of an owner have seen every change
/// up to the newest entry whose shard owns that owner; an owner no entry owns has seen nothing (its
/// filters' first run considers every profile). So changing N, or running unsharded in between, never
/// re-evaluates unchanged profiles and never skips a change: each filter continues from its own newest
/// coverage.
public struct Coverage: Sendable, Hashable, Codable {
    /// Newest first.
    public let entries: [CoverageEntry]

    public static let none = Coverage(entries: [])

    public init(entries: [CoverageEntry]) {
        self.entries = entries.sorted {
            $0.takenAt != $1.takenAt ? $0.takenAt > $1.takenAt : $0.shard.count > $1.shard.count
        }
    }

    /// The position in `entries` of the newest entry covering `ownerId`; nil when none does.
    public func entryIndex(forOwner ownerId: Int64) -> Int? {
        entries.firstIndex { $0.shard.owns(ownerId: ownerId) }
    }

    /// Whether every owner of `shard` has some entry.
    public func coversWholly(_ shard: Shard) -> Bool {
        Self.covers(entries.map(\.shard), wholly: shard)
    }

    /// The entries that may cover some owner of `shard` (their residue classes intersect), newest first.
    public func relevant(to shard: Shard) -> Coverage {
        Coverage(entries: entries.filter { $0.shard.intersects(shard) })
    }

    /// The entries some owner of `shard` takes its changes from: `relevant(to:)` without those that newer ones
    /// cover wherever they meet `shard` (an old layout's entry kept for the owners of another shard that has not
    /// run yet). Each owner's newest entry stays the same, so the windows read and which filter takes which do
    /// not change; a check of the zone or a count of the windows then sees only what the run uses.
    public func inUse(by shard: Shard) -> Coverage {
        var used: [CoverageEntry] = []
        for entry in relevant(to: shard).entries {
            // The owners of both: one residue class of the counts' least common multiple (beyond 2^20, kept).
            guard let meeting = entry.shard.meeting(shard) else {
                used.append(entry)
                continue
            }
            if !Self.covers(used.map(\.shard), index: meeting.index, count: meeting.count) { used.append(entry) }
        }
        return Coverage(entries: used)
    }

    /// The entries the owners `owners` take their changes from: each owner's newest entry, once each, in the
    /// entries' order (a backfill of some filters is held only to their owners' zones).
    public func inUse(byOwners owners: Set<Int64>) -> Coverage {
        let used = Set(owners.compactMap { entryIndex(forOwner: $0) })
        return Coverage(entries: entries.indices.filter { used.contains($0) }.map { entries[$0] })
    }

    /// The coverage after `entry` succeeded: `entry` added, and every entry that newer ones (`entry` among
    /// them when its mark is not older) cover wholly dropped, so the list stays as short as the layouts in use.
    /// A run that finishes after runs that started later (a long unsharded run beside the shards' timer, an
    /// interrupted run completed late) leaves their newer entries in place: its older mark is newest only
    /// for the owners no newer entry covers.
    public func recording(_ entry: CoverageEntry) -> Coverage {
        var kept: [CoverageEntry] = []
        for old in Coverage(entries: entries.filter { $0.shard != entry.shard }).entries {
            let newer = ([entry] + kept).filter { $0.takenAt >= old.takenAt }
            if !Self.covers(newer.map(\.shard), wholly: old.shard) { kept.append(old) }
        }
        return Coverage(entries: [entry] + kept)
    }

    /// The coverage after an operator's reset of `shard` to `time` (`matcher progress reset`, after a restore
    /// or a failover left recorded snapshots ahead of the database): one entry for `shard` whose mark is
    /// `ChangeMark.resetTo(time)`, newest (`takenAt`), replacing every entry inside `shard`. An entry of
    /// another layout that overlaps `shard` without lying inside it also covers owners outside `shard`, so it
    /// is kept; when its mark is in `ahead` (it would find no change and keep the run refusing) its mark
    /// becomes the same reset. Changes recorded at or after `time` count as new for the owners reset.
    public func resetting(_ shard: Shard, to time: Timestamp, takenAt: Timestamp, ahead: Set<ChangeMark>) -> Coverage {
        let reset = ChangeMark.resetTo(time)
        let zone = relevant(to: shard).entries.lazy.compactMap(\.timeZone).first
        let kept = entries.filter { !shard.contains($0.shard) }.map { entry in
            guard entry.shard.intersects(shard), ahead.contains(entry.mark) else { return entry }
            return CoverageEntry(shard: entry.shard, mark: reset, takenAt: entry.takenAt, timeZone: entry.timeZone)
        }
        return Coverage(entries: kept).recording(
            CoverageEntry(shard: shard, mark: reset, takenAt: takenAt, timeZone: zone))
    }

    /// Whether the union of `shards` contains every owner of `target`. Exact when the least common
    /// multiple of the counts is at most 2^20; beyond that it answers false (the entry is kept, which
    /// costs a row, never a change).
    static func covers(_ shards: [Shard], wholly target: Shard) -> Bool {
        if shards.contains(where: { $0.contains(target) }) { return true }
        return covers(shards, index: target.index, count: target.count)
    }

    /// `covers(_:wholly:)` for the owners `index` mod `count` (a residue class that need not be a shard's).
    static func covers(_ shards: [Shard], index: Int, count: Int) -> Bool {
        var modulus = count
        for shard in shards {
            modulus = lcm(modulus, shard.count)
            if modulus > 1 << 20 { return false }
        }
        var residue = index
        while residue < modulus {
            let owner = Int64(residue)
            if !shards.contains(where: { $0.owns(ownerId: owner) }) { return false }
            residue += count
        }
        return true
    }

    fileprivate static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
    fileprivate static func lcm(_ a: Int, _ b: Int) -> Int { a / gcd(a, b) * b }
}

extension Shard {
    /// The owners in both shards, as one residue class of the least common multiple of the counts (it may be
    /// larger than a shard count); nil when they share no owner, or when that multiple is beyond 2^20 (then
    /// callers keep what they would have checked).
    func meeting(_ other: Shard) -> (index: Int, count: Int)? {
        guard intersects(other) else { return nil }
        let lcm = Coverage.lcm(count, other.count)  // at most 32,767^2: no overflow
        guard lcm <= 1 << 20 else { return nil }
        var residue = index
        while residue % other.count != other.index { residue += count }  // at most other.count / gcd steps
        return (residue, lcm)
    }

    /// Whether some owner belongs to both shards: `K ≡ K' (mod gcd(N, N'))`.
    public func intersects(_ other: Shard) -> Bool {
        let gcd = Coverage.gcd(count, other.count)
        return index % gcd == other.index % gcd
    }

    /// Whether every owner of `other` belongs to this shard: N divides N' and `K' mod N = K`.
    public func contains(_ other: Shard) -> Bool {
        other.count % count == 0 && other.index % count == index
    }
}

extension Shard: Codable {
    private enum CodingKeys: String, CodingKey { case index, count }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let index = try container.decode(Int.self, forKey: .index)
        let count = try container.decode(Int.self, forKey: .count)
        do {
            try self.init(index: index, count: count)
        } catch {
            throw DecodingError.dataCorruptedError(forKey: .count, in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(index, forKey: .index)
        try container.encode(count, forKey: .count)
    }
}
