import PostgresClient
import PostgresTestSupport
import Testing

@testable import matcher

/// The session every connection of the command line opens with (`Database`).
@Suite struct DatabaseSessionTests {
    /// JIT off (the worker's statements are many and small: compiling one costs more than it saves), the
    /// statement timeout and the idle-in-transaction deadline as configured, and the process's name.
    @Test func connectionsOpenWithTheWorkersSessionSettings() throws {
        let database = try TestDatabase.create()
        let options = try DatabaseOptions.parse([
            "--database-url", database.conninfo, "--statement-timeout", "45", "--network-timeout", "20",
        ])
        let connection = try Database(options, applicationName: "matcher run 1/2").connect()
        defer { connection.close() }
        let row = try connection.query(
            """
            SELECT current_setting('jit'), current_setting('statement_timeout'),
                   current_setting('idle_in_transaction_session_timeout'), current_setting('application_name')
            """
        ).rows[0]
        let jit = try row.string(0), statementTimeout = try row.string(1)
        let idleTimeout = try row.string(2), name = try row.string(3)
        #expect(jit == "off")
        #expect(statementTimeout == "45s")
        #expect(idleTimeout == "50s")
        #expect(name == "matcher run 1/2")
    }
}
