import Chronology
import Dispatch
import Foundation
import Matching
import MatchingPostgres
import PostgresClient

/// What to do when the database already holds a world.
public enum ExistingRows: String, Sendable {
    /// Stop with an error (the default: a seed never mixes into data by accident).
    case refuse
    /// Add the new world after the existing one (ids above the current maximum).
    case append
    /// Empty the app's and the worker's tables first (TRUNCATE … RESTART IDENTITY).
    case replace
}

public struct SeedError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// What a seed wrote: rows per table, other counts, and how long it took.
public struct SeedSummary: Sendable {
    public var title: String
    public var seed: UInt64
    public var now: Timestamp
    /// Rows written per table, in the order written: a stable key for `--format json`, a label for people.
    public var rows: [(key: String, label: String, count: Int)] = []
    /// Other counts worth printing (invalid filters, hidden profiles…), keyed and labelled likewise.
    public var details: [(key: String, label: String, count: Int)] = []
    public var seconds: Double = 0

    public init(title: String, seed: UInt64, now: Timestamp) {
        self.title = title
        self.seed = seed
        self.now = now
    }

    public func rows(_ label: String) -> Int { rows.first { $0.label == label }?.count ?? 0 }
    public func detail(_ label: String) -> Int { details.first { $0.label == label }?.count ?? 0 }
}

/// Writes a world of the model into PostgreSQL with binary COPY, in one transaction: profiles (with
/// their blocks), then saved filters built around their owners, then ANALYZE.
public struct WorldSeeder {
    public let connection: PostgresConnection
    /// Called with a short line after each step (for logs); may be nil.
    public var progress: ((String) -> Void)?

    public static let profileChunk = 20_000
    public static let filterChunk = 20_000

    public init(connection: PostgresConnection, progress: ((String) -> Void)? = nil) {
        self.connection = connection
        self.progress = progress
    }

    /// Seeds `profileCount` profiles and `filterCount` filters of the world (seed, now).
    public func seedWorld(
        profiles profileCount: Int, filters filterCount: Int, seed: UInt64, now: Timestamp,
        existing: ExistingRows
    ) throws -> SeedSummary {
        precondition(profileCount >= 0 && filterCount >= 0)
        if filterCount > 0 && profileCount == 0 {
            throw SeedError("filters need owners: --profiles must be at least 1")
        }
        let started = DispatchTime.now()
        var summary = SeedSummary(title: "world", seed: seed, now: now)
        let model = SeedWorldModel(seed: seed, now: now)
        let generator = SeedFilterGenerator(seed: seed, now: now)
        try connection.transaction { tx in
            let start = try Self.prepare(tx, existing: existing)
            let writer = AppTableWriter(connection: tx)
            let population = start.profileId...(start.profileId + Int64(profileCount) - 1)

            // Profiles, chunk by chunk, the next chunk generated while this one is sent; blocks kept for later.
            var blocks: [Block] = []
            var statusCounts: [Int16: Int] = [:]
            var paid = 0
            let chunks = (profileCount + Self.profileChunk - 1) / Self.profileChunk
            try pipelined(chunks) { chunk -> (members: [SeedWorldModel.Member], blocks: [Block]) in
                let first = population.lowerBound + Int64(chunk * Self.profileChunk)
                let last = min(population.upperBound, first + Int64(Self.profileChunk) - 1)
                var members: [SeedWorldModel.Member] = []
                members.reserveCapacity(Int(last - first + 1))
                var chunkBlocks: [Block] = []
                for id in first...last {
                    members.append(model.member(id: id))
                    for blocked in model.blocks(of: id, in: population) {
                        chunkBlocks.append(Block(blockerId: id, blockedId: blocked))
                    }
                }
                return (members, chunkBlocks)
            } consume: { batch in
                try writer.insertProfiles(batch.members.map(\.profile), updatedAts: batch.members.map(\.updatedAt))
                for member in batch.members {
                    statusCounts[member.profile.status, default: 0] += 1
                    if member.profile.plan == Profile.Plan.paid { paid += 1 }
                }
                blocks += batch.blocks
            }
            progress?("profiles written: \(profileCount)")

            var invalid = 0, deleted = 0
            let filterChunks = (filterCount + Self.filterChunk - 1) / Self.filterChunk
            try pipelined(filterChunks) { chunk -> [SeededFilter] in
                let first = start.filterId + Int64(chunk * Self.filterChunk)
                let last = min(start.filterId + Int64(filterCount) - 1, first + Int64(Self.filterChunk) - 1)
                return (first...last).map { id in
                    let owner = model.owner(ofFilter: id, in: population)
                    return generator.filter(id: id, owner: SeedOwner(owner, today: model.today))
                }
            } consume: { batch in
                try writer.insertFilters(batch.map(\.filter))
                invalid += batch.filter { $0.invalidKind != nil }.count
                deleted += batch.filter { $0.filter.isDeleted }.count
            }
            progress?("filters written: \(filterCount)")

            try writer.copyBlocks(blocks)
            progress?("blocks written: \(blocks.count)")
            try tx.execute("ANALYZE profiles; ANALYZE saved_filters; ANALYZE blocks")

            summary.rows = [
                ("profiles", "profiles", profileCount),
                ("saved_filters", "saved_filters", filterCount), ("blocks", "blocks", blocks.count),
            ]
            summary.details = [
                ("first_profile_id", "first profile id", Int(start.profileId)),
                ("first_filter_id", "first filter id", Int(start.filterId)),
                ("profiles_active", "profiles active", statusCounts[1, default: 0]),
                ("profiles_hidden", "profiles hidden", statusCounts[2, default: 0]),
                ("profiles_suspended", "profiles suspended", statusCounts[3, default: 0]),
                ("profiles_deleted", "profiles deleted", statusCounts[4, default: 0]),
                ("profiles_paid", "profiles paid", paid),
                ("filters_invalid", "filters invalid", invalid),
                ("filters_deleted", "filters deleted", deleted),
            ]
        }
        summary.seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        return summary
    }

