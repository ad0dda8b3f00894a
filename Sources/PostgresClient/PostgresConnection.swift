import CLibPQ
import Foundation

public enum IsolationLevel: Sendable {
    case readCommitted, repeatableRead, serializable

    var sql: String {
        switch self {
        case .readCommitted: return "READ COMMITTED"
        case .repeatableRead: return "REPEATABLE READ"
        case .serializable: return "SERIALIZABLE"
        }
    }
}

/// One libpq connection. Not used from two threads at once: every libpq call runs under a
/// recursive lock (a transaction body re-enters it); only `cancelCurrentStatement` bypasses it.
public final class PostgresConnection: @unchecked Sendable {
    /// The most whole seconds a server timeout setting takes (`statement_timeout`, `lock_timeout`, …: milliseconds
    /// in a 32-bit integer).
    public static let maximumTimeoutSeconds = 2_147_483

    private let lock = NSRecursiveLock()
    /// The PGconn; nil once closed. Guarded by `lock`.
    private var connection: OpaquePointer?

    private let cancelLock = NSLock()
    /// Created once after connecting (the backend's PID and key do not change). Guarded by `cancelLock`.
    private var cancelHandle: OpaquePointer?

    private let noticeStore = NoticeStore()
    let deadline = CallDeadline()

    /// How long one libpq call may wait without any data moving before the client gives up on the
    /// server (shuts the socket down and throws `.connection`); nil waits forever. Set it above the
    /// session's `statement_timeout`, so that the server's own timeout normally speaks first.
    public var callTimeout: Duration? {
        get { deadline.currentTimeout }
        set { deadline.setTimeout(newValue) }
    }

    /// "host=… port=… dbname=… user=…" of the server connected to; never a password.
    public let endpointDescription: String
    /// PQserverVersion, for example 150018 for 15.18.
    public let serverVersion: Int
    /// PQlibVersion: the libpq this process runs with, for example 150018 for 15.18.
    public static var libraryVersion: Int { Int(PQlibVersion()) }
    public let backendPID: Int32

