import Foundation
import Matching
import MatchingPostgres
import PostgresClient

/// A database setting from the environment that cannot be used as given (`PGCONNECT_TIMEOUT`, the password
/// file): a configuration error (exit 78), named with the problem. The command line's own flags are checked
/// when they are parsed (64); these come from the unit's environment file or credentials.
struct DatabaseSettingError: ClassifiedError, CustomStringConvertible {
    let description: String
    var failureKind: FailureKind { .configuration }
}

/// Opens connections as configured, with deadlines so that a silent network fails the run instead of
/// hanging it: connect_timeout, TCP keepalives and user timeout, and a statement_timeout.
struct Database {
    let conninfo: String?
    let options: [String: String]
    /// The server settings every session starts with (libpq's `options`), which the connection string must not
    /// replace: the worker's first, then the operator's (`options=` in the connection string, else `PGOPTIONS`),
    /// so that the operator's win for a setting both give.
    let sessionOptions: String
    /// The client-side deadline of every database call (see `DatabaseOptions.networkTimeout`).
    let callTimeout: Duration?

    /// `applicationName`: what `pg_stat_activity.application_name` shows for this process's
    /// connections, e.g. "matcher run 2/4", so that shards can be told apart (a DATABASE_URL that sets
    /// application_name wins, and so does `PGAPPNAME`, cli.md's `PG*` variables). The connect timeout is
    /// `--connect-timeout`, else `PGCONNECT_TIMEOUT`, else 10 s.
    init(
        _ settings: DatabaseOptions, applicationName: String = "matcher",
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        let fromEnvironment = environment["DATABASE_URL"]
        conninfo = settings.databaseURL ?? (fromEnvironment?.isEmpty == false ? fromEnvironment : nil)
        // TCP keepalives and user timeout, the same on both ends: the client's (libpq keywords) fail a run behind
        // a silent network; the server's (session settings, below) free the run's lock when its host died.
        let tcp = [
            ("keepalives_idle", "30"), ("keepalives_interval", "10"), ("keepalives_count", "3"),
            ("tcp_user_timeout", "60000"),
        ]
        var options = Dictionary(uniqueKeysWithValues: tcp)
        options["keepalives"] = "1"
        // Given to libpq as defaults: the connection string wins over them, and libpq reads the PG* variables
        // only for what is not given, so these two are left out when the operator's variable is set.
        if environment["PGAPPNAME"]?.isEmpty ?? true {
            options["application_name"] = String(applicationName.prefix(63))
        }
        if let seconds = settings.connectTimeout {
            options["connect_timeout"] = String(seconds)
        } else if environment["PGCONNECT_TIMEOUT"]?.isEmpty ?? true {
            options["connect_timeout"] = "10"
        } else {
            try DatabaseOptions.checkConnectTimeoutVariable(environment)
        }
        // The worker's statements are many and small (a unit's rows, a probe's chunk): JIT compiling one
        // costs more than it saves. With it on, the unit's query of waiting matches crossed the JIT cost
        // thresholds as filter_matches grew and spent 60-80 ms a call compiling (docs/decisions.md).
        var serverSettings: [String] = ["-c jit=off"]
        // Settings a role, a database or a managed service may change under the worker (review of session 33):
        // row-level security on the app's tables would show the worker only what a policy lets it see (no
        // blocks, no filters: blocked pairs notified, every filter's state swept as gone) and the run would
        // succeed; off, such a read fails (42501, exit 78, naming row-level security). And backslashes in the
        // worker's string literals are literal.
        serverSettings += ["-c row_security=off", "-c standard_conforming_strings=on"]
        // The server's side of the keepalives above: a session whose host died or whose network was cut holds
        // the run's lock until the server notices, by default about two hours on Linux, and until then every
        // retry and the next timer run find the lock held (exit 75) instead of completing the lost run.
        // Ignored on a Unix socket. (The server's names: `tcp_`-prefixed keepalives.)
        serverSettings += tcp.map { key, value in
            "-c \(key.hasPrefix("tcp_") ? key : "tcp_" + key)=\(value)"
        }
        if settings.statementTimeout > 0 {
            serverSettings.append("-c statement_timeout=\(settings.statementTimeout * 1000)")
        }
        callTimeout = settings.effectiveNetworkTimeout.map { .seconds($0) }
        if let seconds = settings.effectiveNetworkTimeout {
            // A client that vanished mid-transaction (behind a frozen proxy, say) must not hold its row
            // locks for long: the server ends such a session once the client's own deadline has passed.
            serverSettings.append("-c idle_in_transaction_session_timeout=\((seconds + 30) * 1000)")
        }
        let operators = conninfo.flatMap { PostgresConnection.setting("options", in: $0) } ?? environment["PGOPTIONS"]
        sessionOptions = (serverSettings + [operators].compactMap { $0 }.filter { !$0.isEmpty }).joined(separator: " ")
        // systemd's LoadCredential= (or any file named by MATCHER_DATABASE_PASSWORD_FILE) holds the password,
        // so it is never in the environment, the command line or a log.
        if let password = try Database.workerPassword(environment) { options["password"] = password.value }
        self.options = options
    }

