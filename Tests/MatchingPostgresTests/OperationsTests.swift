import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport
import Testing

/// The operator's contract of the real binary: exit statuses (cli.md), one line on stderr that never
/// shows a password, the notification pause, application_name per shard.
@Suite struct OperationsTests {
    /// The lines the binary itself prints on stderr (its logs are there too, as logfmt).
    static func failureLines(_ outcome: MatcherProcess.Outcome) -> [String] {
        outcome.stderr.split(separator: "\n").map(String.init).filter { $0.hasPrefix("matcher: ") }
    }

    static func expectOneLine(
        _ outcome: MatcherProcess.Outcome, status: Int32, containing: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(!outcome.signalled && outcome.status == status, "\(outcome.stderr)", sourceLocation: sourceLocation)
        let lines = failureLines(outcome)
        #expect(lines.count == 1, "\(outcome.stderr)", sourceLocation: sourceLocation)
        #expect(lines.first?.contains(containing) == true, "\(lines)", sourceLocation: sourceLocation)
        #expect(lines.first?.hasSuffix("(exit \(status))") == true, "\(lines)", sourceLocation: sourceLocation)
    }

    /// Found by review in session 32: a URI with no scheme is a database name to libpq; the server it reached
    /// refused it, the reason was not shown (it quotes the string), and the run exited 69, so its timer retried
    /// every 15 minutes what retrying cannot mend. A refusal the server states is a configuration error.
    @Test func aURIWithoutItsSchemeThatTheServerRefusesIsAConfigurationError() throws {
        let database = try TestDatabase.create()
        var environment: [String: String] = [:]
        for (keyword, variable) in [
            ("host", "PGHOST"), ("port", "PGPORT"), ("user", "PGUSER"), ("password", "PGPASSWORD"),
        ] {
            environment[variable] = PostgresConnection.setting(keyword, in: database.conninfo)
        }
        #expect(environment["PGHOST"] != nil, "the test reaches the test server")
        let password = "Sup3rSecretPw"
        let refused = try MatcherProcess.run(
            ["status"], database: "matcher_worker:\(password)@db/app", environment: environment)
        Self.expectOneLine(refused, status: 78, containing: "the server refused it: database does not exist")
        #expect(!refused.stderr.contains(password) && !refused.stdout.contains(password), "\(refused.stderr)")
    }

