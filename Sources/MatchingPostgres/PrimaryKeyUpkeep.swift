import Foundation
import Matching
import PostgresClient

/// `filter_matches`' primary key over months, and its rebuild (`matcher reindex`).
///
/// At the retention bound the table holds a constant number of pairs, but its primary key does not keep a
/// constant size: every day inserts pairs all over the key space (each filter gets its new profiles) and
/// forgets as many elsewhere, and a B-tree page is given back only once it is entirely empty. Pages split
/// by the inserts stay, thinner and thinner, so the key keeps growing at a constant row count (measured:
/// 377 -> 722 MiB for 7.0M pairs between days 9 and 59 of a 200k x 20k soak at `--retention-days 7`), and
/// with it the pages each day's inserts and probes touch. `REINDEX INDEX CONCURRENTLY` rebuilds it packed
/// without blocking the app's reads or the runs' writes; this type says when that is worth doing and does it.
public struct PrimaryKeyUpkeep {
    /// The contract's primary key (runs.md), as the migrations name it.
    public static let index = "filter_matches_pkey"

    /// The role may not rebuild the index: only the table's owner may (PostgreSQL 15).
    public struct NotOwner: Error, CustomStringConvertible, ClassifiedError {
        public let message: String
        public var failureKind: FailureKind { .configuration }
        public var description: String {
            "\(message): matcher reindex needs the owner of filter_matches (the role that runs matcher migrate), "
                + "not the worker's role"
        }
    }

    /// A second `matcher reindex` while one runs.
    public struct Busy: Error, CustomStringConvertible {
        public var description: String { "another matcher reindex is running; nothing done" }
    }

    /// The leaf fill a rebuild leaves: room for about a week of inserts at `--retention-days 7` (a day adds a
    /// seventh of the entries), more at longer retention.
    public static let rebuildFillfactor = 70

    private let connection: PostgresConnection

    public init(connection: PostgresConnection) { self.connection = connection }

    /// The key's size now; nil when there is no `filter_matches` (not migrated). Its entries are what the last
    /// VACUUM or ANALYZE counted. Until one has counted the table (`reltuples` -1: a table a first run filled
    /// minutes ago), measured against the packed size of no entries, a fresh key of millions read as hundreds of
    /// times too large; then a key below `countedBelowBytes` is counted, and a larger one takes the statistics'
    /// live rows. Those lag: a backend sends its counts at most once a second, so right after a short first run
    /// (the writers' last commits within that second) they read a few or none, and the run's metrics put a key
    /// of a few thousand pairs at 25-63 times its packed size, `MatcherPrimaryKeyBloated` firing on a new
    /// installation for a day (review of session 35). A large key took many seconds of writes, and all but the
    /// last second's counts have landed. Only while nothing has counted: the live rows can run ahead of the truth
    /// (a backend's pending counts may land after a VACUUM set them), and a count too high would hide a bloated key.
    public func size() throws -> PrimaryKeySize? {
        let row = try connection.query(
            """
            SELECT pg_relation_size(i.oid), t.reltuples < 0,
                   CASE WHEN t.reltuples < 0 THEN greatest(i.reltuples, coalesce(s.n_live_tup, 0), 0)
                        ELSE greatest(i.reltuples, t.reltuples, 0) END::bigint
            FROM pg_class i JOIN pg_index x ON x.indexrelid = i.oid JOIN pg_class t ON t.oid = x.indrelid
            LEFT JOIN pg_stat_all_tables s ON s.relid = t.oid
            WHERE i.oid = to_regclass($1)
            """, [.text(Self.index)]
        ).rows.first
        guard let row else { return nil }
        let bytes = try row.int64(0)
        guard try row.bool(1), bytes < Self.countedBelowBytes else {
            return PrimaryKeySize(bytes: bytes, entries: try row.int64(2))
        }
        let counted = try connection.query("SELECT count(*) FROM filter_matches").rows[0].int64(0)
        return PrimaryKeySize(bytes: bytes, entries: counted)
    }

    /// A key never counted by VACUUM or ANALYZE is counted below this size (about 8M pairs packed; a second or
    /// so, and only until autovacuum's first ANALYZE of the table, minutes after the first run).
    static let countedBelowBytes: Int64 = 256 << 20

    /// Invalid indexes of `filter_matches` that an interrupted `REINDEX ... CONCURRENTLY` leaves: the new build
    /// (`<index>_ccnew`, `_ccnew1`, ...) when it stopped before the swap, the old key (`<index>_ccold`, ...)
    /// when it stopped after it, at its drop. They cost every write their upkeep, or their disk, until dropped.
    public func leftovers() throws -> [String] {
        try connection.query(
            """
            SELECT c.relname::text FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
            WHERE x.indrelid = to_regclass('filter_matches') AND NOT x.indisvalid AND c.relname ~ '_cc(new|old)[0-9]*$'
            ORDER BY 1
            """
        ).rows.map { try $0.string(0) }
    }

