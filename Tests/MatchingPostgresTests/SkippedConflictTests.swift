import Chronology
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