    @Test func exitStatusesFollowTheCommandLineContract() throws {
        let password = "Sup3rSecretPw"
        // 64: a usage error, found by the parser or by validation.
        let unknown = try MatcherProcess.run(["run", "--no-such-flag"], database: "")
        Self.expectOneLine(unknown, status: 64, containing: "--no-such-flag")
        let recordsNothing = try MatcherProcess.run(["run", "--max-per-filter", "0"], database: "")
        Self.expectOneLine(recordsNothing, status: 64, containing: "--max-per-filter must be at least 1")
        let zoneless = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00"], database: "")
        Self.expectOneLine(zoneless, status: 64, containing: "a time without an offset is refused")
        let zonelessWindow = try MatcherProcess.run(["backfill", "--changed-since", "2026-03-01"], database: "")
        Self.expectOneLine(zonelessWindow, status: 64, containing: "--changed-since")
        // Timeouts the server cannot take, or that would overflow: named, not a failure at the first connection.
        for (argument, shown) in [
            ("--statement-timeout=3000000", "--statement-timeout 3000000"),
            ("--network-timeout=9223372036854775807", "--network-timeout 9223372036854775807"),
            ("--connect-timeout=-5", "--connect-timeout -5"),
        ] {
            let timeout = try MatcherProcess.run(["run", argument], database: "")
            Self.expectOneLine(timeout, status: 64, containing: "\(shown): seconds from 0 to")
        }
        let invertedWindow = try MatcherProcess.run(
            ["backfill", "--changed-since", "2026-03-02T00:00:00Z", "--changed-before", "2026-03-01T00:00:00Z"],
            database: "")
        Self.expectOneLine(invertedWindow, status: 64, containing: "is not before --changed-before")
        // Under systemd (standard error is the journal) the failure line carries priority err, so that
        // `journalctl -p err` shows it.
        let journaled = try MatcherProcess.run(
            ["run", "--no-such-flag"], database: "", environment: ["MATCHER_LOG_PRIORITY_PREFIX": "1"])
        #expect(journaled.status == 64 && journaled.stderr.hasPrefix("<3>matcher: "), "\(journaled.stderr)")
        let journaledFailure = try MatcherProcess.run(
            ["run", "--connect-timeout", "3"], database: "host=127.0.0.1 port=1 user=nobody",
            environment: ["MATCHER_LOG_PRIORITY_PREFIX": "1"])
        let failureLines = journaledFailure.stderr.split(separator: "\n").filter { $0.contains("matcher: run failed") }
        #expect(journaledFailure.status == 69 && failureLines.count == 1)
        #expect(failureLines.allSatisfy { $0.hasPrefix("<3>matcher: run failed") }, "\(journaledFailure.stderr)")

        // 64: a connection string mistyped on the command line, unquoted or without its flag: the parser quotes
        // the unexpected arguments back, the password masked.
        // Found by review in session 32: a password holding `/` or `@`, a URI with no scheme, and a password with
        // spaces left unquoted were quoted back whole or in part; no argument that may be one is shown now.
        for mistyped in [
            ["run", "--database-url", "host=db", "password=\(password)", "dbname=app"],
            ["run", "postgresql://matcher_worker:\(password)@db/app"],
            ["run", "postgresql://matcher_worker:pa/\(password)@db/app"],
            ["run", "postgresql://matcher_worker:p@\(password)@db/app"],
            ["run", "matcher_worker:\(password)@db/app"],
            ["run", "--database-url", "host=db", "password=correct \(password) staple"],
            // The same, split by the shell: the password's words are arguments of their own.
            ["run", "--database-url", "host=db", "password=correct", password, "staple"],
            ["run", "postgresql://matcher_worker:a", password, "c@db/app"],
        ] {
            let usage = try MatcherProcess.run(mistyped, database: "")
            Self.expectOneLine(usage, status: 64, containing: "nexpected argument")
            #expect(!usage.stderr.contains(password), "\(usage.stderr)")
            #expect(usage.stderr.contains("not shown: it may hold a password"), "\(usage.stderr)")
        }

        // 69: nothing listens there (port 1 on loopback); the password never shows.
        let unreachable = try MatcherProcess.run(
            ["run", "--connect-timeout", "3"], database: "postgresql://matcher_worker:\(password)@127.0.0.1:1/matcher")
        Self.expectOneLine(unreachable, status: 69, containing: "server is up and reachable")
        #expect(!unreachable.stderr.contains(password) && !unreachable.stdout.contains(password))
        // One line is all of standard error: the logger's structured event of the failure is a debug one (found by
        // review in session 28: every command printed it above the line, the same words twice).
        for command in [["run"], ["status"], ["explain", "--filter", "1", "--profile", "2"], ["migrate"]] {
            let failed = try MatcherProcess.run(
                command + ["--connect-timeout", "3"], database: "host=127.0.0.1 port=1 user=nobody")
            let lines = failed.stderr.split(separator: "\n")
            #expect(failed.status == 69 && lines.count == 1, "\(command): \(failed.stderr)")
            #expect(lines.first?.hasPrefix("matcher: \(command[0]) failed: ") == true, "\(failed.stderr)")
        }

        // 78: a connection string libpq cannot read, quoting the password's fragment.
        let malformed = try MatcherProcess.run(
            ["run"], database: "postgresql://matcher_worker:\(password)%zz@127.0.0.1:1/matcher")
        Self.expectOneLine(malformed, status: 78, containing: "fix --database-url")
        #expect(!malformed.stderr.contains(password), "\(malformed.stderr)")
        let keywords = try MatcherProcess.run(
            ["run", "--database-url", "host=127.0.0.1 port=1 password=\(password) nonsense=1"], database: "")
        Self.expectOneLine(keywords, status: 78, containing: "fix --database-url")
        #expect(!keywords.stderr.contains(password), "\(keywords.stderr)")

        // 78: a password with an unencoded @ in the URI: libpq would read "2024@127.0.0.1" as the host and
        // quote it; the line says what to fix and shows no piece of the password.
        let unencoded = try MatcherProcess.run(
            ["run"], database: "postgresql://matcher_worker:Secr3t@2024@127.0.0.1:1/matcher")
        Self.expectOneLine(unencoded, status: 78, containing: "percent-encoded")
        #expect(!unencoded.stderr.contains("Secr3t") && !unencoded.stderr.contains("2024"), "\(unencoded.stderr)")
        // 78: settings libpq reads but cannot use: not the server's fault, retrying will not help.
        for settings in ["sslmode=verify_full", "port=abc"] {
            let unusable = try MatcherProcess.run(
                ["run", "--database-url", "host=127.0.0.1 dbname=matcher \(settings)"], database: "")
            Self.expectOneLine(unusable, status: 78, containing: "fix --database-url")
        }

        // 78: a reachable database without the schema: run `matcher migrate`.
        let empty = try TestDatabase.create()
        let unmigrated = try MatcherProcess.run(["run", "--now", "2026-03-01T03:00:00Z"], database: empty.conninfo)
        Self.expectOneLine(unmigrated, status: 78, containing: "matcher migrate")
        let notMigratedPause = try MatcherProcess.run(["notifications", "show"], database: empty.conninfo)
        Self.expectOneLine(notMigratedPause, status: 78, containing: "matcher migrate")
    }

