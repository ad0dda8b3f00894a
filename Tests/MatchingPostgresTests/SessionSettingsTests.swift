import Chronology
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Testing

/// What a role's or database's settings cannot change in the worker's work (review of session 33).
@Suite struct SessionSettingsTests {
    /// Row-level security enabled on an app table the worker must read whole: with a policy showing its role no
    /// block, the run recorded the blocked pair and succeeded. Its sessions turn row_security off, so the read
    /// fails (exit 78, naming row-level security) until the role bypasses it; then the block holds.
    @Test func rowLevelSecurityOnTheAppsTablesFailsTheRunInsteadOfHidingRows() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        try ScenarioWorld.ownerAndTwoWomen(connection).copyBlocks([Block(blockerId: 11, blockedId: 1)])
        let role = "rls_worker_\(database.name.suffix(12))"
        try connection.execute("CREATE ROLE \"\(role)\" LOGIN")
        defer { ChangeCaptureSecurityTests.dropDatabaseAndRole(database, role) }
        try OperatorScenarioTests.applyWorkerRole(database, role: role)
        try connection.execute(
            "ALTER TABLE blocks ENABLE ROW LEVEL SECURITY; CREATE POLICY none ON blocks USING (false)")
        let worker = try PostgresConnection.conninfo(database.conninfo, overriding: ["user": role])
        func pairs() throws -> [Int64] {
            try connection.query("SELECT profile_id FROM filter_matches ORDER BY profile_id").rows.map {
                try $0.int64(0)
            }
        }

        let refused = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: worker)
        #expect(refused.status == 78, "\(refused.stderr)")
        #expect(refused.stderr.contains("row-level security"), "\(refused.stderr)")
        #expect(try pairs() == [])

        try connection.execute("ALTER ROLE \"\(role)\" BYPASSRLS")
        let ran = try MatcherProcess.run(["run", "--now", "2026-03-02T03:00:00Z"], database: worker)
        #expect(ran.status == 0, "\(ran.stderr)")
        #expect(try pairs() == [10])
    }

    /// A unit commits durably under a role's or database's `synchronous_commit = off` (a digest visible to the push
    /// sender before it is on disk could be lost in a crash and sent again by the next run): `local`. Every other
    /// value flushes locally and stays (whether a unit waits for a standby is the DBA's), and the session's own
    /// setting outside the unit is untouched.
    @Test(arguments: [("off", "local"), ("local", "local"), ("on", "on"), ("remote_write", "remote_write")])
    func aUnitCommitsDurablyWhateverTheDatabasesSetting(setting: String, inUnit: String) throws {
        let database = try MigratedDatabase.create()
        let admin = try database.connect()
        defer { admin.close() }
        let name = try admin.query("SELECT current_database()::text").rows[0].string(0)
        let alter = try admin.query(
            "SELECT format('ALTER DATABASE %I SET synchronous_commit = %L', $1::text, $2::text)",
            [.text(name), .text(setting)]
        ).rows[0].string(0)
        try admin.execute(alter)
        let connection = try database.connect()
        defer { connection.close() }
        let store = PostgresMatchingStore(connection: connection) { try database.connect() }
        let seen = try store.withUnitTransaction { _ in
            try connection.query("SELECT current_setting('synchronous_commit')").rows[0].string(0)
        }
        #expect(seen == inUnit)
        #expect(try connection.query("SELECT current_setting('synchronous_commit')").rows[0].string(0) == setting)
    }
}
