import ArgumentParser
import Foundation
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
        // The server's keepalives too (this test's server has only a Unix socket, where they read 0, so the
        // session above shows only that the server takes them): a session whose host died must not keep the
        // run's lock for the kernel's two hours.
        let settings = try Database(options).sessionOptions
        for setting in [
            "tcp_keepalives_idle=30", "tcp_keepalives_interval=10", "tcp_keepalives_count=3", "tcp_user_timeout=60000",
        ] {
            #expect(settings.contains("-c \(setting)"), "\(settings)")
        }
    }

    /// Review of session 33: settings a role or database may carry that the worker's sessions do not take: row-level
    /// security on (reads that hide rows), backslash escapes in plain literals, an idle-session timeout that ended a
    /// connection the run left idle through a phase.
    @Test func theDatabasesSettingsDoNotReachTheWorkersSessions() throws {
        let database = try TestDatabase.create()
        let admin = try PostgresConnection(database.conninfo)
        defer { admin.close() }
        let name = try admin.query("SELECT current_database()::text").rows[0].string(0)
        for (setting, value) in [
            ("row_security", "on"), ("standard_conforming_strings", "off"), ("idle_session_timeout", "1s"),
        ] {
            let alter = try admin.query(
                "SELECT format('ALTER DATABASE %I SET %I = %L', $1::text, $2::text, $3::text)",
                [.text(name), .text(setting), .text(value)]
            ).rows[0].string(0)
            try admin.execute(alter)
        }
        let plain = try PostgresConnection(database.conninfo)
        defer { plain.close() }
        let before = try plain.query("SELECT current_setting('idle_session_timeout')").rows[0].string(0)
        #expect(before == "1s")
        let connection = try Database(try DatabaseOptions.parse(["--database-url", database.conninfo])).connect()
        defer { connection.close() }
        let row = try connection.query(
            """
            SELECT current_setting('row_security'), current_setting('standard_conforming_strings'),
                   current_setting('idle_session_timeout'), current_setting('client_connection_check_interval')
            """
        ).rows[0]
        let rowSecurity = try row.string(0), conforming = try row.string(1), idle = try row.string(2)
        let check = try row.string(3)
        #expect(rowSecurity == "off")
        #expect(conforming == "on")
        #expect(idle == "0")
        #expect(check == "10s")
        Thread.sleep(forTimeInterval: 1.5)
        let alive = try connection.query("SELECT 1").rows[0].int32(0)
        #expect(alive == 1)
    }

    /// cli.md: without a URL setting them, libpq's `PG*` variables apply. `PGAPPNAME` and `PGCONNECT_TIMEOUT`
    /// did not: the worker always gave libpq its own name and timeout, which libpq takes over the environment.
    /// Now they are given only when the variable is not set (`--connect-timeout` still wins over both).
    @Test func theApplicationNameAndConnectTimeoutVariablesApply() throws {
        func options(_ arguments: [String], _ environment: [String: String]) throws -> [String: String] {
            try Database(
                try DatabaseOptions.parse(arguments), applicationName: "matcher run", environment: environment
            ).options
        }
        let plain = try options([], [:])
        #expect(plain["application_name"] == "matcher run" && plain["connect_timeout"] == "10")
        let fromEnvironment = try options([], ["PGAPPNAME": "nightly", "PGCONNECT_TIMEOUT": "3"])
        #expect(fromEnvironment["application_name"] == nil, "libpq takes PGAPPNAME")
        #expect(fromEnvironment["connect_timeout"] == nil, "libpq takes PGCONNECT_TIMEOUT")
        let flag = try options(["--connect-timeout", "5"], ["PGCONNECT_TIMEOUT": "3"])
        #expect(flag["connect_timeout"] == "5")
        let empty = try options([], ["PGAPPNAME": "", "PGCONNECT_TIMEOUT": ""])
        #expect(empty["application_name"] == "matcher run" && empty["connect_timeout"] == "10")
        // The variable is held to the flag's bounds: libpq would wait for ever on a negative one. It comes from
        // the environment (a unit's environment file), so a bad one is configuration (78), not usage (64), and
        // the command line parses: the failure reaches the metrics file like any other.
        _ = try options([], ["PGCONNECT_TIMEOUT": "0"])
        _ = try options([], ["PGCONNECT_TIMEOUT": "30"])
        for bad in ["-5", "10s", "99999999999"] {
            let refused = #expect(throws: DatabaseSettingError.self) {
                _ = try options([], ["PGCONNECT_TIMEOUT": bad])
            }
            #expect(refused?.description.contains("PGCONNECT_TIMEOUT \(bad)") == true)
            #expect(refused.map { failureKind(of: $0) } == .configuration)
            // The flag wins over the variable, bad or not.
            #expect(try options(["--connect-timeout", "5"], ["PGCONNECT_TIMEOUT": bad])["connect_timeout"] == "5")
        }
    }

    /// `MATCHER_DATABASE_PASSWORD_FILE` names the password's file. One this process cannot read was taken as "no
    /// password": the login was refused with advice that never named the file, or another rule let it in.
    /// Now it is configuration (78), naming the file and why. systemd's credentials folder may hold other
    /// credentials only: no `database-password` there is no password, not an error.
    @Test func anUnreadablePasswordFileIsAConfigurationErrorNamingIt() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("matcher-password-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("database-password").path
        try "s3cret\n".write(toFile: file, atomically: true, encoding: .utf8)
        func password(_ environment: [String: String]) throws -> String? {
            try Database(try DatabaseOptions.parse([]), environment: environment).options["password"]
        }
        #expect(try password(["MATCHER_DATABASE_PASSWORD_FILE": file]) == "s3cret")
        #expect(try password(["CREDENTIALS_DIRECTORY": folder.path]) == "s3cret")
        #expect(try password(["CREDENTIALS_DIRECTORY": folder.path + "/elsewhere"]) == nil)
        #expect(try password([:]) == nil)
        let binary = folder.appendingPathComponent("binary").path
        #expect(FileManager.default.createFile(atPath: binary, contents: Data([0xFF, 0xFE, 0x00])))
        for (path, reason) in [
            (folder.path + "/missing", "no such file"), (folder.path, "a folder, not a file"),
            (binary, "not UTF-8 text"),
        ] {
            let refused = #expect(throws: DatabaseSettingError.self) {
                _ = try password(["MATCHER_DATABASE_PASSWORD_FILE": path, "CREDENTIALS_DIRECTORY": folder.path])
            }
            let description = refused?.description ?? ""
            #expect(description.contains("MATCHER_DATABASE_PASSWORD_FILE \(path)"), "\(description)")
            #expect(description.contains(reason), "\(description)")
            #expect(refused.map { failureKind(of: $0) } == .configuration)
        }
    }

    /// Server settings of the operator's own (`options=` in the connection string, else `PGOPTIONS`) are added
    /// to the worker's, not put in their place: a search path given there used to cost the run its statement
    /// timeout and `jit = off`, and `PGOPTIONS` was never read. For a setting both give, the operator's wins.
    @Test func theOperatorsServerSettingsAddToTheWorkers() throws {
        let database = try TestDatabase.create()
        func session(_ conninfo: String, environment: [String: String] = [:]) throws -> [String] {
            let options = try DatabaseOptions.parse(["--database-url", conninfo, "--statement-timeout", "45"])
            let connection = try Database(options, environment: environment).connect()
            defer { connection.close() }
            let row = try connection.query(
                """
                SELECT current_setting('jit'), current_setting('statement_timeout'), current_setting('search_path'),
                       current_setting('lock_timeout')
                """
            ).rows[0]
            return try (0..<4).map { try row.string($0) }
        }
        let inURL = try session(
            database.conninfo + " options='-c search_path=pg_catalog,public -c lock_timeout=7s'")
        #expect(inURL == ["off", "45s", "pg_catalog,public", "7s"])
        let overridden = try session(database.conninfo + " options='-c statement_timeout=9s'")
        #expect(overridden[0] == "off" && overridden[1] == "9s")
        let fromEnvironment = try session(
            database.conninfo, environment: ["PGOPTIONS": "-c search_path=pg_catalog,public"])
        #expect(fromEnvironment == ["off", "45s", "pg_catalog,public", "0"])
        // The connection string's options win over PGOPTIONS, as libpq has them.
        let both = try session(
            database.conninfo + " options='-c lock_timeout=3s'", environment: ["PGOPTIONS": "-c lock_timeout=5s"])
        #expect(both[3] == "3s")
    }
}
