import Foundation
import MatchingPostgres
import PostgresClient
import Testing

@testable import Matching
@testable import matcher

/// The "what to do" half of the one failure line (cli.md), by command and cause: review against a real server
/// found it wrong for several pairs. Each test's errors are the ones the server and libpq give (their words, their
/// SQLSTATEs); the process's connection string and environment are given, not the test runner's.
@Suite struct FailureAdviceTests {
    static func text(
        _ error: any Error, _ command: String, arguments: [String] = ["matcher"], environment: [String: String] = [:]
    ) -> String {
        advice(
            for: error, kind: failureKind(of: error), command: command, arguments: arguments, environment: environment)
    }

    static func connectFailure(_ reason: String, password: PostgresError.PasswordExchange? = nil) -> PostgresError {
        PostgresError(
            kind: .connection,
            message: "could not connect to host=/run/postgresql port=5432 dbname=matcher user=matcher_worker: "
                + "connection to server on socket \"/run/postgresql/.s.PGSQL.5432\" failed: \(reason)",
            password: password)
    }

    static let lost = PostgresError(
        kind: .connection,
        message: "server closed the connection unexpectedly This probably means the server terminated abnormally")
    static let statementTimeout = PostgresError(
        kind: .server, sqlState: "57014", message: "canceling statement due to statement timeout")
    static let lockTimeout = PostgresError(
        kind: .server, sqlState: "55P03", message: "canceling statement due to lock timeout")
    static let readOnly = PostgresError(
        kind: .server, sqlState: "25006", message: "cannot execute INSERT in a read-only transaction")

    /// explain said "check the filter and profile ids" after every failure, a lock or statement timeout and a lost
    /// connection too. The ids only where they are the cause: a filter that does not exist, a row of theirs that
    /// cannot be read; otherwise the cause's own advice, and that explain writes nothing.
    @Test func explainAdvisesTheIdsOnlyWhenTheyAreTheCause() {
        for error in [Self.lost, Self.statementTimeout, Self.lockTimeout] {
            let text = Self.text(error, "explain")
            #expect(!text.contains("ids"), "\(error): \(text)")
            #expect(text.contains("explain writes nothing"), "\(error): \(text)")
        }
        #expect(Self.text(Self.lockTimeout, "explain").contains("lock"))
        #expect(Self.text(Self.statementTimeout, "explain").contains("--statement-timeout"))
        let terminated = PostgresError(
            kind: .server, sqlState: "57P01", message: "terminating connection due to administrator command",
            severity: "FATAL")
        #expect(Self.text(terminated, "explain") == "explain writes nothing; retrying is safe")
        let unreadable = PostgresError(kind: .decoding, message: "column 3: expected int8, got 4 bytes")
        #expect(Self.text(unreadable, "explain").contains("check the filter and profile ids"))
        #expect(Self.text(ExplainMatch.FilterNotFound(filterId: 7), "explain").contains("--filter id"))
    }