    /// `conninfo`: a libpq keyword string ("host=/x dbname=y") or a postgresql:// URI; nil or "" uses
    /// libpq's defaults and PG* environment variables (~/.pgpass and PGPASSFILE included).
    /// `options`: extra libpq keywords used as defaults that `conninfo` overrides
    /// (e.g. ["connect_timeout": "10", "application_name": "matcher", "options": "-c statement_timeout=…"]).
    /// `overriding`: keywords that win over `conninfo` too.
    /// `client_encoding` is always UTF8, whatever the connection string says.
    /// A failed connect throws `.connection` naming host, port and database, never the password.
    public init(
        _ conninfo: String? = nil, options: [String: String] = [:], overriding: [String: String] = [:]
    )
        throws
    {
        let conninfo = conninfo ?? ""
        // Later keywords win, and with expand_dbname=1 the first "dbname" may be a whole
        // connection string: defaults first, then the options, then conninfo as "dbname".
        var keywords: [String] = []
        var values: [String] = []
        for (key, value) in options.sorted(by: { $0.key < $1.key }) where key != "dbname" {
            keywords.append(key)
            values.append(value)
        }
        if !conninfo.isEmpty {
            keywords.append("dbname")
            values.append(conninfo)
        }
        for (key, value) in overriding.sorted(by: { $0.key < $1.key }) where key != "dbname" {
            keywords.append(key)
            values.append(value)
        }
        // Last, so that it wins: every text this client sends is UTF-8 and every text it reads is decoded as
        // UTF-8, whatever `client_encoding` the connection string names.
        keywords.append("client_encoding")
        values.append("UTF8")
        // A database from `options` is a default too: a later, plain "dbname" that applies only
        // when conninfo names none.
        if let dbname = options["dbname"], !dbname.isEmpty,
            conninfo.isEmpty || !ConnectionString.namesDatabase(conninfo)
        {
            keywords.append("dbname")
            values.append(dbname)
        }

        let connection = withCStringArray(keywords) { keywordPointers in
            withCStringArray(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let connection else {
            throw PostgresError(kind: .connection, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            // A URI libpq does not take for one is read whole as a database name, password included: all of it
            // is masked, wherever libpq or the server quote it.
            let looksLikeURI = ConnectionString.unrecognizedURI(in: conninfo)
            let secrets =
                ConnectionString.secrets(of: connection) + ConnectionString.secrets(in: conninfo)
                + [options["password"]].compactMap { $0 }
                + (looksLikeURI == nil ? [] : [conninfo.trimmingCharacters(in: .whitespaces)])
            let reason = singleLine(String(cString: PQerrorMessage(connection)))
            // With no host, port or database, libpq failed before trying: the parameters are invalid.
            let parsed = [PQhost(connection), PQport(connection), PQdb(connection)].contains {
                $0.map { $0.pointee != 0 } ?? false
            }
            let message =
                if let misread = ConnectionString.unencodedUserInfo(in: conninfo) {
                    // libpq's own words would quote the misread password as a host or database.
                    "invalid connection string: \(misread)"
                } else if parsed, let hint = looksLikeURI {
                    // libpq's and the server's words may quote the database name, the server's cut to 63 bytes
                    // (a piece of the password no mask matches), and in the server's language: none is shown. A
                    // connection failure, retried like any (a legitimate name with `@` meets restarts too), unless
                    // the server was reached and refused the string (found by review in session 32: a string with
                    // no scheme was retried every 15 minutes); the note says what to check.
                    "could not connect to \(Self.describeEndpoint(connection)) (the reason is not shown: it may "
                        + "quote the string)\(Self.refusal(in: reason).map { "; the server refused it: \($0)" } ?? "")"
                        + "; note: \(hint)"
                } else if parsed {
                    "could not connect to \(Self.describeEndpoint(connection)): \(reason)"
                } else {
                    // Masked first (a fragment may hold a quote), then what is left of the string's own words.
                    "invalid connection string: "
                        + ConnectionString.withoutQuotedFragments(
                            ConnectionString.redact(reason, secrets: secrets), conninfo: conninfo)
                }
            let password: PostgresError.PasswordExchange? =
                if PQconnectionNeedsPassword(connection) == 1 {
                    .missing
                } else if PQconnectionUsedPassword(connection) == 1 {
                    .sent
                } else {
                    nil
                }
            PQfinish(connection)
            throw PostgresError(
                kind: .connection, message: ConnectionString.redact(message, secrets: secrets), password: password,
                reasonIsLocalized: reason.unicodeScalars.contains { !$0.isASCII })
        }

        self.connection = connection
        self.endpointDescription = Self.describeEndpoint(connection)
        self.serverVersion = Int(PQserverVersion(connection))
        self.backendPID = PQbackendPID(connection)
        self.cancelHandle = PQgetCancel(connection)
        // The store outlives the PGconn: both are released by this object, the PGconn first.
        PQsetNoticeProcessor(
            connection,
            { context, message in
                guard let context, let message else { return }
                Unmanaged<NoticeStore>.fromOpaque(context).takeUnretainedValue().append(String(cString: message))
            },
            Unmanaged.passUnretained(noticeStore).toOpaque())
    }

    deinit { close() }

    /// What the server said when it was reached and refused a connection, in words of its own that quote nothing
    /// of the string (an English server's; in another language the reason stays unknown): nil otherwise.
    static func refusal(in reason: String) -> String? {
        if reason.contains("database \""), reason.contains("\" does not exist") { return "database does not exist" }
        if reason.contains("role \""), reason.contains("\" does not exist") { return "role does not exist" }
        return [
            "password authentication failed", "no pg_hba.conf entry", "is not permitted to log in",
            "permission denied for database",
        ].first(where: reason.contains)
    }

    private static func describeEndpoint(_ connection: OpaquePointer) -> String {
        func text(_ value: UnsafeMutablePointer<CChar>?) -> String {
            guard let value else { return "?" }
            let string = String(cString: value)
            return string.isEmpty ? "?" : string
        }
        return "host=\(text(PQhost(connection))) port=\(text(PQport(connection))) "
            + "dbname=\(text(PQdb(connection))) user=\(text(PQuser(connection)))"
    }

    /// Closes the connection (PQfinish). Idempotent; deinit closes too.
    public func close() {
        lock.lock()
        defer { lock.unlock() }
        guard let connection else { return }
        self.connection = nil
        deadline.detach()
        cancelLock.lock()
        if let cancelHandle { PQfreeCancel(cancelHandle) }
        cancelHandle = nil
        cancelLock.unlock()
        PQfinish(connection)
    }

    public var isOpen: Bool {
        lock.lock()
        defer { lock.unlock() }
        return connection != nil
    }

    /// False once closed or when libpq has seen the connection break.
    public var isHealthy: Bool {
        lock.lock()
        defer { lock.unlock() }
        guard let connection else { return false }
        return PQstatus(connection) == CONNECTION_OK
    }

    /// True inside a transaction block (also an aborted one).
    public var isInTransaction: Bool {
        lock.lock()
        defer { lock.unlock() }
        guard let connection else { return false }
        let status = PQtransactionStatus(connection)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
    }

    /// The last few NOTICE/WARNING messages from the server (oldest first); they are not printed.
    public var notices: [String] {
        lock.lock()
        defer { lock.unlock() }
        return noticeStore.messages
    }

    /// Runs `body` with the open PGconn under the lock, within the call deadline.
    func withConnection<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        guard let connection else {
            throw PostgresError(kind: .usage, message: "the connection to \(endpointDescription) is closed")
        }
        deadline.attach(socket: PQsocket(connection))
        deadline.enter()
        defer { deadline.leave() }
        do {
            return try body(connection)
        } catch let error as PostgresError
            where deadline.hasTripped && (error.kind == .connection || error.kind == .copy)
        {
            let seconds = deadline.currentTimeout.map { "\($0.components.seconds) s" } ?? "too long"
            throw PostgresError(
                kind: .connection,
                message: "no answer from \(endpointDescription) for \(seconds) (network partition or stalled server); "
                    + "the client gave up on the connection",
                detail: error.message)
        }
    }

    /// Data moved during a long call (a COPY chunk): its deadline starts over.
    func madeProgress() { deadline.progress() }

    // MARK: - Statements

    /// Simple-protocol execution of one or more statements without parameters (DDL, migrations).
    public func execute(_ sql: String) throws {
        try withConnection { connection in
            let result = PQexec(connection, sql)
            defer { PQclear(result) }
            try check(result, connection)
        }
    }

    /// Extended protocol (PQexecParams): parameters typed with their OIDs and sent in binary,
    /// results requested in binary and decoded by column OID.
    @discardableResult
    public func query(_ sql: String, _ parameters: [PostgresValue] = []) throws -> PostgresResult {
        guard parameters.count <= Int(UInt16.max) else {
            throw PostgresError(kind: .usage, message: "\(parameters.count) parameters; at most 65535 are allowed")
        }
        // All values in one buffer; offsets (-1 for NULL) become pointers once it stops growing.
        var data: [UInt8] = []
        var offsets: [Int] = []
        var lengths: [Int32] = []
        var types: [UInt32] = []
        offsets.reserveCapacity(parameters.count)
        lengths.reserveCapacity(parameters.count)
        types.reserveCapacity(parameters.count)
        for (index, parameter) in parameters.enumerated() {
            types.append(parameter.oid)
            if parameter.isNull {
                offsets.append(-1)
                lengths.append(0)
                continue
            }
            let start = data.count
            BinaryEncoding.append(parameter, to: &data)
            guard let length = Int32(exactly: data.count - start) else {
                throw PostgresError(kind: .usage, message: "parameter $\(index + 1) is larger than 2 GiB")
            }
            offsets.append(start)
            lengths.append(length)
        }
        data.append(0)  // never empty, so that the base address exists
        let formats = [Int32](repeating: 1, count: parameters.count)

        return try withConnection { connection in
            let result = data.withUnsafeBufferPointer { buffer -> OpaquePointer? in
                let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
                let pointers: [UnsafePointer<CChar>?] = offsets.map { $0 < 0 ? nil : base + $0 }
                return PQexecParams(
                    connection, sql, Int32(parameters.count), types, pointers, lengths, formats, 1)
            }
            defer { PQclear(result) }
            try check(result, connection)
            return try PostgresResult(result!)
        }
    }

    /// BEGIN (with the isolation level) … COMMIT; ROLLBACK and rethrow if `body` throws.
    /// Other threads wait until the transaction ends. Nested calls throw `.usage`.
    public func transaction<T>(
        isolation: IsolationLevel = .readCommitted, _ body: (PostgresConnection) throws -> T
    ) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        if isInTransaction {
            throw PostgresError(
                kind: .usage, message: "transaction() inside a transaction; nested transactions are not supported")
        }
        try execute("BEGIN ISOLATION LEVEL \(isolation.sql)")
        let value: T
        do {
            value = try body(self)
        } catch {
            if isInTransaction { try? execute("ROLLBACK") }
            throw error
        }
        try withConnection { connection in
            let result = PQexec(connection, "COMMIT")
            defer { PQclear(result) }
            try check(result, connection)
            // COMMIT of a transaction in which a statement failed (and the error was caught) rolls back.
            if let status = PQcmdStatus(result), String(cString: status) == "ROLLBACK" {
                throw PostgresError(
                    kind: .server, sqlState: "25P02",
                    message: "the transaction was rolled back at COMMIT because a statement in it had failed")
            }
        }
        return value
    }

    /// Asks the server to cancel the statement in progress (PQcancel). Callable from any thread,
    /// also while another thread is inside `query`; the cancelled statement throws sqlState 57014.
    public func cancelCurrentStatement() {
        cancelLock.lock()
        defer { cancelLock.unlock() }
        guard let cancelHandle else { return }
        var errorBuffer = [CChar](repeating: 0, count: 256)
        _ = PQcancel(cancelHandle, &errorBuffer, Int32(errorBuffer.count))
    }

    // MARK: - Results and errors

    /// Throws for a missing or failed result. A COPY started by execute/query is ended first.
    func check(_ result: OpaquePointer?, _ connection: OpaquePointer) throws {
        guard let result else { throw connectionError(connection) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
            return
        case PGRES_COPY_IN:
            abortCopyIn(connection, reason: "use copyIn for COPY FROM STDIN")
            throw PostgresError(kind: .usage, message: "COPY FROM STDIN needs copyIn(_:_:)")
        case PGRES_COPY_OUT, PGRES_COPY_BOTH:
            drainCopyOut(connection)
            throw PostgresError(kind: .usage, message: "COPY TO STDOUT needs copyOut(_:_:)")
        default:
            throw Self.error(from: result, connection)
        }
    }

    static func error(from result: OpaquePointer, _ connection: OpaquePointer) -> PostgresError {
        func field(_ code: UInt8) -> String? {
            PQresultErrorField(result, Int32(code)).map { String(cString: $0) }
        }
        let sqlState = field(UInt8(ascii: "C"))
        var message = field(UInt8(ascii: "M")) ?? ""
        if message.isEmpty {
            message = singleLine(String(cString: PQresultErrorMessage(result)))
        }
        if message.isEmpty {
            message = singleLine(String(cString: PQerrorMessage(connection)))
        }
        // A broken connection ("server closed the connection unexpectedly", or a FATAL such as 57P01
        // from pg_terminate_backend) is a connection error: the caller must reconnect.
        let lost = PQstatus(connection) != CONNECTION_OK
        return PostgresError(
            kind: lost ? .connection : .server, sqlState: sqlState,
            message: message.isEmpty
                ? "unknown error (\(String(cString: PQresStatus(PQresultStatus(result)))))" : message,
            detail: field(UInt8(ascii: "D")), hint: field(UInt8(ascii: "H")),
            severity: field(UInt8(ascii: "V")))
    }

    func connectionError(_ connection: OpaquePointer) -> PostgresError {
        let message = singleLine(String(cString: PQerrorMessage(connection)))
        let kind: PostgresError.Kind = PQstatus(connection) == CONNECTION_OK ? .server : .connection
        return PostgresError(kind: kind, message: message.isEmpty ? "no result from libpq" : message)
    }

    /// Collects the results that end a COPY (or any command); returns the first error.
    func finishResults(_ connection: OpaquePointer) -> PostgresError? {
        var firstError: PostgresError?
        while let result = PQgetResult(connection) {
            defer { PQclear(result) }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
                continue
            case PGRES_COPY_IN:
                abortCopyIn(connection, reason: "unexpected COPY FROM STDIN")
                firstError = firstError ?? PostgresError(kind: .copy, message: "unexpected COPY FROM STDIN")
            case PGRES_COPY_OUT, PGRES_COPY_BOTH:
                drainCopyOut(connection)
                firstError = firstError ?? PostgresError(kind: .copy, message: "unexpected COPY TO STDOUT")
            default:
                firstError = firstError ?? Self.error(from: result, connection)
            }
        }
        return firstError
    }

    /// Ends a COPY FROM STDIN with an error (the server rolls the COPY back) and discards its results.
    func abortCopyIn(_ connection: OpaquePointer, reason: String) {
        _ = PQputCopyEnd(connection, String(reason.prefix(200)))
        _ = finishResults(connection)
    }

    /// Reads and discards the rest of a COPY TO STDOUT, then its results.
    func drainCopyOut(_ connection: OpaquePointer) {
        while true {
            var buffer: UnsafeMutablePointer<CChar>?
            let length = PQgetCopyData(connection, &buffer, 0)
            if let buffer { PQfreemem(buffer) }
            if length < 0 { break }
        }
        _ = finishResults(connection)
    }
}

/// The last few notices of a connection; appended to by libpq's notice processor, which runs
/// inside libpq calls, that is under the connection's lock.
private final class NoticeStore: @unchecked Sendable {
    static let capacity = 32
    private(set) var messages: [String] = []

    func append(_ message: String) {
        if messages.count == Self.capacity { messages.removeFirst() }
        messages.append(message.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// Calls `body` with a NULL-terminated array of C strings.
private func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
