import Foundation
import MatchingPostgres
import PostgresClient

/// Databases with every migration of `sql/` applied, copied from a template that is migrated once and
/// kept on the test server under a name carrying the migrations' checksum (so an edited migration gets
/// a new template).
public enum MigratedDatabase {
    /// The repository's `sql/` folder.
    public static let sqlDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("sql")

    public static func create(_ label: String = #function) throws -> TestDatabase {
        try TestDatabase.create(label, template: try template.get())
    }

    private static let template: Result<String, any Error> = Result {
        let migrations = try MigrationRunner.load(from: sqlDirectory)
        // The change capture is generated from the catalogue and installed with the migrations: part of the name;
        // so is the version mark `apply` leaves (`MigrationRunner.verifyCurrent`), absent from older templates.
        let digest =
            migrations.map(\.checksum).joined(separator: "-") + ChangeCapture.installSQL(schema: "public")
            + "version mark \(MigrationRunner.schemaVersion)"
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in digest.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let name = "matcher_template_\(String(hash, radix: 16))"
        let admin = try PostgresConnection(try TestDatabase.adminConninfo)
        defer { admin.close() }
        let exists =
            try admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [.text(name)]).rows.isEmpty == false
        if exists { return name }
        // Migrate a scratch database, then rename it into place (a rename is atomic).
        let scratch = try TestDatabase.create("template")
        let connection = try scratch.connect()
        try MigrationRunner(connection: connection).apply(migrations)
        connection.close()
        do {
            try admin.execute("ALTER DATABASE \"\(scratch.name)\" RENAME TO \"\(name)\"")
        } catch let error as PostgresError where error.sqlState == "42P04" {
            // Another test process created it first.
        }
        return name
    }
}
