import Matching
import PostgresClient

/// The columns the worker reads from the app's tables (runs.md "Tables", master-items.md), and the
/// types it can read them as. `matcher migrate` checks an existing app schema against it before it
/// changes anything, and refuses with one message naming every problem; extra columns, other
/// nullability and the app's rows are never touched.
public enum AppSchema {
    /// Families of column types the worker reads (binary COPY and query results read any width).
    enum TypeFamily: String, Sendable {
        case integer = "an integer (smallint, integer or bigint)"
        case bigint = "bigint"
        case integerArray = "an integer array (smallint[], integer[] or bigint[])"
        case date = "date"
        case timestamptz = "timestamp with time zone"
        case boolean = "boolean"
        case json = "jsonb (or json)"
        case interval = "interval"
        case text = "text (or varchar)"

        func accepts(_ type: String) -> Bool {
            switch self {
            case .integer: ["smallint", "integer", "bigint"].contains(type)
            case .bigint: type == "bigint"
            case .integerArray: ["smallint[]", "integer[]", "bigint[]"].contains(type)
            case .date: type == "date"
            case .timestamptz: type == "timestamp with time zone"
            case .boolean: type == "boolean"
            case .json: type == "jsonb" || type == "json"
            case .interval: type == "interval"
            case .text:
                type == "text" || type.hasPrefix("character varying") || type.hasPrefix("character(")
                    || type == "character"
            }
        }
    }

    /// Table -> required columns and their families, in a stable order.
    static var required: [(table: String, columns: [(String, TypeFamily)])] {
        var profiles: [(String, TypeFamily)] = [("id", .integer), ("status", .integer), ("plan", .integer)]
        for item in MasterItem.all {
            let family: TypeFamily =
                switch item.storage {
                case .smallint, .nullableSmallint: .integer
                case .nullableDate: .date
                case .smallintArray, .integerArray: .integerArray
                case .boolean: .boolean
                case .timestamptz: .timestamptz
                }
            if !profiles.contains(where: { $0.0 == item.column }) { profiles.append((item.column, family)) }
        }
        for column in ["last_login_at", "created_at", "updated_at"] where !profiles.contains(where: { $0.0 == column })
        {
            profiles.append((column, .timestamptz))
        }
        return [
            ("profiles", profiles),
            (
                "saved_filters",
                [
                    ("id", .integer), ("owner_id", .integer), ("name", .text), ("conditions", .json),
                    ("notify", .boolean),
                    ("notify_every", .interval), ("created_at", .timestamptz), ("updated_at", .timestamptz),
                    ("deleted_at", .timestamptz),
                ]
            ),
            ("blocks", [("blocker_id", .bigint), ("blocked_id", .bigint)]),  // read by binary COPY as int8
        ]
    }

    /// The problems of the app's tables as they are now, one line each; empty when the worker can read
    /// them. A table that does not exist is a problem only when `requireTables` (after the migrations,
    /// which create missing tables).
    public static func problems(_ connection: PostgresConnection, requireTables: Bool) throws -> [String] {
        try problems(connection, requireTables: requireTables, checking: required)
    }

    static func problems(
        _ connection: PostgresConnection, requireTables: Bool,
        checking tables: [(table: String, columns: [(String, TypeFamily)])]
    ) throws -> [String] {
        var problems: [String] = []
        for (table, columns) in tables {
            let rows = try connection.query(
                """
                SELECT a.attname::text, format_type(a.atttypid, NULL)
                FROM pg_attribute a
                WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
                """, [.text(table)]
            ).rows
            if rows.isEmpty {
                let exists = try connection.query("SELECT to_regclass($1) IS NOT NULL", [.text(table)]).rows[0].bool(0)
                if !exists {
                    if requireTables { problems.append("table \(table) is missing") }
                    continue
                }
            }
            var types: [String: String] = [:]
            for row in rows { types[try row.string(0)] = try row.string(1) }
            for (column, family) in columns {
                guard let type = types[column] else {
                    problems.append("\(table).\(column) is missing (the worker reads it as \(family.rawValue))")
                    continue
                }
                if !family.accepts(type) {
                    problems.append("\(table).\(column) is \(type); the worker reads it as \(family.rawValue)")
                }
            }
        }
        return problems
    }

    /// The columns a run reads with binary COPY, which carries no types (`PostgresMatchingStore.profileColumns`
    /// and the blocks), and the filters' ids, which its SQL computes with (`owner_id % N`, joins on bigint ids):
    /// one retyped to text failed every run and every sweep with "operator does not exist" (found by review in
    /// session 32). The rest are read as typed results, which quarantine a row of another type and name it, or
    /// compared in SQL, which casts.
    static var readByCopy: [(table: String, columns: [(String, TypeFamily)])] {
        let profileColumns = Set(["id", "status", "plan"] + MasterItem.all.map(\.column))
        return required.compactMap { table, columns in
            switch table {
            case "profiles": (table, columns.filter { profileColumns.contains($0.0) })
            case "saved_filters": (table, columns.filter { ["id", "owner_id"].contains($0.0) })
            case "blocks": (table, columns)
            default: nil
            }
        }
    }

