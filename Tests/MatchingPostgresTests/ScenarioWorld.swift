import Chronology
import DeterministicRandom
import Foundation
import Matching
import MatchingPostgres
import MatchingTestSupport
import PostgresClient
import PostgresTestSupport

/// A deterministic world applied identically to PostgreSQL and to the in-memory store, so that the
/// PostgreSQL repositories can be held against the in-memory ones row for row.
struct ScenarioWorld {
    static let day1 = Timestamp(iso8601: "2026-03-01T03:00:00Z")!
    static let day2 = day1.adding(days: 1)
    static let day3 = day1.adding(days: 2)

    /// Man 1 with filter 100 (`World.filter`'s women) and women 10 and 11, written to the app's tables at day 1:
    /// the smallest world where one block shows (the run records (100, 10) and, unless 11 and 1 are blocked,
    /// (100, 11)).
    static func ownerAndTwoWomen(_ connection: PostgresConnection) throws -> AppTableWriter {
        let writer = AppTableWriter(connection: connection)
        try writer.upsertProfiles([World.profile(1, gender: 1), World.profile(10), World.profile(11)], updatedAt: day1)
        try writer.upsertFilters([World.filter(100, owner: 1)])
        return writer
    }

    var random: SplitMix64

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    mutating func profile(_ id: Int64, at clock: Timestamp, status: Int16? = nil) -> Profile {
        let gender = Int16(1 + random.next(2))
        let age = 20 + random.next(25)
        let born = clock.calendarDate(in: .tokyo).adding(days: -(age * 365 + random.next(365)))
        let residence: Int16 = random.next(10) < 4 ? 13 : Int16(random.next(49))  // includes 0 (unanswered)
        let personality = (0..<random.next(4)).map { _ in Int32(1 + random.next(40)) }
        return Profile.make(
            id: id, status: status ?? (random.next(20) == 0 ? 2 : 1), plan: Int16(random.next(4) == 0 ? 1 : 0),
            lastLoginAt: clock.adding(microseconds: -Int64(random.next(30 * 24)) * 3_600_000_000),
            createdAt: clock.adding(days: -100 - random.next(300)),
            [
                "gender": .code(gender),
                "age": .date(random.next(15) == 0 ? nil : born),
                "height": .integer(random.next(8) == 0 ? nil : Int32(145 + random.next(45))),
                "residence": .code(residence),
                "smoking": .code(Int16(random.next(7))),
                "personality": .codes(Array(Set(personality)).sorted()),
                "communities": .codes(random.next(3) == 0 ? [Int32(1 + random.next(5))] : []),
                "has_photo": .flag(random.next(5) != 0),
            ])
    }

    mutating func conditions() -> String {
        var parts = ["\"gender\": {\"anyOf\": [\(1 + random.next(2))]}"]
        let low = 20 + random.next(15)
        if random.next(3) != 0 { parts.append("\"age\": {\"min\": \(low), \"max\": \(low + 3 + random.next(10))}") }
        if random.next(2) == 0 { parts.append("\"residence\": {\"anyOf\": [13, \(1 + random.next(47))]}") }
        if random.next(4) == 0 { parts.append("\"height\": {\"min\": \(150 + random.next(20))}") }
        if random.next(4) == 0 { parts.append("\"smoking\": {\"anyOf\": [0, 1]}") }
        if random.next(5) == 0 {
            parts.append("\"personality\": {\"anyOf\": [\(1 + random.next(40)), \(1 + random.next(40))]}")
        }
        if random.next(6) == 0 { parts.append("\"communities\": {\"anyOf\": [\(1 + random.next(5))]}") }
        if random.next(4) == 0 { parts.append("\"has_photo\": true") }
        if random.next(4) == 0 { parts.append("\"last_login\": {\"withinDays\": \(1 + random.next(14))}") }
        return "{" + parts.joined(separator: ", ") + "}"
    }

