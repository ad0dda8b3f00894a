import Foundation
import PostgresClient
import PostgresTestSupport
import Testing

struct Failure: Error, Equatable {
    let reason: String
}

@Suite("Connections, errors and transactions")
struct ConnectionTests {
    @Test func connectsAndDescribesTheEndpoint() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        #expect(connection.isOpen)
        #expect(connection.isHealthy)
        #expect(connection.serverVersion >= 150_000)
        #expect(connection.backendPID > 0)
        #expect(connection.endpointDescription.contains("dbname=\(db.name)"))
        #expect(connection.endpointDescription.contains("port="))
        let pid = try connection.query("SELECT pg_backend_pid()").rows[0].int32(0)
        #expect(pid == connection.backendPID)
        let encoding = try connection.query("SHOW client_encoding").rows[0].string(0)
        #expect(encoding == "UTF8")
    }

    @Test func optionsAreDefaultsThatConninfoOverrides() throws {
        let db = try TestDatabase.create()
        let fromOptions = try PostgresConnection(db.conninfo, options: ["application_name": "from-options"])
        #expect(try fromOptions.query("SHOW application_name").rows[0].string(0) == "from-options")

        let overridden = try PostgresConnection(
            PostgresConnection.conninfo(db.conninfo, overriding: ["application_name": "from-conninfo"]),
            options: ["application_name": "from-options", "options": "-c statement_timeout=1234"])
        #expect(try overridden.query("SHOW application_name").rows[0].string(0) == "from-conninfo")
        #expect(try overridden.query("SHOW statement_timeout").rows[0].string(0) == "1234ms")

        // A database in the options applies when conninfo names none.
        let admin = try TestDatabase.adminConninfo
        let withoutDatabase = try PostgresConnection.conninfo(admin, overriding: ["dbname": ""])
        let defaulted = try PostgresConnection(withoutDatabase, options: ["dbname": db.name])
        #expect(try defaulted.query("SELECT current_database()").rows[0].string(0) == db.name)
    }

    @Test func conninfoOverridingQuotesValues() throws {
        let text = try PostgresConnection.conninfo(
            "host=/tmp/x dbname=a", overriding: ["dbname": "it's b", "user": "u"])
        #expect(text == #"dbname='it\'s b' host='/tmp/x' user='u'"#)
        let fromURI = try PostgresConnection.conninfo("postgresql://me@localhost:6543/base", overriding: [:])
        #expect(fromURI == "user='me' dbname='base' host='localhost' port='6543'")
        #expect(throws: PostgresError.self) { try PostgresConnection.conninfo("host=x nonsense", overriding: [:]) }
    }

    @Test func syntaxErrorHasSqlState42601() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let simple = #expect(throws: PostgresError.self) { try connection.execute("SELEC 1") }
        #expect(simple?.kind == .server)
        #expect(simple?.sqlState == "42601")
        #expect(simple?.description.hasPrefix("ERROR 42601: syntax error") == true)
        let extended = #expect(throws: PostgresError.self) { try connection.query("SELECT FROM WHERE $1", [.int4(1)]) }
        #expect(extended?.sqlState == "42601")
        #expect(try connection.query("SELECT 1").rows[0].int32(0) == 1)
    }

    @Test func duplicateKeyHasSqlState23505WithDetail() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute("CREATE TABLE t (id bigint PRIMARY KEY)")
        try connection.query("INSERT INTO t VALUES ($1)", [.int8(1)])
        let error = #expect(throws: PostgresError.self) {
            try connection.query("INSERT INTO t VALUES ($1)", [.int8(1)])
        }
        #expect(error?.sqlState == "23505")
        #expect(error?.isUniqueViolation == true)
        #expect(error?.detail == "Key (id)=(1) already exists.")
        #expect(
            error?.description
                == #"ERROR 23505: duplicate key value violates unique constraint "t_pkey" (detail: Key (id)=(1) already exists.)"#
        )
    }

    @Test(arguments: [
        "host=/nonexistent/socket/dir port=5432 dbname=nodb user=someone password=s3cret-value",
        "host=127.0.0.1 port=1 dbname=nodb user=someone password=s3cret-value connect_timeout=5",
        "postgresql://someone:s3cret-value@127.0.0.1:1/nodb?connect_timeout=5",
    ])
    func badConnectionStringGivesAClearError(_ conninfo: String) throws {
        let error = #expect(throws: PostgresError.self) { try PostgresConnection(conninfo) }
        let description = try #require(error?.description)
        #expect(error?.kind == .connection)
        #expect(description.hasPrefix("connection error: could not connect to host="))
        #expect(description.contains("dbname=nodb"))
        #expect(description.contains("127.0.0.1") || description.contains("/nonexistent/socket/dir"))
        #expect(description.contains("port=1") || description.contains("port=5432"))
        #expect(!description.contains("s3cret-value"))
        #expect(!description.contains("\n"))
    }

    @Test func malformedConnectionStringNeverShowsThePassword() throws {
        for conninfo in ["host=/x password s3cret-value", "password='s3cret-value", "bogus=1 password=s3cret-value"] {
            let error = #expect(throws: PostgresError.self) { try PostgresConnection(conninfo) }
            #expect(error?.kind == .connection)
            #expect(error?.description.hasPrefix("connection error: invalid connection string: ") == true)
            #expect(error?.description.contains("s3cret-value") == false, "\(error?.description ?? "")")
        }
        let error = #expect(throws: PostgresError.self) {
            try PostgresConnection("host=/nonexistent", options: ["password": "s3cret-value"])
        }
        #expect(error?.description.contains("s3cret-value") == false)
    }

    /// Found by review in session 23: a URI with its scheme mistyped or missing is a database name to libpq,
    /// quoted whole in its errors; a password with spaces, not quoted, has its second word quoted by libpq's
    /// parse error; and pieces of a password replaced before the whole of it left the rest showing.
    @Test(arguments: [
        "postgresql:/alice:s3cretpw@127.0.0.1/app",
        "alice:s3cretpw@127.0.0.1:1/app",
        "postgres:alice:s3cretpw@localhost/app",
    ])
    func aURILibpqDoesNotTakeForOneIsRefusedWithoutEchoingIt(_ conninfo: String) throws {
        let error = #expect(throws: PostgresError.self) { try PostgresConnection(conninfo) }
        let description = try #require(error?.description)
        #expect(description.contains("looks like a URI"), "\(description)")
        #expect(!description.contains("s3cretpw") && !description.contains("alice"), "\(description)")
    }

    /// The server answers a URI-looking string with a message that quotes it cut to 63 bytes, a piece of the
    /// password no mask matches, in the server's language: no reason is shown, the note says what to check.
    @Test func theServersAnswerToAURILookingStringIsNotShown() throws {
        let database = try TestDatabase.create()
        var server: [String: String] = [:]
        for key in ["host", "port", "user"] {
            server[key] = PostgresConnection.setting(key, in: database.conninfo)
        }
        #expect(server["host"] != nil, "the test reaches the test server")
        let password = "correct-horse-battery-staple-correct-horse-battery-staple-123456"
        let reached = server
        let error = #expect(throws: PostgresError.self) {
            try PostgresConnection("matcher:\(password)@db/matcher", options: reached)
        }
        let description = try #require(error?.description)
        #expect(description.contains("looks like a URI") && description.contains("not shown"), "\(description)")
        #expect(description.contains("the server refused it: database does not exist"), "\(description)")
        #expect(!description.contains("correct-horse"), "\(description)")
    }

    /// A legitimate database name with `@` is no connection string error: a failure to reach the server stays one
    /// (exit 69, retried), with the name masked.
    @Test func aDatabaseNameWithAnAtSignIsNotAConfigurationError() throws {
        let error = #expect(throws: PostgresError.self) {
            try PostgresConnection("reports@eu", options: ["host": "/nonexistent/socket/dir"])
        }
        let description = try #require(error?.description)
        #expect(description.hasPrefix("connection error: could not connect to host="), "\(description)")
        #expect(!description.contains("reports@eu"), "\(description)")
    }

    /// libpq's parse errors quote pieces of the string; a misspelled keyword is not echoed, but suggested.
    @Test func aMisspelledKeywordIsSuggestedAndAQuotedPieceOfAPasswordIsNot() throws {
        let typo = #expect(throws: PostgresError.self) { try PostgresConnection("host=/nonexistent sslmod=require") }
        #expect(typo?.description.contains("did you mean sslmode?") == true, "\(typo?.description ?? "")")
        let quoted = #expect(throws: PostgresError.self) {
            try PostgresConnection(#"host=/nonexistent password=horse ba"ttery staple"#)
        }
        let description = try #require(quoted?.description)
        for piece in ["horse", #"ba"t"#, "ttery", "staple"] { #expect(!description.contains(piece), "\(description)") }
    }

    @Test func aPasswordWithSpacesNotQuotedShowsNoneOfItsWords() throws {
        let conninfo = "host=/nonexistent password=correct horse battery staple user=someone"
        let error = #expect(throws: PostgresError.self) { try PostgresConnection(conninfo) }
        let description = try #require(error?.description)
        #expect(description.contains("invalid connection string: "), "\(description)")
        for word in ["correct", "horse", "battery", "staple"] {
            #expect(!description.contains(word), "\(description)")
        }
        let words = PostgresConnection.redactingSecrets(
            #"missing "=" after "horse" in connection info string"#, conninfo: conninfo)
        #expect(!words.contains("horse"), "\(words)")
        let pieces = PostgresConnection.redactingSecrets(
            "could not connect: s3cret-value:pieces@x", conninfo: "postgresql://u:s3cret-value:pieces@db/x")
        #expect(!pieces.contains("s3cret") && !pieces.contains("pieces"), "\(pieces)")
    }

    /// The client decodes every text as UTF-8; a `client_encoding` in the connection string does not change it.
    @Test func theClientEncodingIsUTF8WhateverTheConnectionStringSays() throws {
        let database = try TestDatabase.create()
        let connection = try PostgresConnection(database.conninfo + " client_encoding=SJIS")
        defer { connection.close() }
        #expect(try connection.query("SHOW client_encoding").rows[0].string(0) == "UTF8")
        #expect(try connection.query("SELECT 'お見合い'::text").rows[0].string(0) == "お見合い")
    }

    @Test func transactionCommitsOnSuccess() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let other = try db.connect()
        try connection.execute("CREATE TABLE t (id int PRIMARY KEY)")
        let value = try connection.transaction { tx in
            try tx.query("INSERT INTO t VALUES (1)")
            #expect(tx.isInTransaction)
            #expect(try other.query("SELECT count(*) FROM t").rows[0].int64(0) == 0)
            return 42
        }
        #expect(value == 42)
        #expect(!connection.isInTransaction)
        #expect(try other.query("SELECT count(*) FROM t").rows[0].int64(0) == 1)
    }

    @Test func transactionRollsBackOnError() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute("CREATE TABLE t (id int PRIMARY KEY)")
        #expect(throws: Failure(reason: "body failed")) {
            try connection.transaction { tx in
                try tx.query("INSERT INTO t VALUES (1)")
                throw Failure(reason: "body failed")
            }
        }
        #expect(!connection.isInTransaction)
        #expect(try connection.query("SELECT count(*) FROM t").rows[0].int64(0) == 0)

        // A server error in the body rolls back too and surfaces as itself.
        let error = #expect(throws: PostgresError.self) {
            try connection.transaction { tx in
                try tx.query("INSERT INTO t VALUES (2)")
                try tx.query("INSERT INTO t VALUES (2)")
            }
        }
        #expect(error?.sqlState == "23505")
        #expect(try connection.query("SELECT count(*) FROM t").rows[0].int64(0) == 0)
    }

    @Test func swallowedErrorInsideTransactionFailsTheCommit() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute("CREATE TABLE t (id int PRIMARY KEY)")
        let error = #expect(throws: PostgresError.self) {
            try connection.transaction { tx in
                try tx.query("INSERT INTO t VALUES (1)")
                _ = try? tx.query("SELECT 1/0")
            }
        }
        #expect(error?.sqlState == "25P02")
        #expect(try connection.query("SELECT count(*) FROM t").rows[0].int64(0) == 0)
    }

    /// A result's rows are views into one array of values: each row reads its own values, by position and by
    /// name, NULLs included; a column past the row's end is a usage error; a result without columns has rows.
    @Test func rowsReadTheirOwnValues() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let result = try connection.query(
            """
            SELECT g AS id, CASE WHEN g % 2 = 0 THEN NULL ELSE g * 10 END AS tens, 'r' || g AS name
            FROM generate_series(1, 5) g ORDER BY g
            """)
        #expect(result.rows.count == 5)
        let ids = try result.rows.map { try $0.int64(0) }
        let tens = try result.rows.map { try $0.optionalInt64("tens") }
        let names = try result.rows.map { try $0.string(2) }
        #expect(ids == [1, 2, 3, 4, 5])
        #expect(tens == [10, nil, 30, nil, 50])
        #expect(names == ["r1", "r2", "r3", "r4", "r5"])
        let last = try #require(result.rows.last)
        #expect(last.count == 3 && last.columns == ["id", "tens", "name"])
        #expect(last.values == [.int4(5), .int4(50), .text("r5")])
        let error = #expect(throws: PostgresError.self) { try last.int64(3) }
        #expect(error?.kind == .usage)
        let columnless = try connection.query("SELECT FROM generate_series(1, 3)")
        #expect(columnless.rows.count == 3 && columnless.rows.allSatisfy { $0.values.isEmpty })
    }

    @Test func nestedTransactionIsAUsageError() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let error = #expect(throws: PostgresError.self) {
            try connection.transaction { tx in try tx.transaction { _ in } }
        }
        #expect(error?.kind == .usage)
        #expect(!connection.isInTransaction)
    }

    @Test func repeatableReadSeesASnapshot() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let other = try db.connect()
        try connection.execute("CREATE TABLE t (id int); INSERT INTO t VALUES (1)")
        let counts = try connection.transaction(isolation: .repeatableRead) { tx -> [Int64] in
            #expect(try tx.query("SHOW transaction_isolation").rows[0].string(0) == "repeatable read")
            let before = try tx.query("SELECT count(*) FROM t").rows[0].int64(0)
            try other.execute("INSERT INTO t VALUES (2)")
            let after = try tx.query("SELECT count(*) FROM t").rows[0].int64(0)
            return [before, after]
        }
        #expect(counts == [1, 1])
        #expect(try connection.query("SELECT count(*) FROM t").rows[0].int64(0) == 2)
        let level = try connection.transaction(isolation: .serializable) { tx in
            try tx.query("SHOW transaction_isolation").rows[0].string(0)
        }
        #expect(level == "serializable")
    }

    @Test func cancelStopsARunningStatement() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let outcome = Shared<PostgresError?>(nil)
        let done = DispatchSemaphore(value: 0)
        let start = ContinuousClock.now
        Thread.detachNewThread {
            do {
                try connection.query("SELECT pg_sleep(10)")
            } catch let error as PostgresError {
                outcome.set(error)
            } catch {}
            done.signal()
        }
        // A cancel that arrives before the statement starts does nothing: repeat until it ends.
        var finished = false
        while !finished, ContinuousClock.now - start < .seconds(9) {
            Thread.sleep(forTimeInterval: 0.2)
            connection.cancelCurrentStatement()
            finished = done.wait(timeout: .now() + 0.2) == .success
        }
        if !finished { done.wait() }
        #expect(ContinuousClock.now - start < .seconds(9))
        let error = try #require(outcome.get())
        #expect(error.sqlState == "57014")
        #expect(error.isQueryCanceled)
        #expect(try connection.query("SELECT 1").rows[0].int32(0) == 1)
    }

    @Test func connectionIsSafeToShareBetweenThreads() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let failures = Shared(0)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for i in 0..<25 {
                do {
                    let row = try connection.query("SELECT $1::int8 * 2", [.int8(Int64(worker * 100 + i))]).rows[0]
                    if try row.int64(0) != Int64(worker * 100 + i) * 2 { failures.update { $0 += 1 } }
                } catch {
                    failures.update { $0 += 1 }
                }
            }
        }
        #expect(failures.get() == 0)
    }

    @Test func noticesAreKeptNotPrinted() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute("DO $$ BEGIN RAISE NOTICE 'hello %', 42; END $$")
        #expect(connection.notices.last == "NOTICE:  hello 42")
        for i in 0..<40 { try connection.query("DO $$ BEGIN RAISE NOTICE 'n%', \(i); END $$") }
        #expect(connection.notices.count == 32)
        #expect(connection.notices.last == "NOTICE:  n39")
    }

    @Test func executeRunsSeveralStatementsAndQueryCountsRows() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try connection.execute(
            """
            CREATE TABLE t (id int PRIMARY KEY, name text);
            INSERT INTO t SELECT g, 'n' || g FROM generate_series(1, 10) g;
            """)
        let updated = try connection.query("UPDATE t SET name = $1 WHERE id <= $2", [.text("x"), .int4(4)])
        #expect(updated.affectedRows == 4)
        #expect(updated.rows.isEmpty)
        let selected = try connection.query(
            "SELECT id, name FROM t WHERE name = $1 ORDER BY id", ["x"].map(PostgresValue.text))
        #expect(selected.columns == ["id", "name"])
        #expect(selected.columnTypes == [PostgresOID.int4, PostgresOID.text])
        #expect(try selected.rows.map { try $0.int32("id") } == [1, 2, 3, 4])
        #expect(selected.affectedRows == 4)
        let null = try connection.query(
            "SELECT $1::text IS NULL, $2::int IS NULL", [.null, PostgresValue(nil as Int32?)])
        #expect(null.rows[0].values == [.bool(true), .bool(true)])
        try connection.execute("")
    }

    @Test func terminatedBackendIsAConnectionError() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let other = try db.connect()
        try other.query("SELECT pg_terminate_backend($1)", [.int4(connection.backendPID)])
        let error = #expect(throws: PostgresError.self) { try connection.query("SELECT 1") }
        #expect(error?.kind == .connection)
        #expect(!connection.isHealthy)
        #expect(connection.isOpen)
    }

    @Test func closedConnectionIsAUsageError() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        connection.close()
        connection.close()
        #expect(!connection.isOpen)
        let error = #expect(throws: PostgresError.self) { try connection.query("SELECT 1") }
        #expect(error?.kind == .usage)
        connection.cancelCurrentStatement()
    }

    @Test func testDatabasesAreFreshAndDropped() throws {
        let admin = try PostgresConnection(TestDatabase.adminConninfo)
        var name = ""
        do {
            let db = try TestDatabase.create("Some Label/with: odd chars()")
            name = db.name
            #expect(name.hasPrefix("t_some_label_with_odd_chars_"))
            #expect(name.utf8.count < 63)
            #expect(name == name.lowercased())
            let connection = try db.connect()
            #expect(try connection.query("SELECT count(*) FROM pg_class WHERE relname = 'x'").rows[0].int64(0) == 0)
            try connection.execute("CREATE TABLE x (id int)")
            let copy = try TestDatabase.create(template: nil)
            #expect(copy.name != db.name)
            connection.close()
            let fromTemplate = try TestDatabase.create("templated", template: db.name)
            let templated = try fromTemplate.connect()
            #expect(try templated.query("SELECT count(*) FROM pg_class WHERE relname = 'x'").rows[0].int64(0) == 1)
        }
        let remaining = try admin.query("SELECT count(*) FROM pg_database WHERE datname = $1", [.text(name)])
        #expect(try remaining.rows[0].int64(0) == 0)
    }
}