    /// The worker's own password, and where it came from (for the line of a refused login: `PasswordSource`).
    struct WorkerPassword {
        let value: String
        /// Where the password was read, never the password: "MATCHER_DATABASE_PASSWORD_FILE /run/x".
        let source: String
    }

    /// The password in `MATCHER_DATABASE_PASSWORD_FILE`, else in systemd's credential `database-password`
    /// (`LoadCredential=`), else nil. A file the variable names but this process cannot read is a
    /// configuration error naming the file and why: read as "no password", it was a refused login that never
    /// said which file (a password file left root's own), or a login by another rule (`~/.pgpass`, `trust`).
    /// A credentials folder without that credential is a unit that loads others, and no error.
    static func workerPassword(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> WorkerPassword? {
        if let file = environment["MATCHER_DATABASE_PASSWORD_FILE"], !file.isEmpty {
            do {
                return WorkerPassword(
                    value: try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .newlines),
                    source: "MATCHER_DATABASE_PASSWORD_FILE \(file)")
            } catch {
                // Why, from the system: a file in a folder the worker cannot enter is "permission denied", not
                // "no such file" as a look at the path from outside says.
                let reason: String
                let descriptor = open(file, O_RDONLY)
                if descriptor < 0 {
                    reason = String(cString: strerror(errno)).lowercased()
                } else {
                    close(descriptor)
                    var isFolder: ObjCBool = false
                    _ = FileManager.default.fileExists(atPath: file, isDirectory: &isFolder)
                    reason = isFolder.boolValue ? "a folder, not a file" : "not UTF-8 text"
                }
                throw DatabaseSettingError(
                    description: "MATCHER_DATABASE_PASSWORD_FILE \(file) cannot be read (\(reason)): give the "
                        + "worker's user read access, or unset the variable")
            }
        }
        if let dir = environment["CREDENTIALS_DIRECTORY"], !dir.isEmpty,
            let text = try? String(contentsOfFile: dir + "/database-password", encoding: .utf8)
        {
            return WorkerPassword(
                value: text.trimmingCharacters(in: .newlines), source: "the credential \(dir)/database-password")
        }
        return nil
    }

    func connect() throws -> PostgresConnection {
        let connection = try PostgresConnection(conninfo, options: options, overriding: ["options": sessionOptions])
        connection.callTimeout = callTimeout
        // A role's or database's idle_session_timeout (PostgreSQL 14+; not a startup option, which 13 refuses)
        // ended a connection the run left idle through a phase (the main one during the forget phase, a writer
        // during the digests' reads): the run failed at its next statement (review of session 33). And unless the
        // operator chose otherwise, the server checks every 10 s that the client is still there while a statement
        // runs: a worker killed, or aborted by a second signal (which cancels the main connection's statement only),
        // no longer leaves another connection's statement running, its rows locked, until it ends by itself.
        do {
            try connection.query(
                """
                SELECT set_config('idle_session_timeout', '0', false)
                WHERE current_setting('server_version_num')::int >= 140000
                """)
            do {
                try connection.query(
                    """
                    SELECT set_config('client_connection_check_interval', '10s', false)
                    WHERE current_setting('server_version_num')::int >= 140000
                      AND current_setting('client_connection_check_interval') = '0'
                    """)
            } catch let error as PostgresError where error.sqlState == "22023" {
                // A platform where the server cannot tell a closed socket (Windows; 14 on macOS, the BSDs): left off.
            }
        } catch {
            connection.close()
            throw error
        }
        return connection
    }

    /// `verifiesSchemaUnderRunLock`: the run lock, once taken, checks the schema's version mark again (`run` and
    /// `backfill`, which checked it before: a `matcher migrate` begun in between is refused or seen).
    func store(
        writeConnections: Int = PostgresMatchingStore.defaultWriteConnections, verifiesSchemaUnderRunLock: Bool = false
    ) throws -> PostgresMatchingStore {
        let database = self
        return PostgresMatchingStore(
            connection: try connect(), writeConnections: writeConnections,
            faultPoints: FaultInjection.storeFaultPoints, verifiesSchemaUnderRunLock: verifiesSchemaUnderRunLock
        ) {
            try database.connect()
        }
    }
}

