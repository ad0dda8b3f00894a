import Chronology
import Matching
import MatchingTestSupport
import Testing

/// The in-memory twin of `BoundedBookkeepingTests.theStateOfASoftDeletedFilterIsForgotten`: the notification state
/// of a filter the app soft-deletes goes with the routine run's sweep, as in PostgreSQL.
@Suite struct InMemoryBookkeepingTests {
    @Test func theStateOfASoftDeletedFilterIsForgotten() throws {
        let store = InMemoryStore(now: World.day1)
        store.save([World.profile(1, gender: 1), World.profile(2, gender: 1), World.profile(10)])
        store.save([World.filter(100, owner: 1), World.filter(200, owner: 2)])
        _ = try World.run(store)
        #expect(try store.lastNotified(filterIds: [100, 200]).count == 2)
        store.save([World.filter(200, owner: 2, deleted: true)])
        let later = World.day1.adding(days: 12)
        store.setClock(later)
        _ = try RunMatching(MatchingRepositories(store: store)).execute(.init(now: later, retentionDays: 7))
        #expect(try store.lastNotified(filterIds: [100, 200]).keys.sorted() == [100])
    }
}
