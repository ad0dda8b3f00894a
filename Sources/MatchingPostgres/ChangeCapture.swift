import Matching
import PostgresClient

/// The change capture on `profiles` (runs.md, "Incremental run"), derived from the MasterItem catalogue.
///
/// - An insert records its profile, row by row. An upsert that takes its update path (a login written as
///   `INSERT ... ON CONFLICT (id) DO UPDATE SET last_login_at = now()`) inserts no row and calls nothing; a
///   statement-level trigger was called by every such statement, with nothing to record, and cost an upsert
///   login 12-14 % of its throughput (`scripts/bench-login-tps --upsert`).
/// - A delete records its profiles the same way: a unit of work that re-checks the status of profiles changed
///   since its run read them (`PostgresUnitTransaction.profileFacts`) sees a profile whose row is gone.
/// - An update records a profile only when a column that matching reads changed: the columns of the
///   non-recency items, `status` and `id`. The trigger fires only for updates that name one of those
///   columns (`UPDATE OF`), and only for rows where one really changed (`WHEN`), so a login
///   (`SET last_login_at = now()`) or any write of `plan`, `updated_at` or the app's own columns costs
///   no function call and no write. `UPDATE OF` looks only at the statement's SET list, so when the app has
///   its own `BEFORE UPDATE` row triggers on `profiles` (which may derive a watched value, say
///   `has_introduction` from the text, or `status` on a login: read from their source by `AppTriggerSource`;
///   one that only keeps `updated_at` sets none), the capture is installed without it and compares every
///   update's row: exact, at a measured cost (about 0.7 of the app's login throughput, against none).
///   `matcher migrate` chooses; a run warns when the app's triggers changed since (`mismatch`).
/// - An update of `id` records both ids: the old one is gone, like a deleted profile.
///
/// Each recorded row holds the id of the transaction that wrote the profile (a run reads the ones its
/// snapshot sees and its previous coverage did not) and the time, for an operator's reset after a restore.
///
/// The functions run as their owner (`SECURITY DEFINER`, so the app's role needs no privilege on the
/// worker's table) with `search_path = pg_catalog, pg_temp` and every object schema-qualified, so that
/// nothing a session plants, in `pg_temp` or any schema, can run with the owner's rights. The owner is
/// the dedicated non-superuser role `matcher_capture` (NOLOGIN), which may only write that one table.
///
/// `matcher migrate` installs it after the numbered migrations and again whenever the catalogue changes
/// (the generated text's checksum is kept in the function's comment), so adding an item needs no trigger edit.
public enum ChangeCapture {
    /// The role that owns the definer functions.
    public static let ownerRole = "matcher_capture"
    /// The migration that dropped the hand-written capture for this one.
    public static let sinceMigration = 5

    /// The `profiles` columns whose change makes a profile new to the matching.
    public static var watchedColumns: [String] {
        ["id", "status"] + MasterItem.all.filter { $0.kind != .recency }.map(\.column)
    }

