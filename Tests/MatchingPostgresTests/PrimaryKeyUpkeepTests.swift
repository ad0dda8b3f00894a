import Foundation
import Matching
import MatchingPostgres
import PostgresClient
import PostgresTestSupport
import Testing

/// `matcher reindex`: filter_matches' primary key measured against its packed size, rebuilt when it has
/// grown past it, without losing a row, and what an interrupted rebuild leaves dropped first.
@Suite struct PrimaryKeyUpkeepTests {
    private func count(_ connection: PostgresConnection, _ sql: String) throws -> Int64 {
        try connection.query(sql).rows[0].int64(0)
    }

    /// 2,000 filters x 100 profiles, recorded as runs would over days: then all but the pairs of every
    /// tenth profile forgotten and vacuumed, as the retention sweep and autovacuum leave a key at the bound.
    private func thinnedKey() throws -> (TestDatabase, PostgresConnection) {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        try connection.execute(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at)
            SELECT f, p, timestamptz '2026-03-01 03:00Z' + (p % 7) * interval '1 day'
            FROM generate_series(1, 100) p, generate_series(1, 2000) f ORDER BY p, f
            """)
        try connection.execute("DELETE FROM filter_matches WHERE profile_id % 10 <> 0")
        try connection.execute("VACUUM ANALYZE filter_matches")  // not in a transaction block
        return (database, connection)
    }

    @Test func theEstimateIsWhatPostgreSQLBuilds() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try connection.execute(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at)
            SELECT f, p, timestamptz '2026-03-01 03:00Z' FROM generate_series(1, 500) f, generate_series(1, 600) p;
            REINDEX INDEX filter_matches_pkey;
            ANALYZE filter_matches
            """)
        let size = try #require(try PrimaryKeyUpkeep(connection: connection).size())
        #expect(size.entries == 300_000)
        #expect(abs(size.ratio - 1) < 0.02, "a fresh build is \(size.bytes) bytes, the estimate \(size.packedBytes)")
        #expect(PrimaryKeySize.packedBytes(entries: 0) == 8192)
    }

    @Test func aThinnedKeyIsRebuiltPackedWithEveryRow() throws {
        let (database, connection) = try thinnedKey()
        defer { connection.close() }
        let rows = try count(connection, "SELECT count(*) FROM filter_matches")
        let checksum = try connection.query(
            "SELECT md5(string_agg(filter_id || ':' || profile_id, ',' ORDER BY filter_id, profile_id)) FROM filter_matches"
        ).rows[0].string(0)
        let upkeep = PrimaryKeyUpkeep(connection: connection)
        let before = try #require(try upkeep.size())
        #expect(before.ratio > 5, "the thinned key is \(before.ratio)x its packed size")

        let outcome = try upkeep.rebuild(minimumRatio: 2)
        let after = try #require(outcome.after)
        #expect(outcome.before == before)
        #expect(after.bytes < before.bytes / 3)
        // Built at fillfactor 70 (room for the next days' inserts), so 90/70 of a default build.
        #expect(after.ratio > 1.2 && after.ratio < 1.35, "rebuilt at \(after.ratio)x a default build")
        let options = try connection.query(
            "SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class WHERE relname = 'filter_matches_pkey'"
        ).rows[0].string(0)
        #expect(options.isEmpty, "the rebuild's fillfactor is reset afterwards: \(options)")
        #expect(outcome.droppedLeftovers.isEmpty)
        // Still the valid primary key, under its own name, and every pair is there.
        let index = try connection.query(
            """
            SELECT x.indisprimary, x.indisvalid, x.indisunique FROM pg_index x
            WHERE x.indexrelid = to_regclass('filter_matches_pkey')
            """
        ).rows[0]
        #expect(try index.bool(0) && index.bool(1) && index.bool(2))
        #expect(try count(connection, "SELECT count(*) FROM pg_index WHERE indrelid = 'filter_matches'::regclass") == 2)
        #expect(try count(connection, "SELECT count(*) FROM filter_matches") == rows)
        let checksumAfter = try connection.query(
            "SELECT md5(string_agg(filter_id || ':' || profile_id, ',' ORDER BY filter_id, profile_id)) FROM filter_matches"
        ).rows[0].string(0)
        #expect(checksumAfter == checksum)
        _ = database
    }

    /// Right after a first run nothing has counted the table yet (`reltuples` -1 until autovacuum's ANALYZE): the
    /// key is measured by the rows the statistics saw inserted, not against an empty table, so neither the status
    /// and its alert nor `matcher reindex` take a fresh key for a bloated one.
    @Test func aKeyNoAnalyzeHasCountedYetIsMeasuredByTheRowsInserted() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try connection.execute("ALTER TABLE filter_matches SET (autovacuum_enabled = false)")
        try connection.execute(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at)
            SELECT f, p, timestamptz '2026-03-01 03:00Z' FROM generate_series(1, 200) f, generate_series(1, 500) p
            """)
        _ = try connection.query("SELECT pg_stat_force_next_flush()")
        _ = try connection.query("SELECT 1")  // the flush happens when the session is next idle
        #expect(
            try connection.query("SELECT reltuples::float8 FROM pg_class WHERE relname = 'filter_matches'").rows[0]
                .double(0) < 0)
        let upkeep = PrimaryKeyUpkeep(connection: connection)
        let size = try #require(try upkeep.size())
        #expect(size.entries == 100_000)
        #expect(size.ratio < 2, "\(size.bytes) bytes against \(size.packedBytes) packed")
        let outcome = try upkeep.rebuild(minimumRatio: 2)
        #expect(outcome.after == nil)
        _ = database
    }

    /// A short first run's writers commit within a second, and a backend sends its statistics at most once a
    /// second: the run's own probe right after them read the live rows of the first commit only, and put a fresh
    /// key at tens of times its packed size (review of session 35: `MatcherPrimaryKeyBloated` on a new
    /// installation). A key nothing has counted yet is counted while it is small.
    @Test func aKeyJustWrittenByAnotherSessionIsCountedBeforeItsStatisticsLand() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        let writer = try database.connect()
        defer {
            writer.close()
            connection.close()
        }
        try connection.execute("ALTER TABLE filter_matches SET (autovacuum_enabled = false)")
        // The writer's first commit sends its counts (no earlier send); the next, within the second, waits.
        try writer.execute(
            "INSERT INTO filter_matches (filter_id, profile_id, matched_at) VALUES (1, 1, '2026-03-01 03:00Z')")
        _ = try writer.query("SELECT 1")
        try writer.execute(
            """
            INSERT INTO filter_matches (filter_id, profile_id, matched_at)
            SELECT f, p, timestamptz '2026-03-01 03:00Z' FROM generate_series(2, 201) f, generate_series(1, 300) p
            """)
        let size = try #require(try PrimaryKeyUpkeep(connection: connection).size())
        #expect(size.entries == 60_001)
        #expect(size.ratio < 2, "\(size.bytes) bytes against \(size.packedBytes) packed")
        _ = database
    }

    @Test func aKeyBelowTheRatioIsLeftAsItIs() throws {
        let (database, connection) = try thinnedKey()
        defer { connection.close() }
        let upkeep = PrimaryKeyUpkeep(connection: connection)
        let before = try #require(try upkeep.size())
        let outcome = try upkeep.rebuild(minimumRatio: before.ratio + 1)
        #expect(outcome.after == nil)
        #expect(try upkeep.size() == before)
        _ = database
    }

    /// An invalid index of `filter_matches` named `name`, as an interrupted `REINDEX ... CONCURRENTLY` leaves one: a
    /// unique build on `filter_id` alone fails part way (many pairs a filter).
    static func plantInvalidIndex(_ name: String, on connection: PostgresConnection) throws {
        let failed = Result {
            try connection.execute("CREATE UNIQUE INDEX CONCURRENTLY \(name) ON filter_matches (filter_id)")
        }
        #expect(throws: PostgresError.self) { try failed.get() }
    }

    @Test func whatAnInterruptedRebuildLeftIsDroppedFirst() throws {
        let (database, connection) = try thinnedKey()
        defer { connection.close() }
        // An index build that failed part way leaves an invalid index, as a REINDEX CONCURRENTLY cancelled
        // after its first phase does (under the same name pattern).
        try Self.plantInvalidIndex("filter_matches_pkey_ccnew", on: connection)
        let upkeep = PrimaryKeyUpkeep(connection: connection)
        #expect(try upkeep.leftovers() == ["filter_matches_pkey_ccnew"])
        // `matcher status` names it, since every insert pays for it until it is dropped.
        let status = try PostgresStatusRepository(connection: connection).serviceStatus()
        #expect(status.retention.abandonedRebuilds == ["filter_matches_pkey_ccnew"])

        let outcome = try upkeep.rebuild(minimumRatio: 100)
        #expect(outcome.droppedLeftovers == ["filter_matches_pkey_ccnew"])
        #expect(try upkeep.leftovers().isEmpty)
        #expect(
            try PostgresStatusRepository(connection: connection).serviceStatus().retention.abandonedRebuilds.isEmpty)
        #expect(try count(connection, "SELECT count(*) FROM pg_class WHERE relname = 'filter_matches_pkey_ccnew'") == 0)
        _ = database
    }

    /// Review of session 24: a rebuild interrupted after its swap leaves the old key as `_ccold` (invalid),
    /// which the rebuild did not drop; and one killed before its RESET left the key at fillfactor 70.
    @Test func theOldKeyAnInterruptedSwapLeftIsDroppedAndTheFillfactorReset() throws {
        let (database, connection) = try thinnedKey()
        defer { connection.close() }
        try Self.plantInvalidIndex("filter_matches_pkey_ccold", on: connection)
        try connection.execute("ALTER INDEX filter_matches_pkey SET (fillfactor = 70)")
        let upkeep = PrimaryKeyUpkeep(connection: connection)
        #expect(try upkeep.leftovers() == ["filter_matches_pkey_ccold"])
        let outcome = try upkeep.rebuild(minimumRatio: 100)  // not due: only the upkeep around it
        #expect(outcome.after == nil)
        #expect(outcome.droppedLeftovers == ["filter_matches_pkey_ccold"])
        #expect(try count(connection, "SELECT count(*) FROM pg_class WHERE relname = 'filter_matches_pkey_ccold'") == 0)
        let options = try connection.query(
            "SELECT reloptions IS NULL FROM pg_class WHERE relname = 'filter_matches_pkey'"
        ).rows[0].bool(0)
        #expect(options, "fillfactor reset")
        _ = database
    }

    @Test func oneRebuildAtATime() throws {
        let (database, connection) = try thinnedKey()
        defer { connection.close() }
        let other = try database.connect()
        defer { other.close() }
        _ = try other.query("SELECT pg_advisory_lock($1, $2)", PrimaryKeyUpkeep.lock)
        #expect(throws: PrimaryKeyUpkeep.Busy.self) {
            try PrimaryKeyUpkeep(connection: connection).rebuild(minimumRatio: 1)
        }
        try other.execute("SELECT pg_advisory_unlock_all()")
        #expect(try PrimaryKeyUpkeep(connection: connection).rebuild(minimumRatio: 1).after != nil)
    }

    /// The worker's role may not rebuild: a configuration error (exit 78) that says whose credentials it needs.
    @Test func theWorkersRoleIsToldToUseTheOwners() throws {
        let (database, connection) = try thinnedKey()
        defer { connection.close() }
        let role = "pk_upkeep_\(UInt32.random(in: 0...UInt32.max))"
        try connection.execute("CREATE ROLE \(role) LOGIN")
        defer { _ = try? connection.execute("DROP OWNED BY \(role); DROP ROLE \(role)") }
        try connection.execute("GRANT SELECT ON filter_matches TO \(role)")
        let worker = try PostgresConnection(
            try PostgresConnection.conninfo(database.conninfo, overriding: ["user": role]))
        defer { worker.close() }
        #expect(throws: PrimaryKeyUpkeep.NotOwner.self) {
            try PrimaryKeyUpkeep(connection: worker).rebuild(minimumRatio: 1)
        }
        // Also when no rebuild is due (the weekly timer's usual week): refused at once, not passed.
        #expect(throws: PrimaryKeyUpkeep.NotOwner.self) {
            try PrimaryKeyUpkeep(connection: worker).rebuild(minimumRatio: 100)
        }
        let refused = try MatcherProcess.run(
            ["reindex"], database: try PostgresConnection.conninfo(database.conninfo, overriding: ["user": role]))
        #expect(refused.status == 78)
        #expect(refused.stderr.contains("needs the owner of filter_matches"), "\(refused.stderr)")
    }

    /// The command as a timer runs it: exit 0, a report scripts can read; a usage error for a ratio below 1.
    @Test func theCommand() throws {
        let (database, connection) = try thinnedKey()
        defer { connection.close() }
        // `matcher status` shows the key against its packed size, which is what the operator decides on.
        let status = try MatcherProcess.run(["status", "--format", "json"], database: database.conninfo)
        #expect(status.status == 0, "\(status.stderr)")
        let statusJSON = try #require(
            try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        let retention = try #require(statusJSON["retention"] as? [String: Any])
        let bytes = try #require(retention["primary_key_bytes"] as? Int)
        let packed = try #require(retention["primary_key_packed_bytes"] as? Int)
        #expect(bytes > 2 * packed)

        let rebuilt = try MatcherProcess.run(["reindex", "--format", "json"], database: database.conninfo)
        #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(rebuilt.stdout.utf8)) as? [String: Any])
        let key = try #require(report["primary_key"] as? [String: Any])
        #expect(key["rebuilt"] as? Bool == true)
        let again = try MatcherProcess.run(["reindex"], database: database.conninfo)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("left as it is"))
        let usage = try MatcherProcess.run(["reindex", "--min-ratio", "0.5"], database: database.conninfo)
        #expect(usage.status == 64)
    }
}