    mutating func filter(_ id: Int64, owner: Int64, at clock: Timestamp) -> SavedFilter {
        let invalid = random.next(15) == 0
        let json = invalid ? "{\"age\": {\"min\": 40, \"max\": 30}}" : conditions()
        return SavedFilter(
            id: id, ownerId: owner, name: "search \(id)", conditionsJSON: json, notify: random.next(8) != 0,
            notifyEvery: NotifyInterval(months: 0, days: Int32(random.next(3) == 0 ? 2 : 1), microseconds: 0),
            createdAt: clock.adding(days: -5), updatedAt: clock.adding(days: -5), deletedAt: nil)
    }

    /// Day 1: profiles 1...n, filters for the first `filterCount` owners, blocks.
    mutating func day1(
        profiles n: Int64, filters filterCount: Int64
    ) -> (profiles: [Profile], filters: [SavedFilter], blocks: [Block]) {
        let profiles = (1...n).map { profile($0, at: Self.day1) }
        let filters = (1...filterCount).map { filter(1000 + $0, owner: 1 + ($0 * 7) % n, at: Self.day1) }
        let blocks = (0..<(n / 10)).map { _ in
            Block(blockerId: 1 + Int64(random.next(Int(n))), blockedId: 1 + Int64(random.next(Int(n))))
        }
        return (profiles, filters, Array(Set(blocks)))
    }
}

extension SplitMix64 {
    /// Uniform in 0..<bound (modulo: the scenarios were written against these draws).
    mutating func next(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}

/// The two stores side by side.
struct Twin {
    let database: TestDatabase
    let connection: PostgresConnection
    let postgres: PostgresMatchingStore
    let memory: InMemoryStore

    init(_ label: String = #function) throws {
        database = try MigratedDatabase.create(label)
        connection = try database.connect()
        let db = database
        postgres = PostgresMatchingStore(connection: connection) { try db.connect() }
        memory = InMemoryStore(now: ScenarioWorld.day1)
    }

    var writer: AppTableWriter { AppTableWriter(connection: connection) }

    /// Writes a world into PostgreSQL only (not the in-memory twin), as of day 1.
    func load(_ world: (profiles: [Profile], filters: [SavedFilter], blocks: [Block])) throws {
        try writer.upsertProfiles(world.profiles, updatedAt: ScenarioWorld.day1)
        try writer.upsertFilters(world.filters)
        try writer.insertBlocks(world.blocks)
    }

    /// Two twins holding the same seeded day-1 world (300 profiles, 60 filters), as two histories to compare:
    /// in PostgreSQL, and with `bothStores` in each in-memory twin too.
    static func pair(
        seed: UInt64, bothStores: Bool = false, _ label: String = #function
    ) throws -> (Twin, Twin) {
        let twins = (try Twin(label), try Twin(label))
        var world = ScenarioWorld(seed: seed)
        let day1 = world.day1(profiles: 300, filters: 60)
        for twin in [twins.0, twins.1] {
            if bothStores { try twin.loadBoth(day1) } else { try twin.load(day1) }
        }
        return twins
    }

    /// Writes a world into both stores, as of day 1.
    func loadBoth(_ world: (profiles: [Profile], filters: [SavedFilter], blocks: [Block])) throws {
        try load(world)
        memory.save(world.profiles, updatedAt: ScenarioWorld.day1)
        memory.save(world.filters)
        for b in world.blocks { memory.block(b.blockerId, b.blockedId) }
    }

    func saveProfiles(_ profiles: [Profile], at clock: Timestamp) throws {
        try writer.upsertProfiles(profiles, updatedAt: clock)
        memory.save(profiles, updatedAt: clock)
    }

    func saveFilters(_ filters: [SavedFilter]) throws {
        try writer.upsertFilters(filters)
        memory.save(filters)
    }

    func block(_ blocks: [Block]) throws {
        try writer.insertBlocks(blocks)
        for b in blocks { memory.block(b.blockerId, b.blockedId) }
    }