    /// The statements that (re)install the capture in `schema`, watching `watched` (by default every column
    /// of `watchedColumns`).
    ///
    /// With `everyUpdate`, the update trigger compares the watched columns of every updated row, not only of
    /// updates whose SET list names one (for tables where the app's own `BEFORE UPDATE` triggers set values).
    public static func installSQL(
        schema: String, watching watched: [String] = watchedColumns, everyUpdate: Bool = false
    ) -> String {
        let s = quoteIdentifier(schema)
        let columns = watched.map(quoteIdentifier)
        // Column by column: the first that differs decides, and no record is built for the comparison.
        let changed = columns.map { "OLD.\($0) IS DISTINCT FROM NEW.\($0)" }.joined(separator: " OR ")
        // One recording function per trigger, each the same upsert of (id, transaction, time) from `rows`.
        func recorder(_ name: String, from rows: String) -> String {
            """
            CREATE OR REPLACE FUNCTION \(s).\(name)() RETURNS trigger
            LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
            BEGIN
                INSERT INTO \(s).matcher_profile_changes AS c (profile_id, changed_by, changed_at)
                \(rows)
                ON CONFLICT (profile_id) DO UPDATE SET changed_by = EXCLUDED.changed_by, changed_at = EXCLUDED.changed_at
                    WHERE c.changed_by OPERATOR(pg_catalog.<>) EXCLUDED.changed_by;
                RETURN NULL;
            END
            $body$;
            """
        }
        let now = "pg_catalog.pg_current_xact_id(), pg_catalog.clock_timestamp()"
        return """
            \(recorder("matcher_record_inserted_profiles", from: "SELECT NEW.id, \(now)"))

            \(recorder(
                "matcher_record_changed_profile",
                from: "SELECT u.id, \(now) FROM (SELECT DISTINCT r.id FROM (VALUES (NEW.id), (OLD.id)) AS r(id)) AS u"))

            \(recorder("matcher_record_deleted_profiles", from: "SELECT r.id, \(now) FROM deleted_rows r"))

            REVOKE ALL ON FUNCTION \(s).matcher_record_inserted_profiles() FROM PUBLIC;
            REVOKE ALL ON FUNCTION \(s).matcher_record_changed_profile() FROM PUBLIC;
            REVOKE ALL ON FUNCTION \(s).matcher_record_deleted_profiles() FROM PUBLIC;

            DROP TRIGGER IF EXISTS matcher_profiles_inserted ON \(s).profiles;
            DROP TRIGGER IF EXISTS matcher_profiles_changed ON \(s).profiles;
            DROP TRIGGER IF EXISTS matcher_profiles_deleted ON \(s).profiles;
            CREATE TRIGGER matcher_profiles_inserted AFTER INSERT ON \(s).profiles
                FOR EACH ROW EXECUTE FUNCTION \(s).matcher_record_inserted_profiles();
            CREATE TRIGGER matcher_profiles_changed AFTER UPDATE\(everyUpdate ? "" : " OF " + columns.joined(separator: ", ")) ON \(s).profiles
                FOR EACH ROW WHEN (\(changed))
                EXECUTE FUNCTION \(s).matcher_record_changed_profile();
            CREATE TRIGGER matcher_profiles_deleted AFTER DELETE ON \(s).profiles
                REFERENCING OLD TABLE AS deleted_rows
                FOR EACH STATEMENT EXECUTE FUNCTION \(s).matcher_record_deleted_profiles();

            DO $owner$
            DECLARE
                lent_create boolean := false;
            BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = '\(ownerRole)') THEN
                    BEGIN
                        CREATE ROLE \(ownerRole) NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOBYPASSRLS;
                    EXCEPTION WHEN duplicate_object OR unique_violation OR insufficient_privilege THEN
                        NULL;
                    END;
                END IF;
                IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = '\(ownerRole)')
                   AND pg_catalog.pg_has_role(current_user, '\(ownerRole)', 'USAGE') THEN
                    BEGIN
                        EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %I TO \(ownerRole)', \(literal(schema)));
                        EXECUTE pg_catalog.format(
                            'GRANT SELECT, INSERT, UPDATE ON %I.matcher_profile_changes TO \(ownerRole)', \(literal(schema)));
                        -- A new owner needs CREATE on the functions' schema (a superuser migrator is exempt from the
                        -- check, a schema owner is not): lent for the change of owner only.
                        IF NOT pg_catalog.has_schema_privilege('\(ownerRole)', \(literal(schema)), 'CREATE') THEN
                            EXECUTE pg_catalog.format('GRANT CREATE ON SCHEMA %I TO \(ownerRole)', \(literal(schema)));
                            lent_create := true;
                        END IF;
                        EXECUTE pg_catalog.format(
                            'ALTER FUNCTION %I.matcher_record_inserted_profiles() OWNER TO \(ownerRole)', \(literal(schema)));
                        EXECUTE pg_catalog.format(
                            'ALTER FUNCTION %I.matcher_record_changed_profile() OWNER TO \(ownerRole)', \(literal(schema)));
                        EXECUTE pg_catalog.format(
                            'ALTER FUNCTION %I.matcher_record_deleted_profiles() OWNER TO \(ownerRole)', \(literal(schema)));
                        IF lent_create THEN
                            EXECUTE pg_catalog.format('REVOKE CREATE ON SCHEMA %I FROM \(ownerRole)', \(literal(schema)));
                        END IF;
                    EXCEPTION WHEN insufficient_privilege THEN
                        RAISE WARNING 'the change-capture functions stay owned by %: %', current_user, SQLERRM;
                    END;
                ELSE
                    RAISE WARNING 'role \(ownerRole) is missing or not usable by %: the change-capture functions stay owned by it', current_user;
                END IF;
            END
            $owner$;
            """
    }

