import ArgumentParser
import Foundation
import Matching
import MatchingPostgres
import PostgresClient

/// Issue 8 (c): an incremental run at scale after a day of changes: time per phase, total, peak RSS, and
/// beside it the I/O floor on the same database state: COPY out the same input rows (changed profiles,
/// filters, owners, blocks; a run no longer reads recorded pairs) and COPY in the same output rows (the
/// run's matches and notifications, into identical tables with the same indexes), both by psql.
struct IncrementalBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "incremental",
        abstract: "Day-2 incremental run after N changes, per phase and peak RSS, beside its COPY I/O floor.")

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Profiles in the seeded world.") var profiles = 1_000_000
    @Option(help: "Saved filters in the seeded world.") var filters = 100_000
    @Option(help: "Profile changes between day 1 and day 2.") var changes = 30_000
    @Option(help: "Timed day-2 runs, each on a fresh copy of the day-2 state; the median is reported.") var repeats = 3
    @Flag(help: "Reuse the day-2 template from an earlier invocation with the same sizes.") var reuse = false
    @Option(parsing: .remaining, help: "Extra arguments for the timed `matcher run` (after --).") var runArguments:
        [String] = []

    static let day1 = "2026-03-01T03:00:00Z"
    static let day2 = "2026-03-02T03:00:00Z"

    func run() throws {
        let admin = try database.conninfo()
        let psql = try Shell.psql()
        let matcher = MigrationRunner.currentExecutable.deletingLastPathComponent().appendingPathComponent("matcher")
            .path
        let template = "matcher_bench_incr_\(profiles)_\(filters)_\(changes)"
        let templateInfo = try PostgresConnection.conninfo(admin, overriding: ["dbname": template])
        say("incremental: \(profiles) profiles x \(filters) filters, \(changes) changes; worker \(matcher)")
        say(try ServerSettings.line(admin))

        let reusable = try reuse && exists(admin, template)
        if !reusable {
            try recreate(admin, template, from: nil)
            let steps: [(String, [String])] = [
                ("migrate", ["migrate"]),
                (
                    "seed day 1",
                    [
                        "seed", "--profiles", "\(profiles)", "--filters", "\(filters)", "--seed", "1",
                        "--now", Self.day1, "--replace",
                    ]
                ),
                ("run day 1", ["run", "--now", Self.day1, "--log-format", "json"]),
                ("seed changes", ["seed", "--changes", "\(changes)", "--seed", "2", "--now", Self.day2]),
            ]
            for (name, arguments) in steps {
                let result = try Shell.timedChild(matcher, arguments, environment: ["DATABASE_URL": templateInfo])
                guard result.status == 0 else { throw ValidationError("\(name) failed: \(result.stderr.suffix(2000))") }
                say(
                    "  \(name): \(Shell.seconds(result.seconds)), peak RSS "
                        + "\(Shell.peakMiB(result.maxRSSKiB, harness: result.harnessMaxRSSKiB)) MiB")
            }
            let connection = try PostgresConnection(templateInfo)
            try connection.execute("VACUUM ANALYZE")
            connection.close()
        }

        var totals: [Double] = [], peaks: [(child: Int, harness: Int)] = [],
            floors: [(input: Double, output: Double)] = []
        var lastReport = ""
        for attempt in 1...max(1, repeats) {
            let copy = "matcher_bench_incr_run"
            try recreate(admin, copy, from: template)
            let info = try PostgresConnection.conninfo(admin, overriding: ["dbname": copy])
            let inputFloor = try measureInputFloor(psql, info)
            let result = try Shell.timedChild(
                matcher, ["run", "--now", Self.day2, "--format", "json", "--log-format", "json"] + runArguments,
                environment: ["DATABASE_URL": info])
            guard result.status == 0 else { throw ValidationError("day-2 run failed: \(result.stderr.suffix(2000))") }
            let outputFloor = try measureOutputFloor(psql, info)
            totals.append(result.seconds)
            peaks.append((result.maxRSSKiB, result.harnessMaxRSSKiB))
            floors.append((inputFloor, outputFloor))
            lastReport = result.stdout
            say(
                "  day-2 run \(attempt): \(Shell.seconds(result.seconds)) [\(VersusSQLBenchmark.phases(result.stdout))], "
                    + "peak RSS \(Shell.peakMiB(result.maxRSSKiB, harness: result.harnessMaxRSSKiB)) MiB; floor in \(Shell.seconds(inputFloor)) + out \(Shell.seconds(outputFloor))"
            )
        }
        let total = median(totals)
        let floor = median(floors.map { $0.input + $0.output })
        say("")
        let peak = peaks.max { $0.child < $1.child }!
        say(
            "day-2 run (median of \(totals.count)): \(Shell.seconds(total)), peak RSS "
                + "\(Shell.peakMiB(peak.child, harness: peak.harness)) MiB")
        say("  phases (last): \(VersusSQLBenchmark.phases(lastReport))")
        say("  counts (last): \(Self.counts(lastReport))")
        say(
            "I/O floor (median): \(Shell.seconds(floor)) = COPY out inputs \(Shell.seconds(median(floors.map(\.input)))) "
                + "+ COPY in outputs \(Shell.seconds(median(floors.map(\.output))))")
        say(String(format: "ratio total / floor: %.2f (target <= 1.3); peak RSS target <= 1024 MiB", total / floor))
        for line in Shell.harnessPeakLines() { say(line) }
    }

    private func exists(_ admin: String, _ name: String) throws -> Bool {
        let connection = try PostgresConnection(admin)
        defer { connection.close() }
        return try !connection.query("SELECT 1 FROM pg_database WHERE datname = $1", [.text(name)]).rows.isEmpty
    }

    private func recreate(_ admin: String, _ name: String, from template: String?) throws {
        let connection = try PostgresConnection(admin)
        defer { connection.close() }
        try connection.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        try connection.execute("CREATE DATABASE \(name)" + (template.map { " TEMPLATE \($0)" } ?? ""))
    }

    /// psql \copy of the run's inputs to /dev/null, in one session (like the worker's reads).
    private func measureInputFloor(_ psql: String, _ conninfo: String) throws -> Double {
        let columns = (["id", "status", "plan"] + MatchingColumns.items).map { "p.\($0)" }.joined(separator: ", ")
        let script = """
            BEGIN ISOLATION LEVEL REPEATABLE READ;
            SELECT set_config('matcher.since', snapshot::text, true) FROM matcher_shard_progress
              WHERE shard_count = 1 AND snapshot IS NOT NULL;
            CREATE TEMP TABLE floor_candidates AS SELECT c.profile_id FROM matcher_profile_changes c
              WHERE c.changed_by >= pg_snapshot_xmin(current_setting('matcher.since')::pg_snapshot)
                AND NOT pg_visible_in_snapshot(c.changed_by, current_setting('matcher.since')::pg_snapshot);
            \\copy (SELECT \(columns) FROM profiles p JOIN floor_candidates c ON c.profile_id = p.id) to '/dev/null' (format binary)
            \\copy (SELECT id, owner_id, name, conditions, notify, notify_every, created_at, updated_at, deleted_at FROM saved_filters WHERE deleted_at IS NULL) to '/dev/null' (format binary)
            \\copy (SELECT id, status, plan FROM profiles WHERE id IN (SELECT owner_id FROM saved_filters WHERE deleted_at IS NULL)) to '/dev/null' (format binary)
            \\copy blocks (blocker_id, blocked_id) to '/dev/null' (format binary)
            COMMIT;
            """
        let path = NSTemporaryDirectory() + "floor-in.sql"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        return try Shell.time { try Shell.run(psql, [conninfo, "-q", "-v", "ON_ERROR_STOP=1", "-f", path]) }
    }

    /// psql \copy of the run's outputs (its new matches and notifications) into replicas of the two tables
    /// as they stood before the run (same rows, same indexes): the same inserts into the same state.
    private func measureOutputFloor(_ psql: String, _ conninfo: String) throws -> Double {
        let prepare = """
            DROP TABLE IF EXISTS floor_matches, floor_notifications;
            CREATE TABLE floor_matches (LIKE filter_matches INCLUDING ALL);
            CREATE TABLE floor_notifications (LIKE notifications INCLUDING ALL);
            INSERT INTO floor_matches SELECT * FROM filter_matches WHERE run_id <> (SELECT max(id) FROM matcher_runs);
            INSERT INTO floor_notifications SELECT * FROM notifications WHERE run_id <> (SELECT max(id) FROM matcher_runs);
            VACUUM ANALYZE floor_matches, floor_notifications;
            CHECKPOINT;
            \\copy (SELECT * FROM filter_matches WHERE run_id = (SELECT max(id) FROM matcher_runs) ORDER BY filter_id, profile_id) to '/tmp/floor-matches.bin' (format binary)
            \\copy (SELECT * FROM notifications WHERE run_id = (SELECT max(id) FROM matcher_runs) ORDER BY id) to '/tmp/floor-notifications.bin' (format binary)
            """
        let load = """
            \\copy floor_matches from '/tmp/floor-matches.bin' (format binary)
            \\copy floor_notifications from '/tmp/floor-notifications.bin' (format binary)
            """
        let preparePath = NSTemporaryDirectory() + "floor-out-prepare.sql",
            loadPath = NSTemporaryDirectory() + "floor-out.sql"
        try prepare.write(toFile: preparePath, atomically: true, encoding: .utf8)
        try load.write(toFile: loadPath, atomically: true, encoding: .utf8)
        try Shell.run(psql, [conninfo, "-q", "-v", "ON_ERROR_STOP=1", "-f", preparePath])
        return try Shell.time { try Shell.run(psql, [conninfo, "-q", "-v", "ON_ERROR_STOP=1", "-f", loadPath]) }
    }

    static func counts(_ json: String) -> String {
        guard let data = json.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let counts = object["counts"] as? [String: Any]
        else { return "?" }
        return counts.keys.sorted().map { "\($0) \(counts[$0]!)" }.joined(separator: ", ")
    }
}

/// The catalogue's profile columns, as the worker reads them.
enum MatchingColumns {
    static var items: [String] { MasterItem.all.map(\.column) }
}

/// Unbuffered output, so progress shows while a long benchmark runs.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
