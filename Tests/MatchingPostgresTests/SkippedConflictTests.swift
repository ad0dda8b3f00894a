import Chronology
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Testing

/// Review of session 29: while the primary key is rebuilt (`REINDEX INDEX CONCURRENTLY`), the insert that skips
/// recorded pairs may still fail with a unique violation (PostgreSQL checks the conflict against the valid key
/// only). It is a write conflict, so the unit is written again, not a failed run. A second unique index stands in
/// for the copy being built: the violation comes from an index that is not the conflict's arbiter, as there.
@Suite struct SkippedConflictTests {
    @Test func aUniqueViolationWhileSkippingRecordedPairsIsAWriteConflict() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try connection.execute("CREATE UNIQUE INDEX one_filter_a_profile ON filter_matches (profile_id)")
        let store = PostgresMatchingStore(connection: connection) { try database.connect() }
        func insert(_ pairs: [MatchPair]) throws -> [MatchPair] {
            try store.withUnitTransaction { tx in
                try tx.insertMatchesSkippingRecorded(
                    pairs.map { NewMatch(pair: $0) }, at: ScenarioWorld.day1, runId: 1, bulk: false)
            }
        }
        #expect(try insert([MatchPair(filterId: 1, profileId: 10)]).count == 1)
        // The recorded pair itself is skipped, as always.
        #expect(try insert([MatchPair(filterId: 1, profileId: 10)]).isEmpty)
        // Another pair that violates the other index: a write conflict, retried by the unit writer.
        var caught: (any Error)?
        do {
            _ = try insert([MatchPair(filterId: 2, profileId: 10)])
        } catch {
            caught = error
        }
        let classified = try #require(caught as? any ClassifiedError)
        #expect(classified.isWriteConflict)
        #expect(String(describing: classified).contains("while skipping recorded pairs"))
        #expect(try connection.query("SELECT count(*) FROM filter_matches").rows[0].int64(0) == 1)
    }
}

/// Session 29: a unit waits for its turn inside its open transaction. A circle through another writer's row
/// lock and that turn (unit i waits for a pair a backfill holds; the backfill's unit waits for a pair unit i + 1
/// holds; unit i + 1 waits for unit i's turn) was invisible to PostgreSQL and lasted until a 60 s lock timeout,
/// sometimes twice (`scripts/fault-scenarios` 6c: 125 s). The turn's wait is now a lock wait on the earlier
/// unit's key (`awaitUnit`), so the server finds the circle as a deadlock and one side writes again.
@Suite struct VisibleTurnTests {
    @Test func aCircleThroughAUnitsTurnIsFoundAsADeadlock() throws {
        let database = try MigratedDatabase.create()
        let first = try database.connect()
        let second = try database.connect()
        defer {
            first.close()
            second.close()
        }
        let unit = PostgresMatchingStore(connection: first, writeConnections: 1) { try database.connect() }
        let other = PostgresMatchingStore(connection: second, writeConnections: 1) { try database.connect() }
        let key: Int64 = 42 << 24
        let pair = NewMatch(pair: MatchPair(filterId: 1, profileId: 10))
        let otherHoldsThePair = DispatchSemaphore(value: 0)
        let unitIsBlocked = DispatchSemaphore(value: 0)
        let started = Date()
        let results = ResultBox()
        let thread = Thread {
            // The earlier unit: its key, then the pair the other writer holds.
            do {
                try unit.withUnitTransaction { tx in
                    try tx.holdUnit(key)
                    otherHoldsThePair.wait()
                    unitIsBlocked.signal()
                    _ = try tx.insertMatchesSkippingRecorded([pair], at: ScenarioWorld.day1, runId: 1, bulk: false)
                }
                results.set(unit: nil)
            } catch {
                results.set(unit: error)
            }
        }
        thread.start()
        var otherError: (any Error)?
        do {
            try other.withUnitTransaction { tx in
                _ = try tx.insertMatchesSkippingRecorded([pair], at: ScenarioWorld.day1, runId: 2, bulk: false)
                otherHoldsThePair.signal()
                unitIsBlocked.wait()
                Thread.sleep(forTimeInterval: 0.3)  // the unit's insert now waits for this transaction
                // The later unit's turn: wait for the earlier one, where the server sees it.
                var waits = 0
                while waits < 10, results.unitDone == false {
                    try tx.awaitUnit(key)
                    waits += 1
                }
            }
        } catch {
            otherError = error
        }
        while results.unitDone == false { Thread.sleep(forTimeInterval: 0.01) }
        let errors = [otherError, results.unitError].compactMap { $0 }
        #expect(errors.count == 1, "\(errors)")
        let conflict = try #require(errors.first as? any ClassifiedError)
        #expect(conflict.isWriteConflict, "\(conflict)")
        #expect(String(describing: conflict).contains("40P01"), "\(conflict)")
        #expect(Date().timeIntervalSince(started) < 10)
    }

    final class ResultBox: @unchecked Sendable {
        private let lock = NSLock()
        private var done = false
        private var error: (any Error)?
        func set(unit error: (any Error)?) {
            lock.withLock {
                self.error = error
                done = true
            }
        }
        var unitDone: Bool { lock.withLock { done } }
        var unitError: (any Error)? { lock.withLock { error } }
    }
}