    /// Installs the capture unless the installed one was generated from the same text and is whole.
    /// Returns why it (re)installed (for `matcher migrate` to say), nil when the one in place was kept.
    @discardableResult
    public static func install(on connection: PostgresConnection) throws -> String? {
        try connection.transaction { tx in try install(inTransaction: tx) }
    }

    /// `install(on:)` inside the caller's transaction (`tx`). With `existingColumnsOnly`, it watches only the
    /// watched columns `profiles` has now: migration 5 drops the old capture and installs this one in the same
    /// transaction, so that no change the app commits meanwhile goes unrecorded, before later migrations may
    /// add an item's column; `matcher migrate` installs the whole capture after the last one.
    @discardableResult
    static func install(inTransaction tx: PostgresConnection, existingColumnsOnly: Bool = false) throws -> String? {
        let schema = try tx.query("SELECT current_schema()").rows[0].string(0)
        try refuseUnsafeSchema(schema)
        var watched = watchedColumns
        if existingColumnsOnly {
            let existing = try Set(
                tx.query(
                    """
                    SELECT column_name::text FROM information_schema.columns
                    WHERE table_schema = $1 AND table_name = 'profiles'
                    """, [.text(schema)]
                ).rows.map { try $0.string(0) })
            watched = watched.filter(existing.contains)
        }
        let sql = installSQL(
            schema: schema, watching: watched, everyUpdate: !(try appBeforeUpdateTriggers(tx, schema: schema)).isEmpty)
        let checksum = "matcher change capture " + Migration(version: 0, name: "capture", sql: sql).checksum
        let installed = try tx.query(
            """
            SELECT obj_description(p.oid, 'pg_proc') FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = $1 AND p.proname = 'matcher_record_changed_profile'
            """, [.text(schema)]
        ).rows.first.flatMap { try $0.optionalString(0) }
        let (missing, silent, astray) = try gaps(tx, schema: schema)
        let ownedAsIntended = try ownerProblem(tx, schema: schema, onlyIfMendable: true) == nil
        var reasons: [String] = []
        if installed == nil {
            reasons.append("none was installed")
        } else if installed != checksum {
            reasons.append("what it must watch changed (the items' columns, or the app's BEFORE UPDATE triggers)")
        }
        if !missing.isEmpty { reasons.append("missing trigger(s) \(missing.joined(separator: ", "))") }
        if !silent.isEmpty { reasons.append("disabled trigger(s) \(silent.joined(separator: ", "))") }
        if !astray.isEmpty { reasons.append("trigger(s) watching other columns: \(astray.joined(separator: ", "))") }
        if !ownedAsIntended { reasons.append("its functions were not owned by their role") }
        guard !reasons.isEmpty else { return nil }
        try tx.execute(sql)
        try tx.execute(
            "COMMENT ON FUNCTION \(quoteIdentifier(schema)).matcher_record_changed_profile() IS "
                + literal(checksum))
        return reasons.joined(separator: "; ")
    }

    /// Why the capture's functions are not owned by `ownerRole` (they then run with the rights of the role that
    /// migrated, wider than they need), for `matcher migrate` to say; nil when they are, or not installed.
    /// With `onlyIfMendable`, nil as well when this session could not hand them over anyway (the role is missing
    /// or not ours to use): a reinstall would change nothing.
    public static func ownerProblem(on connection: PostgresConnection) throws -> String? {
        let schema = try connection.query("SELECT current_schema()").rows[0].string(0)
        return try ownerProblem(connection, schema: schema, onlyIfMendable: false)
    }