    /// Drops the leftovers, then rebuilds the key when it is at least `minimumRatio` times its packed size.
    /// Neither blocks the app's reads or the runs' writes (both `CONCURRENTLY`); both need the table's owner
    /// (the role that runs `matcher migrate`). One at a time: a second call while one runs throws `Busy`.
    public func rebuild(minimumRatio: Double) throws -> PrimaryKeyRebuild {
        do {
            return try rebuildAsOwner(minimumRatio: minimumRatio)
        } catch let error as PostgresError where error.sqlState == "42501" {
            throw NotOwner(message: error.message)
        }
    }

    private func rebuildAsOwner(minimumRatio: Double) throws -> PrimaryKeyRebuild {
        let started = ContinuousClock.now
        // Whether this role may rebuild at all, before anything else: the first statement that needs the owner
        // runs only when a rebuild is due, so a timer set up with the worker's credentials would otherwise
        // pass, week after week, until the week the key needs it.
        let owner = try connection.query(
            "SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c WHERE c.oid = to_regclass('filter_matches')"
        ).rows.first
        if let owner, try !owner.bool(0) {
            throw NotOwner(message: "this role is neither the owner of filter_matches nor a member of its role")
        }
        guard try connection.query("SELECT pg_try_advisory_lock($1, $2)", Self.lock).rows[0].bool(0) else {
            throw Busy()
        }
        defer { _ = try? connection.query("SELECT pg_advisory_unlock($1, $2)", Self.lock) }
        // A rebuild takes as long as it takes, and waits for the transactions that hold the table (it blocks
        // none of them); the role's timeouts are for the runs' statements. The schedule's own limit bounds it.
        try connection.execute("SET statement_timeout = 0; SET lock_timeout = 0")
        // The client's call deadline too: REINDEX CONCURRENTLY sends nothing while it builds or waits, and a
        // deadline shutting the socket would leave the key at the rebuild's fillfactor (the RESET below).
        let callTimeout = connection.callTimeout
        connection.callTimeout = nil
        defer { connection.callTimeout = callTimeout }
        let dropped = try leftovers()
        for name in dropped {
            // A utility statement takes no parameters: the server quotes the name itself.
            let drop = "SELECT format('DROP INDEX CONCURRENTLY IF EXISTS %I', $1::text)"
            let statement = try connection.query(drop, [.text(name)]).rows[0].string(0)
            try connection.execute(statement)
        }
        // A rebuild killed before its RESET below (the process stopped, the deadline of its schedule) left the
        // key at the rebuild's fillfactor, and the runs' appends at its right edge with it: reset it first.
        let options = try connection.query(
            "SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class WHERE oid = to_regclass($1)",
            [.text(Self.index)]
        ).rows.first
        if let options, try options.string(0).contains("fillfactor=") {
            try connection.execute("ALTER INDEX \(Self.index) RESET (fillfactor)")
        }
        guard let before = try size() else {
            throw PostgresError(
                kind: .server, sqlState: "42P01",
                message: "no \(Self.index): filter_matches is not migrated here (run matcher migrate first)")
        }
        var after: PrimaryKeySize?
        if before.ratio >= minimumRatio {
            // Built with room on every leaf page for the days after: a key packed to 90 % splits nearly all
            // its pages on the next day's inserts (measured: 212 -> 333 MiB overnight; at 70 %, 272 -> 279).
            // The fillfactor is an option of the index, which the rebuild copies; reset afterwards, so that
            // the runs' inserts at the key's right edge still fill pages to 90 %. Both ALTERs take the lock
            // VACUUM takes, not the one writes or reads take.
            try connection.execute("ALTER INDEX \(Self.index) SET (fillfactor = \(Self.rebuildFillfactor))")
            defer { try? connection.execute("ALTER INDEX \(Self.index) RESET (fillfactor)") }
            try connection.execute("REINDEX INDEX CONCURRENTLY \(Self.index)")
            after = try size()
        }
        return PrimaryKeyRebuild(
            index: Self.index, before: before, after: after, minimumRatio: minimumRatio, droppedLeftovers: dropped,
            seconds: (ContinuousClock.now - started).seconds)
    }

    /// The advisory lock of `matcher reindex` (the worker's namespace: 0 migrations, 2 progress, 3 the sweep).
    public static let lock: [PostgresValue] = [.int4(MigrationRunner.lockNamespace), .int4(4)]
}
