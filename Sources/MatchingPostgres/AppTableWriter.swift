import Chronology
import Foundation
import Matching
import PostgresClient

/// Writes the app's tables (profiles, saved_filters, blocks) in bulk with binary COPY, the way the app
/// would: for seeding load worlds and for tests. The columns come from the MasterItem catalogue, so a new
/// item needs nothing here.
public struct AppTableWriter {
    private let connection: PostgresConnection

    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    /// Every item column (the `registered` item is `created_at`), then `updated_at`.
    static let profileColumns = ["id", "status", "plan"] + MasterItem.all.map(\.column) + ["updated_at"]

    /// Inserts profiles, or replaces every column of those that exist (one statement: the change-capture
    /// trigger sees one change per profile). Rows are written in one transaction.
    public func upsertProfiles(_ profiles: [Profile], updatedAt: Timestamp) throws {
        guard !profiles.isEmpty else { return }
        try connection.transaction { tx in
            try tx.execute(
                """
                CREATE TEMP TABLE matcher_profile_upsert (LIKE profiles INCLUDING DEFAULTS) ON COMMIT DROP
                """)
            try copyProfiles(profiles, updatedAt: updatedAt, into: "matcher_profile_upsert", tx)
            let columns = Self.profileColumns.joined(separator: ", ")
            let updates = Self.profileColumns.dropFirst().map { "\($0) = EXCLUDED.\($0)" }.joined(separator: ", ")
            try tx.execute(
                """
                INSERT INTO profiles (\(columns))
                SELECT \(columns) FROM matcher_profile_upsert ORDER BY id
                ON CONFLICT (id) DO UPDATE SET \(updates)
                """)
        }
    }

    /// Inserts new profiles straight into `profiles` (fast path for seeding; fails on an existing id).
    public func insertProfiles(_ profiles: [Profile], updatedAt: Timestamp) throws {
        guard !profiles.isEmpty else { return }
        try copyProfiles(profiles, updatedAt: updatedAt, into: "profiles", connection)
    }

    /// Inserts new profiles straight into `profiles`, each with its own `updated_at` (`updatedAts[i]` for
    /// `profiles[i]`); fast path for seeding, fails on an existing id.
    public func insertProfiles(_ profiles: [Profile], updatedAts: [Timestamp]) throws {
        precondition(profiles.count == updatedAts.count, "one updated_at per profile")
        guard !profiles.isEmpty else { return }
        try copyProfiles(profiles, updatedAt: { updatedAts[$0] }, into: "profiles", connection)
    }

    /// COPYs profiles into `table` (`profiles` or a table like it, such as a temporary one).
    public func copyProfiles(_ profiles: [Profile], updatedAts: [Timestamp], into table: String) throws {
        precondition(profiles.count == updatedAts.count, "one updated_at per profile")
        guard !profiles.isEmpty else { return }
        try copyProfiles(profiles, updatedAt: { updatedAts[$0] }, into: table, connection)
    }

    private func copyProfiles(
        _ profiles: [Profile], updatedAt: Timestamp, into table: String,
        _ tx: PostgresConnection
    ) throws {
        try copyProfiles(profiles, updatedAt: { _ in updatedAt }, into: table, tx)
    }

    private func copyProfiles(
        _ profiles: [Profile], updatedAt: (Int) -> Timestamp, into table: String,
        _ tx: PostgresConnection
    ) throws {
        let items = MasterItem.all
        let columns = Self.profileColumns.joined(separator: ", ")
        try tx.copyIn("COPY \(table) (\(columns)) FROM STDIN (FORMAT binary)") { writer in
            for (index, profile) in profiles.enumerated() {
                writer.beginRow(fieldCount: Self.profileColumns.count)
                writer.write(profile.id)
                writer.write(profile.status)
                writer.write(profile.plan)
                for item in items {
                    Self.write(profile.value(of: item), as: item.storage, writer)
                }
                writer.write(updatedAt(index))
            }
        }
    }

    static func write(_ value: ItemValue, as storage: ColumnStorage, _ writer: BinaryCopyWriter) {
        switch (storage, value) {
        case (.smallint, .code(let code)): writer.write(code)
        case (.nullableSmallint, .integer(let number)): writer.write(number.map { Int16(clamping: $0) })
        case (.nullableDate, .date(let date)): writer.write(date)
        case (.smallintArray, .codes(let codes)): writer.write(codes.map { Int16(clamping: $0) })
        case (.integerArray, .codes(let codes)): writer.write(codes)
        case (.boolean, .flag(let flag)): writer.write(flag)
        case (.timestamptz, .timestamp(let instant)): writer.write(instant)
        default:
            preconditionFailure("profile value \(value) does not fit column storage \(storage)")
        }
    }

    /// Inserts filters, or replaces those that exist.
    public func upsertFilters(_ filters: [SavedFilter]) throws {
        guard !filters.isEmpty else { return }
        try connection.transaction { tx in
            try tx.execute(
                "CREATE TEMP TABLE matcher_filter_upsert (LIKE saved_filters INCLUDING DEFAULTS) ON COMMIT DROP")
            try insertFilters(filters, into: "matcher_filter_upsert")
            try tx.execute(
                """
                INSERT INTO saved_filters SELECT * FROM matcher_filter_upsert ORDER BY id
                ON CONFLICT (id) DO UPDATE SET owner_id = EXCLUDED.owner_id, name = EXCLUDED.name,
                    conditions = EXCLUDED.conditions, notify = EXCLUDED.notify, notify_every = EXCLUDED.notify_every,
                    created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, deleted_at = EXCLUDED.deleted_at
                """)
        }
    }

    /// Inserts new filters straight into `saved_filters` with binary COPY (fast path for seeding; fails
    /// on an existing id). `table` may name a table like it, such as a temporary one.
    public func insertFilters(_ filters: [SavedFilter], into table: String = "saved_filters") throws {
        guard !filters.isEmpty else { return }
        try connection.copyIn(
            """
            COPY \(table) (id, owner_id, name, conditions, notify, notify_every, created_at, updated_at, deleted_at)
            FROM STDIN (FORMAT binary)
            """
        ) { writer in
            for f in filters {
                writer.beginRow(fieldCount: 9)
                writer.write(f.id)
                writer.write(f.ownerId)
                writer.write(f.name)
                writer.writeJSONB(f.conditionsJSON)
                writer.write(f.notify)
                writer.write(
                    PostgresInterval(
                        months: f.notifyEvery.months, days: f.notifyEvery.days,
                        microseconds: f.notifyEvery.microseconds))
                writer.write(f.createdAt)
                writer.write(f.updatedAt)
                writer.write(f.deletedAt)
            }
        }
    }

    /// Inserts new blocks straight into `blocks` with binary COPY (fast path for seeding; fails on an
    /// existing pair).
    public func copyBlocks(_ blocks: [Block]) throws {
        guard !blocks.isEmpty else { return }
        try connection.copyIn("COPY blocks (blocker_id, blocked_id) FROM STDIN (FORMAT binary)") { writer in
            for block in blocks {
                writer.beginRow(fieldCount: 2)
                writer.write(block.blockerId)
                writer.write(block.blockedId)
            }
        }
    }

    public func insertBlocks(_ blocks: [Block]) throws {
        guard !blocks.isEmpty else { return }
        try connection.query(
            """
            INSERT INTO blocks (blocker_id, blocked_id) SELECT * FROM unnest($1::bigint[], $2::bigint[])
            ON CONFLICT DO NOTHING
            """, [.int8Array(blocks.map(\.blockerId)), .int8Array(blocks.map(\.blockedId))])
    }
}