/// What the failure line of a login refused for want of a password says about the password (review against a real
/// server): "fe_sendauth: no password supplied" named neither the password file libpq would have read nor why it
/// gave none (a `PGPASSFILE` of mode 0644, which libpq ignores with a warning, read as "check the password").
/// libpq takes the first of: the connection string's password, the worker's own (`Database.workerPassword`), then
/// `PGPASSWORD`, then its password file (`passfile=` in the connection string, else `PGPASSFILE`, else
/// `~/.pgpass`), whose line for the login it uses only when the file is a plain file that no group or other may
/// read or write. Nothing is refused up front: a login the server trusts needs no password at all. Never the
/// password itself, only where it came from.
enum PasswordSource {
    /// For a login that sent no password (`sent` false): which password file libpq would have read and why it gave
    /// none. For one that sent a password the server refused: where that password came from.
    static func note(
        sent: Bool, conninfo: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        home: () -> String? = PasswordSource.homeDirectory,
        libraryVersion: Int = PostgresConnection.libraryVersion,
        readError: (String) -> Int32? = PasswordSource.readError
    ) -> String {
        let file = passwordFile(
            conninfo: conninfo, environment: environment, home: home, libraryVersion: libraryVersion)
        if sent {
            let source: String
            if let conninfo, PostgresConnection.setting("password", in: conninfo)?.isEmpty == false {
                source = "the connection string's password"
            } else if let worker = try? Database.workerPassword(environment) {
                source = worker.source
            } else if environment["PGPASSWORD"]?.isEmpty == false {
                source = "PGPASSWORD"
            } else if let file {
                source = "the password file \(file.path) (\(file.namedBy))"
            } else {
                return "the password sent was refused: check the user, database and password"
            }
            return "the password sent came from \(source): check it, and the user and database"
        }
        guard let file else {
            return "no password was sent, and libpq found no password file (no home folder for ~/.pgpass): "
                + "give MATCHER_DATABASE_PASSWORD_FILE or PGPASSFILE"
        }
        let named = "the password file \(file.path) (\(file.namedBy))"
        return "no password was sent: " + problem(with: named, at: file.path, readError: readError)
    }

    /// Why libpq took no password from the file at `path` (`named` says which): its own checks, in its order.
    static func problem(with named: String, at path: String, readError: (String) -> Int32?) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let error = errno
            if error == ENOENT {
                return "\(named) does not exist: create it (mode 0600, a line host:port:database:user:password), "
                    + "or give MATCHER_DATABASE_PASSWORD_FILE"
            }
            return "\(named) cannot be read by this user (\(reason(error))): let the worker's user reach it"
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            return "libpq ignores \(named): it is not a plain file"
        }
        let mode = info.st_mode & 0o777
        if mode & 0o077 != 0 {
            return "libpq ignores \(named): its mode 0\(String(mode, radix: 8)) lets group or others in; chmod 0600 it "
                + "(owned by the worker's user)"
        }
        if let error = readError(path) {
            return "\(named) cannot be read by this user (\(reason(error))): make the worker's user its owner, "
                + "mode 0600"
        }
        return "\(named) has no line for this host, port, database and user "
            + "(host:port:database:user:password, * for any)"
    }

    /// The file libpq reads: `passfile=` in the connection string, else `PGPASSFILE`, else `~/.pgpass`; nil when
    /// there is no home to look in. libpq's home (`pqGetHomeDirectory`) is, from libpq 15, `HOME` when set and not
    /// empty, else the effective user's entry in the password database; before 15, that entry only, whatever
    /// `HOME` says. Checked against the libpq 15.18 this is built with (review of session 35): with `HOME` set to
    /// a folder whose `.pgpass` holds the login's line, it sends that password (`OperationsTests`).
    static func passwordFile(
        conninfo: String?, environment: [String: String], home: () -> String?,
        libraryVersion: Int = PostgresConnection.libraryVersion
    ) -> (path: String, namedBy: String)? {
        if let conninfo, let path = PostgresConnection.setting("passfile", in: conninfo), !path.isEmpty {
            return (path, "passfile= in the connection string")
        }
        if let path = environment["PGPASSFILE"], !path.isEmpty { return (path, "PGPASSFILE") }
        let fromEnvironment = libraryVersion >= 150000 ? environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } : nil
        if let folder = fromEnvironment ?? home() {
            return ((folder.hasSuffix("/") ? folder : folder + "/") + ".pgpass", "libpq's default, ~/.pgpass")
        }
        return nil
    }

    /// The user's home folder from the password database.
    static func homeDirectory() -> String? {
        guard let entry = getpwuid(geteuid()), let folder = entry.pointee.pw_dir else { return nil }
        return String(cString: folder)
    }

    /// Why this process cannot open `path` for reading (an errno), or nil when it can.
    static func readError(_ path: String) -> Int32? {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return errno }
        close(descriptor)
        return nil
    }

    private static func reason(_ error: Int32) -> String { String(cString: strerror(error)).lowercased() }
}