    /// Where a new world starts, once the database is ready for it.
    struct Start {
        let profileId: Int64
        let filterId: Int64
    }

    /// Refuses, empties or measures the existing world, per `existing`.
    static func prepare(_ tx: PostgresConnection, existing: ExistingRows) throws -> Start {
        let counts = try tx.query(
            """
            SELECT (SELECT count(*) FROM profiles), (SELECT count(*) FROM saved_filters),
                   (SELECT coalesce(max(id), 0) FROM profiles), (SELECT coalesce(max(id), 0) FROM saved_filters)
            """
        ).rows[0]
        let profiles = try counts.int64(0), filters = try counts.int64(1)
        switch existing {
        case .refuse:
            if profiles > 0 || filters > 0 {
                throw SeedError(
                    """
                    the database already has \(profiles) profiles and \(filters) saved filters; \
                    pass --append to add to them or --replace to empty the tables first
                    """)
            }
            return Start(profileId: 1, filterId: 1)
        case .append:
            return Start(profileId: try counts.int64(2) + 1, filterId: try counts.int64(3) + 1)
        case .replace:
            try truncateWorld(tx)
            return Start(profileId: 1, filterId: 1)
        }
    }

    /// The tables `--replace` empties: the app's, the worker's outputs and its bookkeeping (every
    /// `matcher_*` table of the schema except the migrations' record).
    static func worldTables(_ tx: PostgresConnection) throws -> [String] {
        let bookkeeping = try tx.query(
            """
            SELECT tablename FROM pg_tables
            WHERE schemaname = current_schema() AND left(tablename, 8) = 'matcher_' AND tablename <> 'matcher_schema_migrations'
            ORDER BY tablename
            """
        ).rows.map { try $0.string(0) }
        return ["profiles", "saved_filters", "blocks", "filter_matches", "notifications"] + bookkeeping
    }

    static func truncateWorld(_ tx: PostgresConnection) throws {
        // Names from the catalogue, quoted as identifiers (a `"` inside doubled: review of session 34 emptied an
        // unrelated table through a bookkeeping-looking name holding quotes).
        let tables = try worldTables(tx).map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
            .joined(separator: ", ")
        try tx.execute("TRUNCATE \(tables) RESTART IDENTITY")
    }
}

/// Runs `produce` for chunks 0..<count on a background thread, one chunk ahead of `consume`, which
/// runs on the calling thread in chunk order. If `consume` throws, the chunk under way is awaited and
/// the error rethrown.
func pipelined<T>(_ count: Int, produce: @escaping @Sendable (Int) -> T, consume: (T) throws -> Void) rethrows {
    guard count > 0 else { return }
    let queue = DispatchQueue(label: "matcher.seed.produce")
    func start(_ index: Int) -> (PipelineBox<T>, DispatchGroup) {
        let box = PipelineBox<T>(), group = DispatchGroup()
        queue.async(group: group) { box.value = produce(index) }
        return (box, group)
    }
    var pending = start(0)
    for index in 0..<count {
        pending.1.wait()
        let value = pending.0.value!
        if index + 1 < count { pending = start(index + 1) }
        do {
            try consume(value)
        } catch {
            pending.1.wait()
            throw error
        }
    }
}

private final class PipelineBox<T>: @unchecked Sendable {
    var value: T?
}