    /// The private server trusts its socket, so a refused login is shown with a database and a role
    /// that do not exist: the server answers, and says no. Retrying will not help: 78.
    @Test func aRefusedLoginIsAConfigurationErrorAndThePasswordIsNeverShown() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pw-\(UUID().uuidString)")
        try Data("Wr0ngPassw0rdX\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let admin = try TestDatabase.adminConninfo
        for overriding in [["dbname": "no_such_database_for_ops"], ["user": "no_such_role_for_ops"]] {
            let conninfo = try PostgresConnection.conninfo(admin, overriding: overriding)
            let outcome = try MatcherProcess.run(
                ["run", "--now", "2026-03-01T03:00:00Z"], database: conninfo,
                environment: ["MATCHER_DATABASE_PASSWORD_FILE": file.path])
            Self.expectOneLine(outcome, status: 78, containing: "refused the login")
            #expect(!outcome.stderr.contains("Wr0ngPassw0rdX") && !outcome.stdout.contains("Wr0ngPassw0rdX"))
        }
    }

    /// A refused password is a configuration error (78) in the server's language too: a login refusal is written
    /// before any session setting applies, so a server with `lc_messages = 'ja_JP.UTF-8'` says it in Japanese,
    /// which no English words match, and it was exit 69 (unreachable, retried) until someone read the log.
    /// libpq says whether the server asked for a password and whether one was sent. `scripts/pg` makes the
    /// private server ask `matcher_password_probe` for one.
    @Test(
        .enabled(
            if: TestDatabase.asksProbeRoleForPassword != false,
            "needs a server that asks matcher_password_probe for a password, as scripts/pg's does"))
    func aRefusedPasswordIsAConfigurationErrorInAnyLanguage() throws {
        let admin = try TestDatabase.adminConninfo
        let setup = try PostgresConnection(admin)
        defer {
            _ = try? setup.execute("DROP ROLE IF EXISTS matcher_password_probe")
            setup.close()
        }
        try setup.execute("DROP ROLE IF EXISTS matcher_password_probe")
        try setup.execute("CREATE ROLE matcher_password_probe LOGIN PASSWORD 'the-right-one'")
        func attempt(_ password: String?) throws -> PostgresError? {
            var overriding = ["user": "matcher_password_probe", "passfile": "/dev/null"]
            if let password { overriding["password"] = password }
            let conninfo = try PostgresConnection.conninfo(admin, overriding: overriding)
            do {
                try PostgresConnection(conninfo).close()
                return nil
            } catch let error as PostgresError {
                return error
            }
        }
        #expect(try attempt("the-right-one") == nil, "the server asks the probe role for its password")
        let japanese =
            "could not connect to host=/run/postgresql port=5432 dbname=matcher user=matcher_worker: "
            + "connection to server failed: 致命的エラー:  ユーザー\"matcher_worker\"のパスワード認証に失敗しました"
        for (password, exchange) in [("a-wrong-one", PostgresError.PasswordExchange.sent), (nil, .missing)] {
            let refused = try #require(try attempt(password), "refused")
            #expect(refused.password == exchange, "\(refused)")
            #expect(refused.failureKind == .configuration, "\(refused)")
            let inJapanese = PostgresError(
                kind: .connection, message: japanese, password: exchange, reasonIsLocalized: true)
            #expect(inJapanese.failureKind == .configuration)
        }
        // Without libpq's word, the same Japanese line reads as a server not reached; and in English, a refusal
        // after the password that is no configuration error (the reserved slots, a shutdown) stays one to retry.
        #expect(
            PostgresError(kind: .connection, message: japanese, reasonIsLocalized: true).failureKind == .unavailable)
        for words in [
            "FATAL:  remaining connection slots are reserved for non-replication superuser connections",
            "FATAL:  too many connections for role \"matcher_worker\"",
            "FATAL:  terminating connection due to administrator command",
        ] {
            let transient = PostgresError(
                kind: .connection,
                message: "could not connect to host=/x port=5432 dbname=matcher user=matcher_worker: \(words)",
                password: .sent)
            #expect(transient.failureKind == .unavailable, "\(words)")
        }