    @discardableResult
    func runBoth(
        at clock: Timestamp, shard: Shard = .all, maxPerFilter: Int = 100, unitFilterLimit: Int = 7
    )
        throws -> (postgres: RunSummary, memory: RunSummary)
    {
        memory.setClock(clock)
        let pg = try RunMatching(
            MatchingRepositories(store: postgres), options: PassOptions(unitFilterLimit: unitFilterLimit)
        )
        .execute(.init(now: clock, shard: shard, maxPerFilter: maxPerFilter))
        let mem = try RunMatching(
            MatchingRepositories(store: memory), options: PassOptions(unitFilterLimit: unitFilterLimit)
        )
        .execute(.init(now: clock, shard: shard, maxPerFilter: maxPerFilter))
        return (pg, mem)
    }
}

/// Rows of filter_matches and notifications in a store-independent text form (no generated ids).
enum Rows {
    /// The rows in one history and not the other, either way: what a failed comparison shows, not whole tables.
    /// Counted, not compared as sets: the text of a row has no generated id, so a duplicate notification reads
    /// the same as the one it doubles, and only its count tells them apart.
    static func differences(
        _ rows: (matches: [String], notifications: [String]),
        from reference: (matches: [String], notifications: [String])
    ) -> (matches: [String], notifications: [String]) {
        (surplus(rows.matches, reference.matches), surplus(rows.notifications, reference.notifications))
    }

    /// Each row as many times as one side holds it more often than the other.
    static func surplus(_ rows: [String], _ reference: [String]) -> [String] {
        var balance: [String: Int] = [:]
        for row in rows { balance[row, default: 0] += 1 }
        for row in reference { balance[row, default: 0] -= 1 }
        return balance.flatMap { row, count in Array(repeating: row, count: abs(count)) }.sorted()
    }

    static func of(_ connection: PostgresConnection) throws -> (matches: [String], notifications: [String]) {
        let matches = try connection.query(
            """
            SELECT m.filter_id, m.profile_id, m.matched_at, n.filter_id, n.created_at, m.mutual, m.silent
            FROM filter_matches m LEFT JOIN notifications n ON n.id = m.notification_id
            ORDER BY m.filter_id, m.profile_id
            """
        ).rows.map { r in
            let note = try r.optionalInt64(3).map { "\($0)@\(try r.timestamp(4))" } ?? "no"
            return "\(try r.int64(0))/\(try r.int64(1)) at \(try r.timestamp(2)) notified \(note)"
                + "\(try r.bool(5) ? " mutual" : "")\(try r.bool(6) ? " silent" : "")"
        }
        let notifications = try connection.query(
            """
            SELECT recipient_id, filter_id, match_count, profile_ids, created_at, mutual_count FROM notifications
            """
        ).rows.map { r in
            "\(try r.int64(0)) \(try r.int64(1)) \(try r.int32(2)) \(try r.int64Array(3)) \(try r.timestamp(4))"
                + " mutual \(try r.int32(5))"
        }.sorted()
        return (matches, notifications)
    }

    static func of(_ store: InMemoryStore) -> (matches: [String], notifications: [String]) {
        let notes = store.allNotifications
        let byId = Dictionary(uniqueKeysWithValues: notes.map { ($0.id, $0) })
        let silent = store.silentPairs
        let matches = store.allMatches.map { m in
            let note = m.notificationId.flatMap { byId[$0] }.map { "\($0.filterId)@\($0.createdAt)" } ?? "no"
            return "\(m.filterId)/\(m.profileId) at \(m.matchedAt) notified \(note)"
                + "\(m.mutual ? " mutual" : "")\(silent.contains(m.pair) ? " silent" : "")"
        }
        let notifications = notes.map {
            "\($0.recipientId) \($0.filterId) \($0.matchCount) \($0.profileIds) \($0.createdAt) mutual \($0.mutualCount)"
        }.sorted()
        return (matches, notifications)
    }
}