    /// A lost connection told every command its "committed units are kept and retry the command once the cause is
    /// fixed": no units or run but a run's or backfill's, and not a sentence. Each command now says what it leaves.
    @Test func aLostConnectionIsAdvisedByWhatTheCommandLeaves() {
        #expect(
            Self.text(Self.lost, "run")
                == "the connection was lost mid-run; committed units are kept and the next run resumes the work")
        #expect(
            Self.text(Self.lost, "backfill")
                == "the connection was lost mid-backfill; committed units are kept and the same backfill command "
                + "resumes the work")
        for (command, says) in [
            ("status", "status writes nothing"), ("explain", "explain writes nothing"),
            ("notifications show", "notifications show writes nothing"),
            ("migrate", "each migration commits whole or not at all"),
            ("reindex", "drops what an interrupted rebuild left"),
            ("progress reset", "commits whole or not at all"), ("runs abandon", "commits whole or not at all"),
        ] {
            let text = Self.text(Self.lost, command)
            #expect(text.hasPrefix("the connection was lost; "), "\(command): \(text)")
            #expect(text.contains(says) && text.hasSuffix("run `matcher \(command)` again"), "\(command): \(text)")
            #expect(!text.contains("unit") && !text.contains("mid-run"), "\(command): \(text)")
        }
    }

    /// Out of connection slots (53300, in words: a refused connect has no SQLSTATE) was advised as a server not
    /// reached ("host, port, firewall"); and a server target_session_attrs=read-write turned away as well. Still
    /// exit 69, retried.
    @Test func fullConnectionSlotsAndAReadOnlyServerAreNotAnUnreachableOne() {
        for words in [
            "FATAL:  sorry, too many clients already",
            "FATAL:  too many connections for role \"matcher_worker\"",
            "FATAL:  too many connections for database \"matcher\"",
            "FATAL:  remaining connection slots are reserved for roles with the SUPERUSER attribute",
        ] {
            let error = Self.connectFailure(words, password: .sent)
            #expect(error.failureKind == .unavailable, "\(words)")
            let text = Self.text(error, "run")
            #expect(text.contains("connection slots are full") && text.contains("CONNECTION LIMIT"), "\(text)")
            // README and the runbook: a run needs two connections and uses up to --write-connections + 2.
            #expect(
                text.contains("a run needs two of them and uses up to --write-connections + 2")
                    && !text.contains("firewall"), "\(text)")
            #expect(text.hasSuffix("the next run retries"), "\(text)")
            #expect(Self.text(error, "status").hasSuffix("then run `matcher status` again"))
        }
        let slots = PostgresError(kind: .server, sqlState: "53300", message: "sorry, too many clients already")
        #expect(Self.text(slots, "run").contains("connection slots are full"))
        for words in ["session is read-only", "server is in hot standby mode"] {
            let error = Self.connectFailure(words)
            #expect(error.failureKind == .unavailable, "\(words)")
            let text = Self.text(error, "run")
            #expect(text.contains("read-only") && text.contains("primary") && !text.contains("firewall"), "\(text)")
            #expect(text.hasSuffix("the next run retries"), "\(text)")
        }
    }

    /// "the next run resumes the work" after a statement timeout: not when the timeout is the operator's
    /// (options= or PGOPTIONS, which win over --statement-timeout), and then every run fails the same way.
    @Test func aStatementTimeoutNamesTheSettingThatApplies() {
        let worker = Self.text(Self.statementTimeout, "run")
        #expect(worker.contains("--statement-timeout") && worker.contains("PGOPTIONS"), "\(worker)")
        #expect(worker.contains("committed units are kept") && worker.contains("the next run resumes"), "\(worker)")
        #expect(worker.contains("raise --statement-timeout"), "\(worker)")
        let fromEnvironment = Self.text(
            Self.statementTimeout, "run", environment: ["PGOPTIONS": "-c statement_timeout=5s"])
        #expect(fromEnvironment.contains("the statement_timeout that PGOPTIONS sets"), "\(fromEnvironment)")
        #expect(fromEnvironment.contains("fails the same way"), "\(fromEnvironment)")
        #expect(!fromEnvironment.contains("the next run resumes"), "\(fromEnvironment)")
        // The connection string's options win over PGOPTIONS (`Database`): so does the advice.
        let fromURL = Self.text(
            Self.statementTimeout, "status",
            arguments: ["matcher", "status", "--database-url", "dbname=m options='-c statement_timeout=5s'"],
            environment: ["PGOPTIONS": "-c jit=off"])
        #expect(fromURL.contains("options= in the connection string"), "\(fromURL)")
        #expect(fromURL.hasSuffix("status writes nothing"), "\(fromURL)")
        let cancelled = PostgresError(
            kind: .server, sqlState: "57014", message: "canceling statement due to user request")
        #expect(Self.text(cancelled, "run").hasPrefix("a statement was cancelled"))
    }

    /// A lock timeout was "committed units are kept; the next run resumes the work" with no word of which wait: a
    /// unit's (about 60 s, three tries, no flag), migrate's own (--lock-timeout), or the operator's lock_timeout.
    @Test func aLockTimeoutSaysWhichWaitRanOut() {
        let run = Self.text(Self.lockTimeout, "run")
        #expect(run.contains("a unit's wait for rows another writer holds"), "\(run)")
        #expect(run.hasSuffix("committed units are kept and the next run resumes the work"), "\(run)")
        let migrate = Self.text(Self.lockTimeout, "migrate")
        #expect(migrate.contains("--lock-timeout") && migrate.contains("run `matcher migrate` again"), "\(migrate)")
        let status = Self.text(Self.lockTimeout, "status", environment: ["PGOPTIONS": "-c lock_timeout=100"])
        #expect(status.contains("the lock_timeout that PGOPTIONS sets"), "\(status)")
        #expect(!status.contains("unit") && status.hasSuffix("run `matcher status` again"), "\(status)")
    }

    /// A run lock taken while a `matcher migrate` held the migrators' lock past the wait (75): the timer's next run
    /// retries a run, but no timer runs a backfill (review of session 35).
    @Test func aRunOrBackfillRefusedForAMigrateSaysWhatRunsItAgain() {
        let locked = MigrationError(
            description: "a matcher migrate of this database has held the migrators' lock for more than 30 s",
            failureKind: .locked)
        let run = Self.text(locked, "run")
        #expect(run == "run it again once that migrate has finished (the timer's next run does)", "\(run)")
        let backfill = Self.text(locked, "backfill")
        #expect(!backfill.contains("timer's next run"), "\(backfill)")
        #expect(backfill.hasPrefix("run the same backfill again once that migrate has finished"), "\(backfill)")
    }

    /// Writing to a read-only server (a standby, a read-only endpoint after a failover) stays exit 1, and says so
    /// and where to point the worker.
    @Test func aReadOnlyDatabaseNamesThePrimary() {
        #expect(Self.readOnly.failureKind == .other)
        let run = Self.text(Self.readOnly, "run")
        #expect(run.hasPrefix("the database is read-only"), "\(run)")
        #expect(run.contains("DATABASE_URL at the primary") && run.contains("target_session_attrs=read-write"))
        #expect(run.hasSuffix("committed units are kept and the next run resumes the work"), "\(run)")
        let migrate = Self.text(Self.readOnly, "migrate")
        #expect(migrate.hasPrefix("the database is read-only") && !migrate.contains("unit"), "\(migrate)")
    }

    /// An identity sequence behind its table's rows (a database moved by logical replication) failed every run
    /// with "the next run resumes the work", exit 1, each taking the next value: now 78 and the statement to run.
    @Test func anIdentityBehindItsRowsNamesTheSequenceToSet() {
        let behind = PostgresError(
            kind: .server, sqlState: "23505",
            message: "duplicate key value violates unique constraint \"notifications_pkey\"",
            detail: "Key (id)=(7) already exists.")
        #expect(behind.failureKind == .configuration && behind.identityBehind == "notifications")
        let run = Self.text(behind, "run")
        #expect(run.contains("setval(pg_get_serial_sequence('notifications', 'id')"), "\(run)")
        #expect(run.hasSuffix("retrying will not help") && !run.contains("resumes"), "\(run)")
        // Another unique violation stays what it was.
        let other = PostgresError(
            kind: .server, sqlState: "23505",
            message: "duplicate key value violates unique constraint \"filter_matches_pkey\"")
        #expect(other.failureKind == .other && other.identityBehind == nil)
    }

    /// "fe_sendauth: no password supplied" was "check the user, database and password (password file,
    /// PGPASSFILE)", whichever file libpq had passed over and why. The line names the file and the reason, and
    /// never the password in it.
    @Test func aLoginWithoutAPasswordNamesThePasswordFileAndWhy() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pgpass-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("pgpass")
        try Data("*:*:*:matcher_worker:S3cretPassw0rd\n".utf8).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        let missing = Self.connectFailure("fe_sendauth: no password supplied", password: .missing)

        let open = Self.text(missing, "run", environment: ["PGPASSFILE": file.path])
        #expect(open.contains("\(file.path) (PGPASSFILE)") && open.contains("0644"), "\(open)")
        #expect(open.contains("libpq ignores") && open.contains("chmod 0600"), "\(open)")
        #expect(!open.contains("S3cretPassw0rd") && open.hasSuffix("retrying will not help"), "\(open)")

        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        let noLine = Self.text(
            missing, "status", arguments: ["matcher", "status", "--database-url", "passfile=\(file.path) dbname=m"],
            environment: ["PGPASSFILE": "/nonexistent"])
        #expect(noLine.contains("\(file.path) (passfile= in the connection string) has no line"), "\(noLine)")

        // libpq's home for ~/.pgpass: from libpq 15, HOME when set and not empty (what the linked 15.18 reads:
        // OperationsTests logs in with it), else the user's entry; before 15, the entry only (review of session 35).
        let absent = Self.text(missing, "run", environment: ["HOME": folder.path])
        if PostgresConnection.libraryVersion >= 150000 {
            #expect(absent.contains("\(folder.path)/.pgpass (libpq's default, ~/.pgpass) does not exist"), "\(absent)")
        }
        for (version, expected) in [(150018, folder.path + "/.pgpass"), (140013, "/home/worker/.pgpass")] {
            let file = PasswordSource.passwordFile(
                conninfo: nil, environment: ["HOME": folder.path], home: { "/home/worker" }, libraryVersion: version)
            #expect(file?.path == expected, "libpq \(version): \(String(describing: file))")
        }
        let emptyHome = PasswordSource.passwordFile(
            conninfo: nil, environment: ["HOME": ""], home: { "/home/worker/" }, libraryVersion: 150018)
        #expect(emptyHome?.path == "/home/worker/.pgpass", "\(String(describing: emptyHome))")

        let notAFile = PasswordSource.problem(with: "the password file", at: folder.path) { _ in nil }
        #expect(notAFile.contains("not a plain file"), "\(notAFile)")
        // Not readable by this user (as root, every file is: the reason is the system's, given).
        let denied = PasswordSource.problem(with: "the password file", at: file.path) { _ in EACCES }
        #expect(denied.contains("cannot be read by this user (permission denied)"), "\(denied)")

        // A password sent and refused: where it came from, by libpq's order.
        let refused = Self.connectFailure(
            "FATAL:  password authentication failed for user \"matcher_worker\"", password: .sent)
        // The worker's own password, named as `Database` read it (one place says where it came from).
        let workerFile = folder.appendingPathComponent("worker-password")
        try Data("S3cretPassw0rd\n".utf8).write(to: workerFile)
        let fromFile = Self.text(
            refused, "run", environment: ["MATCHER_DATABASE_PASSWORD_FILE": workerFile.path, "PGPASSWORD": "other"])
        #expect(fromFile.contains("came from MATCHER_DATABASE_PASSWORD_FILE \(workerFile.path)"), "\(fromFile)")
        let credentials = folder.appendingPathComponent("credentials")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        let noCredential = Self.text(
            refused, "run", environment: ["CREDENTIALS_DIRECTORY": credentials.path, "PGPASSWORD": "other"])
        #expect(noCredential.contains("came from PGPASSWORD"), "\(noCredential)")
        try Data("S3cretPassw0rd\n".utf8).write(to: credentials.appendingPathComponent("database-password"))
        let fromCredential = Self.text(
            refused, "run", environment: ["CREDENTIALS_DIRECTORY": credentials.path, "PGPASSWORD": "other"])
        #expect(
            fromCredential.contains("came from the credential \(credentials.path)/database-password")
                && !fromCredential.contains("S3cret"), "\(fromCredential)")
        let fromPassfile = Self.text(refused, "run", environment: ["PGPASSFILE": file.path])
        #expect(fromPassfile.contains("came from the password file \(file.path) (PGPASSFILE)"), "\(fromPassfile)")
        let fromURL = Self.text(
            refused, "run", arguments: ["matcher", "run", "--database-url", "password=S3cretPassw0rd dbname=m"],
            environment: ["PGPASSWORD": "other"])
        #expect(fromURL.contains("the connection string's password") && !fromURL.contains("S3cret"), "\(fromURL)")
        // A login refused for another reason keeps its advice.
        let noRole = Self.connectFailure("FATAL:  role \"nobody\" does not exist")
        #expect(Self.text(noRole, "run").contains("(password file, PGPASSFILE)"))
    }
}
