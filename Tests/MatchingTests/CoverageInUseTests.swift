import Chronology
import Testing

@testable import Matching

/// Which coverage entries a shard's owners take their changes from (`Coverage.inUse(by:)`).
@Suite struct CoverageInUseTests {
    static func entry(_ index: Int, _ count: Int, day: Int64) throws -> CoverageEntry {
        CoverageEntry(
            shard: try Shard(index: index, count: count), mark: ChangeMark("\(day)"),
            takenAt: Timestamp(microsecondsSinceEpoch: day * Timestamp.microsecondsPerDay), timeZone: "UTC")
    }

    /// An old layout's entry kept for another shard is not in use by a shard whose owners a newer entry covers.
    @Test func anEntryNewerOnesCoverWhereTheyMeetTheShardIsNotInUse() throws {
        let coverage = Coverage(entries: [try Self.entry(1, 8, day: 2), try Self.entry(1, 4, day: 1)])
        #expect(coverage.inUse(by: try Shard(index: 1, count: 8)).entries.map(\.shard.description) == ["1/8"])
        #expect(coverage.inUse(by: try Shard(index: 5, count: 8)).entries.map(\.shard.description) == ["1/4"])
        #expect(coverage.inUse(by: .all).entries.count == 2)
    }

    /// Counts whose least common multiple is beyond a shard count (999 and 1000): the newer entry covers only
    /// part of the shard's owners, so both stay (review of session 23: a meeting that could not be made a shard
    /// dropped the entry, and its owners would have been shown every profile).
    @Test func countsWhoseMultipleIsBeyondAShardCountKeepWhatIsInUse() throws {
        let coverage = Coverage(entries: [try Self.entry(0, 999, day: 2), try Self.entry(0, 1_000, day: 1)])
        let used = coverage.inUse(by: try Shard(index: 0, count: 1_000))
        #expect(used.entries.map(\.shard.description) == ["0/999", "0/1000"])
        // The other way round the newer entry covers the shard wholly.
        let reversed = Coverage(entries: [try Self.entry(0, 1_000, day: 2), try Self.entry(0, 999, day: 1)])
        #expect(reversed.inUse(by: try Shard(index: 0, count: 1_000)).entries.map(\.shard.description) == ["0/1000"])
        // Each owner's newest entry is the same with or without the entries not in use.
        for owner in Int64(0)..<5_000 where owner % 1_000 == 0 {
            let all = coverage.relevant(to: try Shard(index: 0, count: 1_000))
            let inAll = try #require(all.entryIndex(forOwner: owner), "owner \(owner)")
            let inUse = try #require(used.entryIndex(forOwner: owner), "owner \(owner)")
            #expect(all.entries[inAll] == used.entries[inUse])
        }
    }
}
