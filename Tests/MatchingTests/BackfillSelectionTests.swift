import Chronology
import Foundation
import MatchingTestSupport
import Testing

@testable import Matching

/// A backfill's selection names what is there (review of session 29): a filter id no filter has, an owner id
/// no profile has, a list that leaves the shard nothing to do, or a window of changes that starts after the
/// clock is refused with a line naming each, exit 64, and nothing is written (before, it "succeeded" with
/// nothing done); a deleted or another shard's filter in a list with work here is skipped, and said.
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

    private func backfill(
        _ store: InMemoryStore, _ input: Matching.Backfill.Input, output: any RunOutputHandler = SilentRunOutput()
    ) throws -> RunSummary {
        try Matching.Backfill(MatchingRepositories(store: store), output: output).execute(input)
    }

    /// The refusal of a backfill with `input`.
    private func refusal(
        _ store: InMemoryStore, _ input: Matching.Backfill.Input
    ) throws -> Matching.Backfill.SelectionRefused {
        try #require(throws: Matching.Backfill.SelectionRefused.self) { try backfill(store, input) }
    }

    private func skipped(_ output: RecordingRunOutput) -> [[String]] {
        output.events.compactMap { event in
            if case .selectionSkipped(let skipped) = event { return skipped }
            return nil
        }
    }

    @Test func aFilterIdNoFilterHasIsRefusedAndNothingIsWritten() throws {
        let store = store()
        let shard = try Shard(index: 1, count: 2)  // owner 1's
        let refused = try refusal(
            store, .init(filters: .ids([100, 4222, 300, 201, 300]), now: World.day1, shard: shard))
        #expect(refused.failureKind == .usage)
        // 300 (deleted) and 201 (shard 0/2's part of the list) alone would only be skipped: this shard has 100.
        #expect(refused.problems == ["--filter 4222: no saved filter has this id"])
        #expect(refused.description == "backfill refused, nothing written: --filter 4222: no saved filter has this id")
        #expect(store.allRuns.isEmpty)
        #expect(World.pairs(store).isEmpty)
    }

    @Test func aDeletedOrAnotherShardsFilterIsSkippedWhileTheListHasWorkHere() throws {
        let store = store()
        let shard = try Shard(index: 1, count: 2)
        let output = RecordingRunOutput()
        let mine = try backfill(
            store, .init(filters: .ids([100, 201, 300]), now: World.day1, shard: shard), output: output)
        #expect(mine.counters.matchesWritten == 3)
        #expect(
            skipped(output) == [
                [
                    "--filter 201: its owner 2 is in shard 0/2, not 1/2",
                    "--filter 300: the filter is deleted",
                ]
            ])
        // The same list on the other shard: its part.
        let theirs = try backfill(
            store, .init(filters: .ids([100, 201, 300]), now: World.day1, shard: try Shard(index: 0, count: 2)))
        #expect(theirs.counters.matchesWritten == 3)

        // Nothing of the list here: refused, each named.
        let refused = try refusal(store, .init(filters: .ids([201, 300]), now: World.day2, shard: shard))
        #expect(
            refused.problems == [
                "--filter 201: its owner 2 is in shard 0/2, not 1/2", "--filter 300: the filter is deleted",
            ])
    }

    @Test func ownersAreRefusedWhenNoProfileHasTheIdOrNoneHasWorkHere() throws {
        let store = store()
        let typo = try refusal(store, .init(filters: .owners([1, 99]), now: World.day1))
        #expect(typo.problems == ["--owner 99: no profile has this id"])
        let none = try refusal(store, .init(filters: .owners([3]), now: World.day1))
        #expect(none.problems == ["--owner 3: owns no saved filter (not deleted)"])
        let shard = try Shard(index: 1, count: 2)
        let otherShard = try refusal(store, .init(filters: .owners([2]), now: World.day1, shard: shard))
        #expect(otherShard.problems == ["--owner 2: is in shard 0/2, not 1/2"])
        #expect(store.allRuns.isEmpty)

        let output = RecordingRunOutput()
        let part = try backfill(
            store, .init(filters: .owners([1, 2, 3]), now: World.day1, shard: shard), output: output)
        #expect(part.counters.matchesWritten == 3)
        #expect(
            skipped(output) == [
                ["--owner 2: is in shard 0/2, not 1/2", "--owner 3: owns no saved filter (not deleted)"]
            ])
    }

    @Test func aWindowStartingAtOrAfterTheClockIsRefused() throws {
        let store = store()
        let refused = try refusal(store, .init(profiles: .changed(from: World.day2, to: nil), now: World.day1))
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
        // With its end given too (found by review in session 32: only an open window was refused).
        let closed = try refusal(
            store, .init(profiles: .changed(from: World.day2, to: World.day2.adding(days: 1)), now: World.day1))
        #expect(closed.problems.first?.hasPrefix("--changed-since \(World.day2.iso8601) is not before") == true)
        #expect(store.allRuns.isEmpty)
    }

    /// An infinite `updated_at` counts as NULL (runs.md): in no window, an open one included, in both stores (found
    /// by review in session 32: PostgreSQL's open start, `-infinity`, took a `-infinity` in).
    @Test func aProfileUpdatedAtAnInfiniteTimeIsInNoWindow() throws {
        let store = store()
        store.save([World.profile(13)], updatedAt: Timestamp(microsecondsSinceEpoch: .min))
        store.save([World.profile(14)], updatedAt: Timestamp(microsecondsSinceEpoch: .max))
        let window = try backfill(store, .init(profiles: .changed(from: nil, to: World.day2), now: World.day2))
        #expect(window.counters.candidates == 6)  // the store's six, saved at its clock's day; not 13 nor 14
        #expect(store.allMatches.map(\.pair.profileId).allSatisfy { $0 != 13 && $0 != 14 })
    }

    /// Review of session 37: an interrupted backfill resumed by one given another `--now` and `--max-per-filter`
    /// kept its own, as decided, and said only "resuming": the operator was not told the flags were not used.
    /// Now a warning names each with what the backfill keeps; the same settings say nothing. (A default, such as
    /// `--max-per-filter`'s 100, cannot be told from a value given: the warning says "this backfill's".)
    @Test func aResumedBackfillSaysWhichGivenSettingsItDoesNotUse() throws {
        let store = store()
        store.failCommit(after: 0)
        let first = Matching.Backfill.Input(now: World.day1, maxPerFilter: 2, retentionDays: 30)
        #expect(throws: InMemoryCommitFailure.self) { try backfill(store, first) }
        func notUsed(_ input: Matching.Backfill.Input) throws -> [[String]] {
            let output = RecordingRunOutput()
            let summary = try backfill(store, input, output: output)
            #expect(summary.resumedRunId != nil)
            return output.events.compactMap { event in
                if case .resumedWithItsOwnSettings(_, let notUsed) = event { return notUsed }
                return nil
            }
        }
        let later = World.day1.adding(days: 1)
        let interrupted = try #require(store.allRuns.last)
        let given = Matching.Backfill.Input(now: later, maxPerFilter: 50, retentionDays: 7)
        #expect(
            Matching.Backfill.settingsNotUsed(given, resuming: interrupted) == [
                "--now: it keeps \(World.day1.iso8601), not this backfill's \(later.iso8601)",
                "--max-per-filter: it keeps 2, not this backfill's 50",
                "--retention-days: it keeps 30, not this backfill's 7",
            ])
        #expect(Matching.Backfill.settingsNotUsed(first, resuming: interrupted).isEmpty)
        #expect(try notUsed(given).count == 1)
        #expect(try #require(store.allRuns.last).status == .succeeded)
    }
}
