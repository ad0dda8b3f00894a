import PostgresClient

/// The server's durability and memory settings, printed in a benchmark's header: a throwaway test server
/// (`scripts/pg`'s `MATCHER_PG_THROWAWAY`) runs without fsync or full-page writes, whose times are not a
/// production server's.
enum ServerSettings {
    static let names = ["fsync", "full_page_writes", "synchronous_commit", "wal_compression", "shared_buffers"]

    /// One line: `server: PostgreSQL <server_version>, fsync on, full_page_writes on, ...`.
    static func line(_ connection: PostgresConnection) throws -> String {
        let row = try connection.query(
            "SELECT " + (["server_version"] + names).map { "current_setting('\($0)')" }.joined(separator: ", ")
        ).rows[0]
        let values = try (0...names.count).map { try row.string($0) }
        return "server: PostgreSQL \(values[0]), "
            + zip(names, values.dropFirst()).map { "\($0) \($1)" }.joined(separator: ", ")
    }

    /// `line` on a new connection to `conninfo`.
    static func line(_ conninfo: String) throws -> String {
        let connection = try PostgresConnection(conninfo)
        defer { connection.close() }
        return try line(connection)
    }
}