    static func ownerProblem(_ tx: PostgresConnection, schema: String, onlyIfMendable: Bool) throws -> String? {
        let row = try tx.query(
            """
            SELECT r.rolname::text,
                   EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $2)
                   AND pg_has_role(current_user, (SELECT oid FROM pg_roles WHERE rolname = $2), 'USAGE')
                   AND (has_schema_privilege((SELECT oid FROM pg_roles WHERE rolname = $2), n.oid, 'CREATE')
                        OR has_schema_privilege(current_user, n.oid, 'CREATE WITH GRANT OPTION'))
            FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_roles r ON r.oid = p.proowner
            WHERE n.nspname = $1 AND p.proname = 'matcher_record_changed_profile'
            """, [.text(schema), .text(ownerRole)]
        ).rows.first
        guard let row else { return nil }
        let owner = try row.string(0)
        let usable = try row.bool(1)
        guard owner != ownerRole, usable || !onlyIfMendable else { return nil }
        return "the change-capture functions are owned by \(owner), not \(ownerRole): they run with \(owner)'s rights. "
            + (usable
                ? "Handing them over failed (see the migration's warning); run matcher migrate again"
                : "The migrating role must be able to use the role \(ownerRole) (NOLOGIN; grant it, as "
                    + "sql/roles/worker_role.sql says), and \(ownerRole) needs CREATE on the schema (granted to it, "
                    + "or lent by a migrating role that owns the schema); then run matcher migrate again")
    }

    /// The app's own row triggers that run before an update of `profiles` in `schema` (enabled, not internal)
    /// and may set a watched column (`AppTriggerSource`), each with why: a value they set is not in the
    /// statement's SET list, which `UPDATE OF` looks at.
    static func appBeforeUpdateTriggers(_ tx: PostgresConnection, schema: String) throws -> [String] {
        // tgtype bits: 1 row, 2 before, 16 update.
        // On a partitioned `profiles`, its partitions' own triggers too: a value one sets is as invisible to
        // `UPDATE OF` as the parent's (review of session 33). (`pg_partition_tree` of a plain table is empty.)
        try tx.query(
            """
            SELECT DISTINCT t.tgname::text, l.lanname::text, p.prosrc FROM pg_trigger t
            JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_language l ON l.oid = p.prolang
            WHERE (t.tgrelid = to_regclass(format('%I.profiles', $1::text))
                   OR t.tgrelid IN (SELECT relid FROM pg_partition_tree(to_regclass(format('%I.profiles', $1::text)))))
              AND NOT t.tgisinternal AND t.tgenabled <> 'D' AND t.tgtype & 19 = 19
            ORDER BY 1
            """, [.text(schema)]
        ).rows.compactMap { row in
            let reason = AppTriggerSource.mayChangeWatched(
                language: try row.string(1), source: try row.optionalString(2) ?? "", watched: watchedColumns)
            return try reason.map { "\(try row.string(0)) (\($0))" }
        }
    }

    /// The profiles whose capture row a snapshot ($1) does not see, with their status now. A transaction id is
    /// invisible to a snapshot exactly when it is at or past the snapshot's xmax or among its in-progress ids
    /// (xip), so the index is read from xmax and probed for each of those ids. The first form, every id from
    /// the snapshot's xmin filtered by `pg_visible_in_snapshot`, read every change committed since the oldest
    /// transaction open at the read, every unit: days of changes behind an app session left idle in a
    /// transaction, or an orphaned prepared one (review of session 33). Forced to nested probes, whatever the
    /// estimates: an `OR` of the two made the planner join `profiles` by a scan of the whole table.
    package static let changesSinceSnapshot = """
        SELECT c.profile_id, CASE WHEN p.status BETWEEN 1 AND 4 THEN p.status ELSE 0 END, p.id IS NOT NULL
        FROM (
            SELECT profile_id FROM matcher_profile_changes WHERE changed_by >= pg_snapshot_xmax($1::pg_snapshot)
            UNION ALL
            SELECT l.profile_id FROM pg_snapshot_xip($1::pg_snapshot) AS x (id)
            CROSS JOIN LATERAL (SELECT profile_id FROM matcher_profile_changes WHERE changed_by = x.id OFFSET 0) l
        ) c
        LEFT JOIN LATERAL (SELECT p.id, p.status FROM profiles p WHERE p.id = c.profile_id OFFSET 0) p ON true
        """

    /// The capture's triggers on `profiles`, as `installSQL` creates them.
    static let triggerNames = ["matcher_profiles_inserted", "matcher_profiles_changed", "matcher_profiles_deleted"]