        // Review against a real server: a PGPASSFILE libpq ignores (group or others may read it) gave "no password
        // supplied" and "check the password (password file, PGPASSFILE)". The line names the file and why, never
        // the password; the same file at 0600 logs in. Nothing is refused up front (a trusted login needs none).
        let database = try TestDatabase.create()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pgpass-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let passfile = folder.appendingPathComponent("pgpass")
        try Data("*:*:*:matcher_password_probe:the-right-one\n".utf8).write(to: passfile)
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: passfile.path)
        let probe = try PostgresConnection.conninfo(database.conninfo, overriding: ["user": "matcher_password_probe"])
        let ignored = try MatcherProcess.run(["status"], database: probe, environment: ["PGPASSFILE": passfile.path])
        Self.expectOneLine(ignored, status: 78, containing: "libpq ignores the password file \(passfile.path)")
        #expect(ignored.stderr.contains("mode 0640") && ignored.stderr.contains("chmod 0600"), "\(ignored.stderr)")
        #expect(!ignored.stderr.contains("the-right-one"), "\(ignored.stderr)")
        let elsewhere = try PostgresConnection.conninfo(probe, overriding: ["passfile": folder.path + "/none"])
        let absent = try MatcherProcess.run(["status"], database: elsewhere)
        Self.expectOneLine(absent, status: 78, containing: "\(folder.path)/none (passfile= in the connection string)")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: passfile.path)
        let read = try MatcherProcess.run(["status"], database: probe, environment: ["PGPASSFILE": passfile.path])
        #expect(!read.stderr.contains("refused the login"), "\(read.stderr)")
        // ~/.pgpass is HOME's when HOME is set (libpq 15+, as linked here), as the failure line names it (review of
        // session 35): the line for the login in HOME's .pgpass logs in; without it, that file is the one named.
        if PostgresConnection.libraryVersion >= 150000 {
            let home = folder.appendingPathComponent("home")
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            let noFile = try MatcherProcess.run(
                ["status"], database: probe, environment: ["HOME": home.path, "PGPASSFILE": ""])
            Self.expectOneLine(noFile, status: 78, containing: "\(home.path)/.pgpass (libpq's default, ~/.pgpass)")
            try FileManager.default.copyItem(at: passfile, to: home.appendingPathComponent(".pgpass"))
            let fromHome = try MatcherProcess.run(
                ["status"], database: probe, environment: ["HOME": home.path, "PGPASSFILE": ""])
            #expect(!fromHome.stderr.contains("refused the login"), "\(fromHome.stderr)")
        }
    }

    /// Review against a real server: causes the server gives, each advised as itself. Connection slots full (a
    /// role's CONNECTION LIMIT) is 69 and says so, not "check that the server is up and reachable"; a read-only
    /// database (what a standby or a read-only endpoint gives) names the primary; a lock or statement timeout says
    /// which setting ran out, and an explain's line no longer tells to check the ids.
    @Test func causesTheServerGivesAreAdvisedAsThemselves() throws {
        let database = try MigratedDatabase.create()
        let admin = try database.connect()
        defer { admin.close() }
        let role = "slots_\(database.name.suffix(12))"
        try admin.execute("CREATE ROLE \"\(role)\" LOGIN CONNECTION LIMIT 0")
        defer { _ = try? admin.execute("DROP ROLE IF EXISTS \"\(role)\"") }
        let full = try MatcherProcess.run(
            ["status"], database: try PostgresConnection.conninfo(database.conninfo, overriding: ["user": role]))
        Self.expectOneLine(full, status: 69, containing: "connection slots are full")
        #expect(!full.stderr.contains("firewall"), "\(full.stderr)")

        let readOnly = try TestDatabase.create()
        try admin.execute("ALTER DATABASE \"\(readOnly.name)\" SET default_transaction_read_only = on")
        let refused = try MatcherProcess.run(["migrate"], database: readOnly.conninfo)
        Self.expectOneLine(refused, status: 1, containing: "the database is read-only")
        #expect(refused.stderr.contains("DATABASE_URL at the primary"), "\(refused.stderr)")
        let writable = try PostgresConnection.conninfo(
            readOnly.conninfo, overriding: ["target_session_attrs": "read-write"])
        let turnedAway = try MatcherProcess.run(["status"], database: writable)
        Self.expectOneLine(turnedAway, status: 69, containing: "the server is read-only")
        #expect(!turnedAway.stderr.contains("firewall"), "\(turnedAway.stderr)")

        // explain waits for a table another session holds.
        let explain = ["explain", "--filter", "1", "--profile", "2"]
        try admin.transaction { tx in
            try tx.execute("LOCK TABLE saved_filters IN ACCESS EXCLUSIVE MODE")
            let lockWait = try MatcherProcess.run(
                explain,
                database: try PostgresConnection.conninfo(
                    database.conninfo, overriding: ["options": "-c lock_timeout=200"]))
            Self.expectOneLine(
                lockWait, status: 1, containing: "the lock_timeout that options= in the connection string sets")
            let worker = try MatcherProcess.run(explain + ["--statement-timeout", "1"], database: database.conninfo)
            Self.expectOneLine(worker, status: 1, containing: "a statement ran past --statement-timeout")
            let operators = try MatcherProcess.run(
                explain, database: database.conninfo, environment: ["PGOPTIONS": "-c statement_timeout=300"])
            Self.expectOneLine(operators, status: 1, containing: "the statement_timeout that PGOPTIONS sets")
            for outcome in [lockWait, worker, operators] {
                #expect(!outcome.stderr.contains("ids") && outcome.stderr.contains("explain writes nothing"))
            }
        }
    }

    /// A server setting the server refuses at every session's start (in `options` or PGOPTIONS: a misspelt name,
    /// one only a superuser or a restart may set), a certificate naming another host, an unusable client key:
    /// retrying will not help, so 78, not "unreachable" (69).
    @Test func aSettingOrCertificateTheServerRefusesIsAConfigurationError() throws {
        let database = try MigratedDatabase.create()
        let misspelt = try PostgresConnection.conninfo(
            database.conninfo, overriding: ["options": "-c statment_timeout=5s"])
        let outcome = try MatcherProcess.run(["status"], database: misspelt)
        #expect(outcome.status == 78, "\(outcome.stderr)")
        #expect(outcome.stderr.contains("statment_timeout"), "\(outcome.stderr)")
        for reason in [
            "FATAL:  permission denied to set parameter \"log_min_duration_statement\"",
            "FATAL:  parameter \"shared_buffers\" cannot be changed without restarting the server",
            "server certificate for \"db.internal\" does not match host name \"10.0.0.5\"",
            "private key file \"/etc/matcher/client.key\" has group or world access",
            // PgBouncer, in any pool mode, refusing the worker's own settings (session 33).
            "ERROR:  unsupported startup parameter in options: jit",
        ] {
            let refused = PostgresError(
                kind: .connection,
                message:
                    "could not connect to host=db.internal port=5432 dbname=m user=w: connection to server failed: "
                    + reason)
            #expect(refused.failureKind == .configuration, "\(reason)")
        }
    }

    /// `matcher explain` exits 0 whether the pair matches or not (cli.md), and a filter that does not exist is
    /// one line that says so and what to check.
    @Test func explainExitsZeroEitherWayAndRefusesAMissingFilter() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        let writer = AppTableWriter(connection: connection)
        try writer.upsertProfiles(
            [World.profile(1, gender: 1), World.profile(10), World.profile(11, residence: 27)],
            updatedAt: ScenarioWorld.day1)
        try writer.upsertFilters([World.filter(100, owner: 1, #"{"residence": {"anyOf": [13]}}"#)])
        for (profile, verdict) in [(10, ": MATCH"), (11, ": NO MATCH")] {
            let outcome = try MatcherProcess.run(
                ["explain", "--filter", "100", "--profile", String(profile), "--now", "2026-03-01T03:00:00Z"],
                database: database.conninfo)
            #expect(outcome.status == 0, "\(outcome.stderr)")
            #expect(outcome.stdout.contains("residence") && outcome.stdout.contains(verdict), "\(outcome.stdout)")
        }
        // A filter id no saved filter has is a bad flag value (64; review of session 32: it exited 1); a profile id
        // no row has is explained, exit 0.
        let missing = try MatcherProcess.run(
            ["explain", "--filter", "999", "--profile", "10"], database: database.conninfo)
        Self.expectOneLine(missing, status: 64, containing: "saved filter 999 does not exist — check the --filter id")
        #expect(!missing.stderr.contains("next run"))
        let noProfile = try MatcherProcess.run(
            ["explain", "--filter", "100", "--profile", "99999", "--now", "2026-03-01T03:00:00Z"],
            database: database.conninfo)
        #expect(noProfile.status == 0 && noProfile.stdout.contains("NO MATCH"), "\(noProfile.stderr)")
    }

    @Test func notificationsPauseAndResume() throws {
        let database = try MigratedDatabase.create()
        let connection = try database.connect()
        defer { connection.close() }
        let state = PostgresServiceState(connection: connection)
        #expect(try state.notificationsPaused() == nil)

        let paused = try MatcherProcess.run(
            [
                "notifications", "pause", "--reason", "push outage", "--by", "oncall",
                "--format", "json",
            ], database: database.conninfo)
        #expect(paused.status == 0, "\(paused.stderr)")
        #expect(paused.stdout.contains("\"paused\":true") && paused.stdout.contains("\"reason\":\"push outage\""))
        let pause = try #require(try state.notificationsPaused())
        #expect(pause.pausedBy == "oncall" && pause.reason == "push outage")

        // Pausing again keeps the start; a run's metrics show the pause.
        let again = try MatcherProcess.run(
            ["notifications", "pause", "--reason", "still out"], database: database.conninfo)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try state.notificationsPaused()?.pausedAt == pause.pausedAt)
        let metrics = FileManager.default.temporaryDirectory.appendingPathComponent("ops-\(UUID().uuidString).prom")
        defer { try? FileManager.default.removeItem(at: metrics) }
        // A dry run writes nothing, not the metrics file either: its success would stand for the real runs'.
        for command in ["run", "backfill"] {
            let dry = try MatcherProcess.run(
                [command, "--dry-run", "--now", "2026-03-01T03:00:00Z", "--metrics-file", metrics.path],
                database: database.conninfo)
            #expect(dry.status == 0, "\(dry.stderr)")
            #expect(!FileManager.default.fileExists(atPath: metrics.path))
        }
        let run = try MatcherProcess.run(
            ["run", "--now", "2026-03-01T03:00:00Z", "--metrics-file", metrics.path],
            database: database.conninfo)
        #expect(run.status == 0, "\(run.stderr)")
        let text = try String(contentsOf: metrics, encoding: .utf8)
        #expect(text.contains("matcher_notifications_paused{kind=\"run\",shard=\"0/1\"} 1"), "\(text)")
        #expect(text.contains("matcher_last_run_success{kind=\"run\",shard=\"0/1\"} 1"), "\(text)")

        let resumed = try MatcherProcess.run(["notifications", "resume"], database: database.conninfo)
        #expect(resumed.status == 0 && resumed.stdout.contains("resumed"), "\(resumed.stderr)")
        #expect(try state.notificationsPaused() == nil)
        let twice = try MatcherProcess.run(["notifications", "resume"], database: database.conninfo)
        #expect(twice.status == 0 && twice.stdout.contains("were not paused"), "\(twice.stderr)")

        let noReason = try MatcherProcess.run(["notifications", "pause", "--reason", " "], database: database.conninfo)
        #expect(noReason.status == 64, "\(noReason.stderr)")
    }

    /// The commit is the checkout's HEAD (the BuildCommit plugin), not "unknown" nor an earlier build's.
    @Test func versionNamesTheCommit() throws {
        let outcome = try MatcherProcess.run(["--version"], database: "")
        #expect(outcome.status == 0)
        #expect(outcome.stdout.hasPrefix("0.1.0 (commit "), "\(outcome.stdout)")
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let git = Process()
        git.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        git.arguments = ["git", "-C", root.path, "rev-parse", "--short=12", "HEAD"]
        let out = Pipe()
        git.standardOutput = out
        git.standardError = FileHandle.nullDevice
        try git.run()
        git.waitUntilExit()
        let head = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        // Outside a checkout there is no HEAD to compare with; in one, git must answer.
        guard git.terminationStatus == 0, !head.isEmpty else {
            if FileManager.default.fileExists(atPath: root.appendingPathComponent(".git").path) {
                Issue.record("git rev-parse HEAD failed in the checkout at \(root.path)")
            }
            return
        }
        #expect(outcome.stdout.hasPrefix("0.1.0 (commit \(head)"), "\(outcome.stdout) against HEAD \(head)")
    }
}