    /// Problems of the tables' kinds and places, which columns cannot show (review of session 33, each tried on
    /// PostgreSQL 15):
    /// - `filter_matches` and `notifications` partitioned, or with inheritance children: the retention sweep deletes
    ///   their rows by row position (`ctid`), unique only within one table, so it deleted unsent notifications of
    ///   another partition. A plain table each.
    /// - `profiles` with inheritance children: the capture's row triggers on the parent do not fire for the
    ///   children's rows, so incremental runs never saw their changes. Declarative partitioning works (the
    ///   triggers are cloned onto every partition).
    /// - A view (or another relation that is not a table) for `profiles`, `filter_matches` or `notifications`: the
    ///   capture cannot attach to one, and the sweep cannot delete through one. (`saved_filters` and `blocks` are
    ///   only read by queries.)
    /// - An app table of the same name in two schemas of the search path: the worker reads the first, which was an
    ///   empty table an earlier `matcher migrate` made there (below) while the app's was further on.
    /// - With `creating` (`matcher migrate`), an app table found in a schema other than the one the worker's tables
    ///   are created in (the first of the search path): migration 0001 created empty tables of the same names
    ///   there, which every later run read: no match, no error, for ever.
    static func shapeProblems(_ connection: PostgresConnection, creating: Bool) throws -> [String] {
        let rows = try connection.query(
            """
            SELECT t.name, c.relkind::text, n.nspname::text, coalesce(current_schema()::text, ''),
                   EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid)
            FROM unnest($1::text[]) AS t (name)
            JOIN pg_class c ON c.oid = to_regclass(t.name)
            JOIN pg_namespace n ON n.oid = c.relnamespace
            """, [.textArray(["profiles", "saved_filters", "blocks", "filter_matches", "notifications"])]
        ).rows
        var problems: [String] = []
        for row in rows {
            let table = try row.string(0), kind = try row.string(1), schema = try row.string(2)
            let current = try row.string(3), hasChildren = try row.bool(4)
            let ownRows = table == "filter_matches" || table == "notifications"
            if !["r", "p"].contains(kind) && (ownRows || table == "profiles") {
                // `saved_filters` and `blocks` are only read by queries: a view does.
                problems.append("\(schema).\(table) is not a table (relkind \(kind)); the worker needs a table")
            } else if ownRows && (kind == "p" || hasChildren) {
                problems.append(
                    "\(schema).\(table) is \(kind == "p" ? "partitioned" : "a parent of inheritance children"); the "
                        + "worker forgets its old rows by row position, unique only within one table: it must be a plain table"
                )
            } else if table == "profiles" && kind == "r" && hasChildren {
                problems.append(
                    "\(schema).profiles has inheritance children, whose rows the change capture's triggers on it do not "
                        + "see; use a plain or a declaratively partitioned table")
            }
            if creating && schema != current {
                problems.append(
                    "\(table) is in schema \(schema), but the worker's tables are created in \(current.isEmpty ? "no schema" : current) "
                        + "(the first schema of the search path), where migrate would create an empty \(table) that "
                        + "every run would read: put \(schema) first in the migrating role's search_path (options=-csearch_path=\(schema))"
                )
            }
        }
        for row in try connection.query(
            """
            SELECT t.name, array_agg(n.nspname::text ORDER BY array_position(current_schemas(false), n.nspname))
            FROM unnest($1::text[]) AS t (name)
            JOIN pg_class c ON c.relname = t.name AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = ANY (current_schemas(false))
            GROUP BY t.name HAVING count(*) > 1 ORDER BY t.name
            """, [.textArray(["profiles", "saved_filters", "blocks"])]
        ).rows {
            let table = try row.string(0), schemas = try row.stringArray(1)
            problems.append(
                "\(table) is in schemas \(schemas.joined(separator: ", ")) of the search path, and the worker reads "
                    + "\(schemas[0]).\(table): if that is an empty table an earlier matcher migrate made, drop it (with the "
                    + "others it made there), or put the app's schema first")
        }
        return problems
    }

    /// Throws a `MigrationError` (a configuration failure, exit 78) naming every problem; `then` says what to
    /// do once the columns are fixed.
    public static func verify(
        _ connection: PostgresConnection, requireTables: Bool, then: String = "then run matcher migrate again"
    ) throws {
        try verify(connection, requireTables: requireTables, then: then, checking: required)
    }

    static func verify(
        _ connection: PostgresConnection, requireTables: Bool, then: String,
        checking tables: [(table: String, columns: [(String, TypeFamily)])]
    ) throws {
        let shapes = try shapeProblems(connection, creating: !requireTables)
        if !shapes.isEmpty {
            throw MigrationError(
                description: "the app's tables are not as the worker needs them: " + shapes.joined(separator: "; ")
                    + ". Nothing was changed; " + then)
        }
        let found = try problems(connection, requireTables: requireTables, checking: tables)
        guard !found.isEmpty else { return }
        throw MigrationError(
            description:
                "the app's tables do not have the columns the worker reads: " + found.joined(separator: "; ")
                + ". Nothing was changed. Add or retype those columns (see shared/spec/runs.md and master-items.md), "
                + then)
    }

    /// What `run`, `backfill` and `explain` check before they read: the columns they read with binary COPY (and the
    /// filters' ids, `readByCopy`), as
    /// `matcher migrate` checked them. Binary COPY carries no types and tells widths apart by length, so a column
    /// the app retyped since (`height_cm` to `real`: 170.0 is four bytes, read as the integer 1126825984) would
    /// be misread, not refused. Checked before the read's transaction: a type changed in between is still
    /// read as before (two catalog queries, which take no lock on the tables).
    public static func verifyBeforeReading(_ connection: PostgresConnection) throws {
        try verify(connection, requireTables: true, then: "then start it again", checking: readByCopy)
    }
}