    /// The capture's triggers that are missing, and those that do not fire in the app's sessions, on `profiles`
    /// in `schema` and, when it is partitioned, on each partition (the row triggers are cloned onto every one,
    /// where each can be disabled, or dropped with a partition's column, on its own, and the partition's rows then
    /// go unrecorded: review of session 33; the statement trigger for deletes stays on the parent alone).
    ///
    /// And `astray`: an update trigger whose columns (its `UPDATE OF` list and its `WHEN` comparison, both held by
    /// number: the trigger's dependencies on them) are no longer the watched columns. An app that retypes a
    /// column by adding a new one, copying and swapping the names (the usual way around `ALTER COLUMN … TYPE`,
    /// which a trigger's column refuses) left the capture comparing the renamed old column, and every run
    /// succeeded without the new one's changes (review of session 36; in either form of the capture). The
    /// trigger of `profiles` itself only: its clones on partitions record no dependency for the `WHEN` clause
    /// (every partition then read as watching nothing, and every run refused: the last review of the change),
    /// and a partition's inherited columns are renamed only with the parent's, so the parent's trigger tells.
    static func gaps(
        _ connection: PostgresConnection, schema: String
    ) throws -> (missing: [String], silent: [String], astray: [String]) {
        let states = try Dictionary(
            uniqueKeysWithValues: connection.query(
                """
                SELECT t.tgname::text, t.tgenabled::text FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = $1 AND c.relname = 'profiles' AND t.tgname = ANY($2)
                """, [.text(schema), .textArray(triggerNames)]
            ).rows.map { (try $0.string(0), try $0.string(1)) })
        var missing = triggerNames.filter { states[$0] == nil }
        // 'O' fires in ordinary sessions, 'A' always; 'D' never, 'R' only where session_replication_role = replica.
        var silent = triggerNames.filter { states[$0].map { !["O", "A"].contains($0) } ?? false }
        for row in try connection.query(
            """
            SELECT p.relid::regclass::text, w.name, t.tgenabled::text
            FROM pg_partition_tree(to_regclass(format('%I.profiles', $1::text))) AS p
            CROSS JOIN unnest($2::text[]) AS w (name)
            LEFT JOIN pg_trigger t ON t.tgrelid = p.relid AND t.tgname = w.name
            WHERE p.isleaf AND p.relid <> to_regclass(format('%I.profiles', $1::text))
            ORDER BY 1, 2
            """, [.text(schema), .textArray(["matcher_profiles_inserted", "matcher_profiles_changed"])]
        ).rows {
            let name = "\(try row.string(1)) on \(try row.string(0))"
            guard let enabled = try row.optionalString(2) else {
                missing.append(name)
                continue
            }
            if !["O", "A"].contains(enabled) { silent.append(name) }
        }
        let watched = Set(watchedColumns)
        var astray: [String] = []
        for row in try connection.query(
            """
            SELECT ARRAY(SELECT DISTINCT a.attname::text FROM pg_depend d
                         JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                         WHERE d.classid = 'pg_trigger'::regclass AND d.objid = t.oid
                           AND d.refclassid = 'pg_class'::regclass AND d.refobjid = t.tgrelid AND d.refobjsubid > 0),
                   ARRAY(SELECT a.attname::text FROM pg_attribute a
                         WHERE a.attrelid = t.tgrelid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1)
            FROM pg_trigger t
            WHERE t.tgname = 'matcher_profiles_changed' AND t.tgrelid = to_regclass(format('%I.profiles', $1::text))
            """, [.text(schema)]
        ).rows {
            let listed = Set(try row.stringArray(0))
            let present = Set(try row.stringArray(1))
            let strays = listed.subtracting(watched).sorted()
            let unwatched = watched.intersection(present).subtracting(listed).sorted()
            guard !strays.isEmpty || !unwatched.isEmpty else { continue }
            let parts = [
                strays.isEmpty ? nil : "watches \(strays.joined(separator: ", "))",
                unwatched.isEmpty ? nil : "not \(unwatched.joined(separator: ", "))",
            ].compactMap { $0 }.joined(separator: ", ")
            astray.append("matcher_profiles_changed (\(parts))")
        }
        return (missing, silent, astray)
    }

