import Foundation
import PostgresClient

/// A fresh, uniquely named, empty database on the test server, dropped (`WITH (FORCE)`) when the
/// object is released. Keep it alive while the test uses it (a `let` in the test does).
///
/// The server is `MATCHER_TEST_DATABASE_URL` (a libpq conninfo for a role that may CREATE DATABASE)
/// or, when that is unset, the private server `scripts/pg start` starts and prints.
public final class TestDatabase: Sendable {
    public let name: String
    /// A libpq keyword/value connection string for this database.
    public let conninfo: String

    private init(name: String, conninfo: String) {
        self.name = name
        self.conninfo = conninfo
    }

    /// Creates an empty database (a copy of template1) named after `label` (the test's name).
    public static func create(_ label: String = #function) throws -> TestDatabase {
        try create(label, template: nil)
    }

    /// Creates a database as a copy of `template` (for example an already migrated database),
    /// or of template1 when nil. Retries while another session is still connected to the template.
    public static func create(_ label: String = #function, template: String?) throws -> TestDatabase {
        let admin = try adminConninfo
        let name = databaseName(for: label)
        var sql = "CREATE DATABASE \(quoteIdentifier(name))"
        if let template { sql += " TEMPLATE \(quoteIdentifier(template))" }
        let connection = try PostgresConnection(admin, options: ["application_name": "matcher-tests"])
        defer { connection.close() }
        var attempt = 0
        while true {
            do {
                try connection.execute(sql)
                break
            } catch let error as PostgresError where error.sqlState == "55006" && attempt < 50 {
                // "source database is being accessed by other users"
                attempt += 1
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        return TestDatabase(
            name: name, conninfo: try PostgresConnection.conninfo(admin, overriding: ["dbname": name]))
    }

    /// A new connection to this database.
    public func connect() throws -> PostgresConnection {
        try PostgresConnection(conninfo, options: ["application_name": "matcher-tests"])
    }

    deinit {
        do {
            let connection = try PostgresConnection(Self.adminConninfo, options: ["application_name": "matcher-tests"])
            defer { connection.close() }
            try connection.execute("DROP DATABASE IF EXISTS \(Self.quoteIdentifier(name)) WITH (FORCE)")
        } catch {
            FileHandle.standardError.write(Data("TestDatabase: could not drop \(name): \(error)\n".utf8))
        }
    }

    /// Whether the tests' role is a superuser (as on `scripts/pg`'s private server); nil when it cannot tell. A
    /// test that needs one is skipped only when the answer is no: when the server cannot be asked, it runs, and
    /// fails on the server it cannot reach.
    public static let isSuperuser: Bool? = {
        guard let connection = try? PostgresConnection(adminConninfo) else { return nil }
        defer { connection.close() }
        return try? connection.query("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").rows.first?
            .bool(0)
    }()

    /// Whether the server asks the role `matcher_password_probe` for a password over its Unix socket, as
    /// `scripts/pg` makes the private server do (`pg_hba_file_rules`, which a superuser reads); nil when it cannot
    /// tell, as `isSuperuser`.
    public static let asksProbeRoleForPassword: Bool? = {
        guard let superuser = isSuperuser else { return nil }
        guard superuser else { return false }
        guard let connection = try? PostgresConnection(adminConninfo) else { return nil }
        defer { connection.close() }
        return try? connection.query(
            """
            SELECT EXISTS (SELECT 1 FROM pg_hba_file_rules WHERE type = 'local'
                           AND 'matcher_password_probe' = ANY (user_name) AND auth_method = 'scram-sha-256')
            """
        ).rows.first?.bool(0)
    }()

    /// The connection string of the server's maintenance database, for a role that may create databases.
    public static var adminConninfo: String {
        get throws { try resolvedAdminConninfo.get() }
    }

    /// Resolved once per process (Swift Testing runs tests in parallel; `static let` is initialised once).
    private static let resolvedAdminConninfo: Result<String, TestDatabaseError> = Result {
        () throws(TestDatabaseError) -> String in
        if let url = ProcessInfo.processInfo.environment["MATCHER_TEST_DATABASE_URL"], !url.isEmpty {
            return url
        }
        return try startPrivateServer()
    }

    /// Runs `<repo>/scripts/pg start` and returns the connection string it prints last.
    private static func startPrivateServer() throws(TestDatabaseError) -> String {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let script = root.appendingPathComponent("scripts/pg")
        let process = Process()
        process.executableURL = script
        process.arguments = ["start"]
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw TestDatabaseError(message: "cannot run \(script.path): \(error)")
        }
        // Read before waiting so that a full pipe cannot block the script.
        let stdout = output.fileHandleForReading.readDataToEndOfFile()
        let stderr = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let lines = String(decoding: stdout, as: UTF8.self).split(whereSeparator: \.isNewline)
        guard process.terminationStatus == 0, let conninfo = lines.last.map(String.init), !conninfo.isEmpty else {
            throw TestDatabaseError(
                message: "\(script.path) start failed (status \(process.terminationStatus)): "
                    + String(decoding: stderr, as: UTF8.self))
        }
        return conninfo
    }

    /// `t_<label>_<random hex>`: lowercase letters, digits and underscores, under 63 bytes.
    static func databaseName(for label: String) -> String {
        var sanitized = ""
        for scalar in label.lowercased().unicodeScalars {
            if ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) {
                sanitized.unicodeScalars.append(scalar)
            } else if !sanitized.isEmpty, !sanitized.hasSuffix("_") {
                sanitized += "_"
            }
            if sanitized.count >= 32 { break }
        }
        while sanitized.hasSuffix("_") { sanitized.removeLast() }
        let random = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let suffix = String(repeating: "0", count: 16 - random.count) + random
        return sanitized.isEmpty ? "t_\(suffix)" : "t_\(sanitized)_\(suffix)"
    }

    static func quoteIdentifier(_ identifier: String) -> String {
        "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

public struct TestDatabaseError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }
}
