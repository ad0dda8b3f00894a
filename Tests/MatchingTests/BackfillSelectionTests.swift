import Chronology
import Foundation
import Matching
import MatchingTestSupport
import Testing

/// A backfill's selection names what is there (review of session 29): a mistyped, deleted or other shard's
/// filter id, an owner without filters, or a window of changes that starts after the clock is refused with a
/// line naming each, exit 64, and nothing is written (before, it "succeeded" with nothing done).
@Suite struct BackfillSelectionTests {
    /// Owner 1 (a man) with filter 100, owner 2 (a man) with filter 201, deleted filter 300 of owner 1; women 10-12.
    private func store() -> InMemoryStore {
        let store = InMemoryStore(now: World.day1)
        store.save([
            World.profile(1, gender: 1), World.profile(2, gender: 1), World.profile(3, gender: 1),
            World.profile(10), World.profile(11), World.profile(12),
        ])
        store.save([
            World.filter(100, owner: 1), World.filter(201, owner: 2), World.filter(300, owner: 1, deleted: true),
        ])
        return store
    }

    private func backfill(_ store: InMemoryStore, _ input: Matching.Backfill.Input) throws -> RunSummary {
        try Matching.Backfill(MatchingRepositories(store: store)).execute(input)
    }

    @Test func filterIdsThatAreNotThereAreNamedAndNothingIsWritten() throws {
        let store = store()
        let shard = try Shard(index: 1, count: 2)
        let refused = try #require(
            throws: Matching.Backfill.SelectionRefused.self,
            performing: {
                try backfill(store, .init(filters: .ids([100, 4222, 300, 201]), now: World.day1, shard: shard))
            })
        #expect(refused.failureKind == .usage)
        #expect(
            refused.problems == [
                "--filter 201: its owner 2 is not in shard 1/2 (owner_id mod 2 is not 1)",
                "--filter 300: the filter is deleted",
                "--filter 4222: no saved filter has this id",
            ])
        #expect(refused.description.hasPrefix("backfill refused, nothing written: --filter 201"))
        #expect(store.allRuns.isEmpty)
        #expect(World.pairs(store).isEmpty)

        let done = try backfill(store, .init(filters: .ids([100]), now: World.day1, shard: shard))
        #expect(done.counters.matchesWritten == 3)
    }

    @Test func ownersWithoutFiltersInTheShardAreNamed() throws {
        let store = store()
        let refused = try #require(
            throws: Matching.Backfill.SelectionRefused.self,
            performing: { try backfill(store, .init(filters: .owners([1, 3]), now: World.day1)) })
        #expect(refused.problems == ["--owner 3: owns no saved filter (not deleted)"])
        let shard = try Shard(index: 1, count: 2)
        let otherShard = try #require(
            throws: Matching.Backfill.SelectionRefused.self,
            performing: { try backfill(store, .init(filters: .owners([1, 2]), now: World.day1, shard: shard)) })
        #expect(otherShard.problems == ["--owner 2: is not in shard 1/2 (owner_id mod 2 is not 1)"])
        #expect(store.allRuns.isEmpty)
        let done = try backfill(store, .init(filters: .owners([1, 2]), now: World.day1))
        #expect(done.counters.matchesWritten == 6)
    }

    @Test func aWindowStartingAtOrAfterTheClockIsRefused() throws {
        let store = store()
        let refused = try #require(
            throws: Matching.Backfill.SelectionRefused.self,
            performing: {
                try backfill(store, .init(profiles: .changed(from: World.day2, to: nil), now: World.day1))
            })
        #expect(
            refused.problems == [
                "--changed-since \(World.day2.iso8601) is not before the backfill's clock \(World.day1.iso8601):"
                    + " the window holds no change"
            ])
        #expect(store.allRuns.isEmpty)
        let dryRun = #expect(throws: Matching.Backfill.SelectionRefused.self) {
            try backfill(store, .init(profiles: .changed(from: World.day1, to: nil), now: World.day1, dryRun: true))
        }
        #expect(dryRun != nil)
    }
}