    /// Refuses (a configuration error, exit 78) when one of the capture's three triggers is gone or does not fire
    /// in the app's sessions: dropped with a column (`DROP COLUMN … CASCADE`), by a retype that did not create it
    /// again (docs/runbook.md), or disabled. The changes made meanwhile were not recorded, and a run would read
    /// none of them and succeed: found by review in session 32, when only `matcher migrate` counted the triggers.
    public static func verifyCapturing(_ connection: PostgresConnection) throws {
        let schema = try connection.query("SELECT current_schema()").rows[0].string(0)
        let (missing, silent, astray) = try gaps(connection, schema: schema)
        guard !missing.isEmpty || !silent.isEmpty || !astray.isEmpty else { return }
        let what = [
            missing.isEmpty ? nil : "trigger(s) \(missing.joined(separator: ", ")) missing",
            silent.isEmpty ? nil : "trigger(s) \(silent.joined(separator: ", ")) disabled",
            astray.isEmpty
                ? nil : "trigger(s) \(astray.joined(separator: ", ")): a watched column was renamed or replaced",
        ].compactMap { $0 }.joined(separator: ", ")
        throw MigrationError(
            description: "the change capture on profiles is incomplete (\(what)): the changes made meanwhile were not "
                + "recorded, and a run would not see them. Nothing was changed. Run matcher migrate (as the owner) to "
                + "install it again, then matcher backfill --changed-since <when it went> --notify for the profiles "
                + "changed meanwhile (docs/runbook.md)")
    }

    /// Why the installed capture may miss changes, for a run to warn about: the app added `BEFORE UPDATE`
    /// triggers on `profiles` after `matcher migrate` installed it for updates' SET lists only. Nil when it fits.
    public static func mismatch(on connection: PostgresConnection) throws -> String? {
        let schema = try connection.query("SELECT current_schema()").rows[0].string(0)
        let definition = try connection.query(
            """
            SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND c.relname = 'profiles' AND t.tgname = 'matcher_profiles_changed'
            """, [.text(schema)]
        ).rows.first.map { try $0.string(0) }
        guard let definition else { return nil }
        let triggers = try appBeforeUpdateTriggers(connection, schema: schema)
        if definition.contains(" UPDATE OF ") {
            guard !triggers.isEmpty else { return nil }
            return "profiles has BEFORE UPDATE trigger(s) \(triggers.joined(separator: ", ")) that may set a column "
                + "matching reads, and the change capture was not installed for them: a value they set in an update "
                + "that names no watched column was not recorded as a change, and no run saw it. Run `matcher migrate` "
                + "(as the owner) to install the capture for them, then `matcher backfill --changed-since <when the "
                + "trigger was added> --notify` for the profiles changed meanwhile (docs/runbook.md)"
        }
        guard triggers.isEmpty else { return nil }
        return "the change capture compares every update of profiles (installed for BEFORE UPDATE triggers of the "
            + "app's that may set a column matching reads, and are gone or no longer do): each of the app's "
            + "updates, logins included, pays for it; run `matcher migrate` (as the owner) to install it for the "
            + "statements that name a watched column"
    }

    /// The capture's functions are dollar-quoted (`$body$`, `$owner$`), and the schema's name is written inside
    /// them: a name holding one of those tags ended a body early, and what followed ran as the migrating role
    /// (review of session 34: `TRUNCATE blocks` from a renamed schema). Such a name is refused; any other, `$`
    /// included, cannot end a body.
    static let dollarTags = ["$body$", "$owner$"]

    static func refuseUnsafeSchema(_ schema: String) throws {
        guard let tag = dollarTags.first(where: { schema.contains($0) }) else { return }
        throw MigrationError(
            description:
                "the worker's schema \(quoteIdentifier(schema)) holds `\(tag)` in its name, which ends the change "
                + "capture's function bodies: rename the schema (ALTER SCHEMA ... RENAME TO); nothing was changed")
    }

    static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// A string constant read the same whatever the session's `standard_conforming_strings` (an operator's
    /// `options` may turn it off after the worker's own setting): `E'...'`, backslashes and quotes doubled.
    static func literal(_ text: String) -> String {
        "E'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "''") + "'"
    }
}
