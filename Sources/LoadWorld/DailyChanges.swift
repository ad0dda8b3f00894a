import Chronology
import Dispatch
import Foundation
import Matching
import MatchingPostgres
import PostgresClient

/// What the seeder needs to know of an existing world to change it: each profile's status and the
/// traits a filter is built around, and each filter's owner. Read once, in id order.
public struct WorldSnapshot: Sendable {
    public struct ProfileRow: Sendable, Hashable {
        public let id: Int64
        public let status: Int16
        public let gender: Int16
        public let birthDate: CalendarDate?
        public let residence: Int16
        public let plan: Int16
        public let createdAt: Timestamp
    }

    public struct FilterRow: Sendable, Hashable {
        public let id: Int64
        public let ownerId: Int64
        public let deleted: Bool
    }

    /// Ascending id.
    public let profiles: [ProfileRow]
    /// Ascending id.
    public let filters: [FilterRow]

    public init(profiles: [ProfileRow], filters: [FilterRow]) {
        self.profiles = profiles
        self.filters = filters
    }

    public var maxProfileId: Int64 { profiles.last?.id ?? 0 }
    public var maxFilterId: Int64 { filters.last?.id ?? 0 }

    /// The profile with `id` (binary search).
    public func profile(_ id: Int64) -> ProfileRow? {
        var low = 0, high = profiles.count
        while low < high {
            let mid = (low + high) / 2
            if profiles[mid].id < id { low = mid + 1 } else { high = mid }
        }
        return low < profiles.count && profiles[low].id == id ? profiles[low] : nil
    }

    public static func read(_ connection: PostgresConnection) throws -> WorldSnapshot {
        var profiles: [ProfileRow] = []
        try connection.copyOut(
            """
            COPY (SELECT id, status, gender, birth_date, residence, plan, created_at FROM profiles ORDER BY id)
            TO STDOUT (FORMAT binary)
            """
        ) { row in
            profiles.append(
                ProfileRow(
                    id: try row.int64() ?? 0, status: try row.int16() ?? 0, gender: try row.int16() ?? 0,
                    birthDate: try row.date(), residence: try row.int16() ?? 0, plan: try row.int16() ?? 0,
                    createdAt: try row.timestamp() ?? Timestamp(microsecondsSinceEpoch: 0)))
        }
        var filters: [FilterRow] = []
        try connection.copyOut(
            """
            COPY (SELECT id, owner_id, deleted_at IS NOT NULL FROM saved_filters ORDER BY id) TO STDOUT (FORMAT binary)
            """
        ) { row in
            filters.append(
                FilterRow(id: try row.int64() ?? 0, ownerId: try row.int64() ?? 0, deleted: try row.bool() ?? false))
        }
        return WorldSnapshot(profiles: profiles, filters: filters)
    }
}

/// The items a day's edit may change, as a profile holds them before the day: the columns' values (0 or an
/// empty array for an unanswered item, a nil income band). An edit chooses a value other than these, so that
/// the change capture (`OLD.x IS DISTINCT FROM NEW.x`) sees every edit the day counts.
public struct EditableItems: Sendable, Hashable {
    public var residence: Int16
    public var personality: [Int16]
    public var communities: [Int32]
    public var incomeBand: Int16?
    public var smoking: Int16
    public var drinking: Int16
    public var marriageIntent: Int16
    public var hasPhoto: Bool
    public var hasIntroduction: Bool
    public var verified: Bool

    public init(
        residence: Int16 = 0, personality: [Int16] = [], communities: [Int32] = [], incomeBand: Int16? = nil,
        smoking: Int16 = 0, drinking: Int16 = 0, marriageIntent: Int16 = 0, hasPhoto: Bool = false,
        hasIntroduction: Bool = false, verified: Bool = false
    ) {
        self.residence = residence
        self.personality = personality
        self.communities = communities
        self.incomeBand = incomeBand
        self.smoking = smoking
        self.drinking = drinking
        self.marriageIntent = marriageIntent
        self.hasPhoto = hasPhoto
        self.hasIntroduction = hasIntroduction
        self.verified = verified
    }

    /// The profiles `ids`' items (read only for the day's updated profiles: the snapshot of every profile
    /// stays small).
    public static func read(_ ids: [Int64], _ connection: PostgresConnection) throws -> [Int64: EditableItems] {
        guard !ids.isEmpty else { return [:] }
        let rows = try connection.query(
            """
            SELECT id, coalesce(residence, 0), coalesce(personality, '{}'), coalesce(communities, '{}'), income_band,
                   coalesce(smoking, 0), coalesce(drinking, 0), coalesce(marriage_intent, 0),
                   coalesce(has_photo, false), coalesce(has_introduction, false), coalesce(verified, false)
            FROM profiles WHERE id = ANY($1)
            """, [.int8Array(ids)]
        ).rows
        var items: [Int64: EditableItems] = [:]
        items.reserveCapacity(rows.count)
        for row in rows {
            items[try row.int64(0)] = EditableItems(
                residence: try row.int16(1), personality: try row.int16Array(2), communities: try row.int32Array(3),
                incomeBand: try row.optionalInt16(4), smoking: try row.int16(5), drinking: try row.int16(6),
                marriageIntent: try row.int16(7), hasPhoto: try row.bool(8), hasIntroduction: try row.bool(9),
                verified: try row.bool(10))
        }
        return items
    }
}

/// How one day of changes splits, per profile change (`--changes K`): K = updates + inserts; the rest
/// are extra, in proportion to K.
public struct DailyChangeMix: Sendable, Hashable {
    /// The share of K that are new registrations (the rest are updates of existing profiles).
    public var insertShare = 0.15
    public var hideShare = 0.02
    public var deleteShare = 0.01
    /// Taken from the hidden profiles, as many as there are.
    public var reactivateShare = 0.01
    public var filterEditShare = 0.03
    public var filterDeleteShare = 0.006
    public var newFilterShare = 0.02
    public var blockShare = 0.05
    /// The chance that an update edits items (one or two) besides its login: 0.45 in the growing mix, so that
    /// `--changes` of 6 % edits about 2.3 % of the members a day; 0.9 in the steady mix, so that `--changes` of
    /// 6.7 % makes the day the soak's issue asks for (sign-ups 1 %, edits about 5 %). Every such update changes
    /// at least one item's value (`DailyChangePlan.update`).
    public var editChance = 0.45
    /// Whether the day's deleted members' live filters are among the filters deleted (as the app deletes an
    /// account's saved filters with it), before others are picked at random.
    public var deletesFiltersOfDeletedMembers = false

    public init() {}

    /// The share of `--changes` K that edits items: the updates (K less the sign-ups) times `editChance`.
    public var itemEditShare: Double { (1 - insertShare) * editChance }

    /// A service still growing: about 0.9 % of the members sign up each day (at `--changes` of 6 %) and few
    /// leave, so the members, the filters and a day's matches grow by about a fifth in 30 days.
    public static let standard = DailyChangeMix()
    /// A mature service: as many members leave as sign up, as many hidden members come back as hide, and as
    /// many filters are deleted as created (a leaving member's first, and all of a leaving member's when they
    /// are more), so that day 30 has day 3's members, filters and work, and what differs between them is only
    /// the history the tables hold.
    public static let steady: DailyChangeMix = {
        var mix = DailyChangeMix()
        mix.deleteShare = mix.insertShare
        mix.reactivateShare = mix.hideShare
        mix.filterDeleteShare = mix.newFilterShare
        mix.deletesFiltersOfDeletedMembers = true
        mix.editChance = 0.9
        return mix
    }()

    /// The mixes by the name `matcher seed --mix` and `matcher-bench soak --mix` take.
    public enum Name: String, Sendable, CaseIterable {
        case growing, steady

        public var mix: DailyChangeMix { self == .steady ? .steady : .standard }
    }
}

/// One day of changes to an existing world, computed in pure Swift from (seed, now, snapshot), so that a
/// seed and a world always give the same day. Every profile touched is touched by one kind of change
/// only (the sets are disjoint), so that the counts are exact.
public struct DailyChangePlan: Sendable {
    /// An existing profile's edit: a new login, and some items changed (nil: unchanged).
    public struct ProfileUpdate: Sendable, Hashable {
        public let id: Int64
        public let at: Timestamp
        public var residence: Int16?
        public var personality: [Int16]?
        public var communities: [Int32]?
        public var incomeBand: Int16?
        public var smoking: Int16?
        public var drinking: Int16?
        public var marriageIntent: Int16?
        public var hasPhoto: Bool?
        public var hasIntroduction: Bool?
        public var verified: Bool?
        public var plan: Int16?

        /// Whether it sets an item's value (a login or a plan change alone is activity, not a matching change).
        public var setsItems: Bool {
            residence != nil || personality != nil || communities != nil || incomeBand != nil || smoking != nil
                || drinking != nil || marriageIntent != nil || hasPhoto != nil || hasIntroduction != nil
                || verified != nil
        }

        /// Whether it changes an item of `current` (what the change capture records), not only writes one.
        public func changesItems(from current: EditableItems) -> Bool {
            func differs<T: Equatable>(_ value: T?, _ old: T) -> Bool { value.map { $0 != old } ?? false }
            return differs(residence, current.residence) || differs(personality, current.personality)
                || differs(communities, current.communities)
                || (incomeBand != nil && incomeBand != current.incomeBand) || differs(smoking, current.smoking)
                || differs(drinking, current.drinking) || differs(marriageIntent, current.marriageIntent)
                || differs(hasPhoto, current.hasPhoto) || differs(hasIntroduction, current.hasIntroduction)
                || differs(verified, current.verified)
        }
    }

    public struct StatusChange: Sendable, Hashable {
        public let id: Int64
        public let status: Int16
        public let at: Timestamp
    }

    public struct FilterEdit: Sendable, Hashable {
        public let id: Int64
        public let conditionsJSON: String
        public let at: Timestamp
    }

    public struct FilterDelete: Sendable, Hashable {
        public let id: Int64
        public let at: Timestamp
    }

    public let now: Timestamp
    public var updates: [ProfileUpdate] = []
    public var inserts: [SeedWorldModel.Member] = []
    /// Hides (status 2), deletes (4) and reactivations (hidden back to 1).
    public var statusChanges: [StatusChange] = []
    public var filterEdits: [FilterEdit] = []
    public var filterDeletes: [FilterDelete] = []
    public var newFilters: [SeededFilter] = []
    public var blocks: [Block] = []
    /// The updates that change an item's value (`ProfileUpdate.changesItems`), counted against the items they
    /// held before the day: the day's edits as the change capture sees them.
    public var editedProfiles = 0

    public var hides: Int { statusChanges.filter { $0.status == Profile.Status.hidden }.count }
    public var deletes: Int { statusChanges.filter { $0.status == Profile.Status.deleted }.count }
    public var reactivations: Int { statusChanges.filter { $0.status == Profile.Status.active }.count }
    /// Every profile id the day inserts or changes (each once).
    public var touchedProfileIds: [Int64] {
        updates.map(\.id) + inserts.map(\.profile.id) + statusChanges.map(\.id)
    }

    /// Plans `count` profile changes (updates + inserts) and the rest of the day's changes. `items` gives the
    /// current items of the profiles the day updates (`EditableItems.read`), so that each edit changes a value.
    public static func make(
        count: Int, seed: UInt64, now: Timestamp, snapshot: WorldSnapshot,
        mix: DailyChangeMix = .standard, items: ([Int64]) throws -> [Int64: EditableItems]
    ) rethrows -> DailyChangePlan {
        var plan = DailyChangePlan(now: now)
        let day = UInt64(bitPattern: now.microsecondsSinceEpoch / Timestamp.microsecondsPerDay)
        var random = SeedRandom(seed: seed, stream: .changes, index: day)
        let model = SeedWorldModel(seed: seed ^ (day &* 0x9E37_79B9_7F4A_7C15), now: now)
        let generator = SeedFilterGenerator(seed: model.seed, now: now)
        func during(_ random: inout SeedRandom) -> Timestamp {
            now.adding(microseconds: -Int64(random.below(Int(Timestamp.microsecondsPerDay))))
        }
        func share(_ s: Double) -> Int { Int((Double(count) * s).rounded()) }

        let active = snapshot.profiles.filter { $0.status == Profile.Status.active }
        let hidden = snapshot.profiles.filter { $0.status == Profile.Status.hidden }
        let insertCount = share(mix.insertShare)
        let updateCount = min(count - insertCount, active.count)
        let hideCount = min(share(mix.hideShare), active.count - updateCount)
        let deleteCount = min(share(mix.deleteShare), active.count - updateCount - hideCount)
        let reactivateCount = min(share(mix.reactivateShare), hidden.count)

        // Disjoint sets of active members: updated, hidden, deleted.
        let picked = random.distinctIndices(updateCount + hideCount + deleteCount, of: active.count)
        let updatedRows = picked.prefix(updateCount).map { active[$0] }.sorted(by: { $0.id < $1.id })
        let currentItems = try items(updatedRows.map(\.id))
        for row in updatedRows {
            var rowRandom = SeedRandom(seed: model.seed, stream: .changeRow, index: UInt64(bitPattern: row.id))
            let current = currentItems[row.id] ?? EditableItems(residence: row.residence)
            let update = update(
                row, current: current, at: during(&rowRandom), model: model, editChance: mix.editChance, &rowRandom)
            if update.changesItems(from: current) { plan.editedProfiles += 1 }
            plan.updates.append(update)
        }
        for index in picked.dropFirst(updateCount).prefix(hideCount) {
            plan.statusChanges.append(
                StatusChange(id: active[index].id, status: Profile.Status.hidden, at: during(&random)))
        }
        for index in picked.dropFirst(updateCount + hideCount) {
            plan.statusChanges.append(
                StatusChange(id: active[index].id, status: Profile.Status.deleted, at: during(&random)))
        }
        for index in random.distinctIndices(reactivateCount, of: hidden.count) {
            plan.statusChanges.append(
                StatusChange(id: hidden[index].id, status: Profile.Status.active, at: during(&random)))
        }
        plan.statusChanges.sort { $0.id < $1.id }

        // New registrations, above the highest id, active.
        for offset in 0..<insertCount {
            let id = snapshot.maxProfileId + 1 + Int64(offset)
            var rowRandom = SeedRandom(seed: model.seed, stream: .changeRow, index: UInt64(bitPattern: id))
            let member = model.member(id: id, registeredAt: during(&rowRandom))
            // A member who registered today is active.
            let profile = Profile(
                id: id, status: Profile.Status.active, plan: member.profile.plan, values: member.profile.values)
            plan.inserts.append(SeedWorldModel.Member(profile: profile, updatedAt: member.updatedAt))
        }

        // Filters: edits and deletes of live filters (disjoint), new filters of new and existing members.
        let gone = Set(plan.statusChanges.filter { $0.status != Profile.Status.active }.map(\.id))
        let deletedMembers = Set(plan.statusChanges.filter { $0.status == Profile.Status.deleted }.map(\.id))
        let leaving =
            mix.deletesFiltersOfDeletedMembers
            ? snapshot.filters.filter { !$0.deleted && deletedMembers.contains($0.ownerId) } : []
        let leavingIds = Set(leaving.map(\.id))
        let live = snapshot.filters.filter { !$0.deleted && !leavingIds.contains($0.id) }
        let editCount = min(share(mix.filterEditShare), live.count)
        let filterDeleteCount = min(max(0, share(mix.filterDeleteShare) - leaving.count), live.count - editCount)
        let pickedFilters = random.distinctIndices(editCount + filterDeleteCount, of: live.count)
        for filter in leaving {
            plan.filterDeletes.append(FilterDelete(id: filter.id, at: during(&random)))
        }
        for index in pickedFilters.prefix(editCount) {
            let filter = live[index]
            var rowRandom = SeedRandom(seed: model.seed, stream: .filter, index: UInt64(bitPattern: filter.id))
            let at = during(&rowRandom)
            let owner =
                snapshot.profile(filter.ownerId).map { Self.owner(of: $0, today: model.today) }
                ?? SeedOwner(id: filter.ownerId, gender: 0, age: nil, residence: 0, plan: 0, createdAt: at)
            plan.filterEdits.append(
                FilterEdit(
                    id: filter.id, conditionsJSON: generator.editedConditions(owner: owner, &rowRandom), at: at))
        }
        plan.filterEdits.sort { $0.id < $1.id }
        for index in pickedFilters.dropFirst(editCount) {
            plan.filterDeletes.append(FilterDelete(id: live[index].id, at: during(&random)))
        }
        plan.filterDeletes.sort { $0.id < $1.id }

        let newFilterCount = share(mix.newFilterShare)
        let eligibleOwners = active.filter { !gone.contains($0.id) }
        for offset in 0..<newFilterCount {
            let id = snapshot.maxFilterId + 1 + Int64(offset)
            let owner: SeedOwner
            if !plan.inserts.isEmpty, random.chance(0.5) || eligibleOwners.isEmpty {
                let member = plan.inserts[random.below(plan.inserts.count)]
                owner = SeedOwner(member, today: model.today)
            } else if !eligibleOwners.isEmpty {
                owner = Self.owner(of: eligibleOwners[random.below(eligibleOwners.count)], today: model.today)
            } else {
                break
            }
            let seeded = generator.filter(id: id, owner: owner)
            // A filter saved today: created and updated during the day, not deleted.
            let at = max(during(&random), owner.createdAt)
            let f = seeded.filter
            plan.newFilters.append(
                SeededFilter(
                    filter: SavedFilter(
                        id: f.id, ownerId: f.ownerId, name: f.name, conditionsJSON: f.conditionsJSON,
                        notify: f.notify, notifyEvery: f.notifyEvery, createdAt: at, updatedAt: at),
                    invalidKind: seeded.invalidKind, expectedError: seeded.expectedError))
        }

        // Blocks: made by active members, of someone new today (40 %) or anyone.
        let blockCount = share(mix.blockShare)
        var seen = Set<Block>()
        let everyone = snapshot.profiles.map(\.id) + plan.inserts.map(\.profile.id)
        var attempts = 0
        while plan.blocks.count < blockCount, attempts < blockCount * 10, !eligibleOwners.isEmpty, everyone.count > 1 {
            attempts += 1
            let blocker = eligibleOwners[random.below(eligibleOwners.count)].id
            let blocked =
                !plan.inserts.isEmpty && random.chance(0.4)
                ? plan.inserts[random.below(plan.inserts.count)].profile.id : everyone[random.below(everyone.count)]
            let block = Block(blockerId: blocker, blockedId: blocked)
            if blocker != blocked, seen.insert(block).inserted { plan.blocks.append(block) }
        }
        return plan
    }

    static func owner(of row: WorldSnapshot.ProfileRow, today: CalendarDate) -> SeedOwner {
        SeedOwner(
            id: row.id, gender: row.gender, age: row.birthDate.map { today.fullYears(since: $0) },
            residence: row.residence, plan: row.plan, createdAt: row.createdAt)
    }

    /// A login, and with `editChance` one or two edits of items: a move (to a neighbouring prefecture mostly),
    /// personality, communities, income, smoking, drinking, marriage intent, photo, introduction, verification.
    /// Each edit gives its item a value other than `current`'s (a flag is flipped; a drawn value equal to the
    /// current one is drawn again), so that every edit changes what the change capture compares. A plan change
    /// (a column the capture does not watch) comes on top of the edits, not as one of them.
    static func update(
        _ row: WorldSnapshot.ProfileRow, current: EditableItems, at: Timestamp, model: SeedWorldModel,
        editChance: Double, _ random: inout SeedRandom
    ) -> ProfileUpdate {
        var update = ProfileUpdate(id: row.id, at: at)
        guard random.chance(editChance) else { return update }
        let edits = random.chance(0.7) ? 1 : 2
        var made = 0, draws = 0
        while made < edits, draws < 32 {
            draws += 1
            let kind = editKinds.draw(&random)
            if kind == .plan {
                update.plan = row.plan == Profile.Plan.paid ? Profile.Plan.free : Profile.Plan.paid
                continue
            }
            made += 1
            switch kind {
            case .moved:
                let neighbours = JapanGeography.neighbours[current.residence] ?? []
                update.residence = differing(from: current.residence, &random) { random in
                    !neighbours.isEmpty && random.chance(0.6)
                        ? random.element(neighbours) : JapanGeography.residence.draw(&random)
                }
            case .personality:
                update.personality = differing(from: current.personality, &random) { random in
                    model.personality(&random).map { Int16($0) }
                }
            case .communities:
                update.communities = differing(from: current.communities, &random) { model.communities(&$0) }
            case .income:
                update.incomeBand =
                    differing(from: current.incomeBand, &random) { random -> Int16? in Int16(1 + random.below(9)) }
                    ?? nil
            case .smoking:
                update.smoking = differing(from: current.smoking, &random) { random -> Int16 in
                    random.element([1, 1, 3, 5, 6])
                }
            case .drinking:
                update.drinking = differing(from: current.drinking, &random) { Int16(1 + $0.below(3)) }
            case .marriageIntent:
                update.marriageIntent = differing(from: current.marriageIntent, &random) { Int16(1 + $0.below(5)) }
            case .photo:
                update.hasPhoto = !current.hasPhoto
            case .introduction:
                update.hasIntroduction = !current.hasIntroduction
            case .verified:
                update.verified = !current.verified
            case .plan:
                break
            }
        }
        return update
    }

    /// A value of `draw` other than `current`, drawn again while equal (nil after 32 equal draws, which the
    /// world's distributions make vanishingly rare: the edit is then not made).
    static func differing<T: Equatable>(
        from current: T, _ random: inout SeedRandom, _ draw: (inout SeedRandom) -> T
    ) -> T? {
        for _ in 0..<32 {
            let value = draw(&random)
            if value != current { return value }
        }
        return nil
    }

    enum EditKind: Sendable {
        case moved, personality, communities, income, smoking, drinking, marriageIntent, photo, introduction, verified,
            plan
    }

    static let editKinds = WeightedTable<EditKind>([
        (.moved, 12), (.personality, 20), (.communities, 18), (.income, 8), (.smoking, 6), (.drinking, 5),
        (.marriageIntent, 8), (.photo, 10), (.introduction, 8), (.verified, 5), (.plan, 6),
    ])
}

extension DailyChangePlan.ProfileUpdate {
    init(id: Int64, at: Timestamp) {
        self.id = id
        self.at = at
    }
}

/// Applies a day of changes as the app would: ordinary, parameterized INSERT and UPDATE statements
/// (bulk through COPY into temporary tables, or unnest of arrays), in one transaction, so that the
/// change-capture trigger sees every profile touched.
public struct DailyChangeApplier {
    public let connection: PostgresConnection

    public init(connection: PostgresConnection) {
        self.connection = connection
    }

    /// Reads the world, plans the day and applies it.
    public func apply(
        count: Int, seed: UInt64, now: Timestamp, mix: DailyChangeMix = .standard
    )
        throws -> (plan: DailyChangePlan, summary: SeedSummary)
    {
        let started = DispatchTime.now()
        var summary = SeedSummary(title: "changes", seed: seed, now: now)
        let plan = try connection.transaction { tx -> DailyChangePlan in
            let snapshot = try WorldSnapshot.read(tx)
            guard !snapshot.profiles.isEmpty else {
                throw SeedError(
                    "the database has no profiles to change: seed a world first (matcher seed --profiles N)")
            }
            var plan = try DailyChangePlan.make(
                count: count, seed: seed, now: now, snapshot: snapshot, mix: mix,
                items: { try EditableItems.read($0, tx) })
            plan.blocks = try Self.withoutExisting(plan.blocks, tx)
            try Self.write(plan, tx)
            return plan
        }
        summary.rows = [
            ("profiles_inserted", "profiles inserted", plan.inserts.count),
            ("profiles_updated", "profiles updated", plan.updates.count),
            ("profiles_hidden", "profiles hidden", plan.hides),
            ("profiles_deleted", "profiles deleted", plan.deletes),
            ("profiles_reactivated", "profiles reactivated", plan.reactivations),
            ("filters_edited", "filters edited", plan.filterEdits.count),
            ("filters_deleted", "filters deleted", plan.filterDeletes.count),
            ("filters_created", "filters created", plan.newFilters.count),
            ("blocks", "blocks", plan.blocks.count),
        ]
        summary.details = [
            ("profiles_touched", "profiles touched", plan.touchedProfileIds.count),
            // The updates that changed an item's value (not a login or a plan alone): the day's edits.
            ("profiles_edited", "profiles edited", plan.editedProfiles),
        ]
        summary.seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        return (plan, summary)
    }

    /// Drops planned blocks that already exist, so that the day adds exactly what it reports.
    static func withoutExisting(_ blocks: [Block], _ tx: PostgresConnection) throws -> [Block] {
        guard !blocks.isEmpty else { return [] }
        let existing = try tx.query(
            "SELECT blocker_id, blocked_id FROM blocks WHERE blocker_id = ANY($1)",
            [.int8Array(Array(Set(blocks.map(\.blockerId))).sorted())]
        ).rows.map { Block(blockerId: try $0.int64(0), blockedId: try $0.int64(1)) }
        let set = Set(existing)
        return blocks.filter { !set.contains($0) }
    }

    static func microseconds(_ times: [Timestamp]) -> PostgresValue { .int8Array(times.map(\.microsecondsSinceEpoch)) }

    /// `timestamptz` from microseconds since the Unix epoch, exactly.
    static let fromMicros = "(timestamptz '1970-01-01 00:00:00+00' + u.us * interval '1 microsecond')"

    static func write(_ plan: DailyChangePlan, _ tx: PostgresConnection) throws {
        let writer = AppTableWriter(connection: tx)
        if !plan.inserts.isEmpty {
            try tx.execute("CREATE TEMP TABLE seed_profile_inserts (LIKE profiles INCLUDING DEFAULTS) ON COMMIT DROP")
            try writer.copyProfiles(
                plan.inserts.map(\.profile), updatedAts: plan.inserts.map(\.createdAt),
                into: "seed_profile_inserts")
            try tx.execute("INSERT INTO profiles SELECT * FROM seed_profile_inserts ORDER BY id")
        }
        if !plan.updates.isEmpty {
            try tx.execute(
                """
                CREATE TEMP TABLE seed_profile_updates (
                    id bigint PRIMARY KEY, at timestamptz NOT NULL, residence smallint, personality smallint[],
                    communities integer[], income_band smallint, smoking smallint, drinking smallint,
                    marriage_intent smallint, has_photo boolean, has_introduction boolean, verified boolean, plan smallint
                ) ON COMMIT DROP
                """)
            try tx.copyIn("COPY seed_profile_updates FROM STDIN (FORMAT binary)") { w in
                for u in plan.updates {
                    w.beginRow(fieldCount: 13)
                    w.write(u.id)
                    w.write(u.at)
                    w.write(u.residence)
                    w.write(u.personality)
                    w.write(u.communities)
                    w.write(u.incomeBand)
                    w.write(u.smoking)
                    w.write(u.drinking)
                    w.write(u.marriageIntent)
                    w.write(u.hasPhoto)
                    w.write(u.hasIntroduction)
                    w.write(u.verified)
                    w.write(u.plan)
                }
            }
            try tx.execute(
                """
                UPDATE profiles p SET
                    last_login_at = u.at, updated_at = u.at,
                    residence = coalesce(u.residence, p.residence), personality = coalesce(u.personality, p.personality),
                    communities = coalesce(u.communities, p.communities),
                    income_band = coalesce(u.income_band, p.income_band), smoking = coalesce(u.smoking, p.smoking),
                    drinking = coalesce(u.drinking, p.drinking),
                    marriage_intent = coalesce(u.marriage_intent, p.marriage_intent),
                    has_photo = coalesce(u.has_photo, p.has_photo),
                    has_introduction = coalesce(u.has_introduction, p.has_introduction),
                    verified = coalesce(u.verified, p.verified), plan = coalesce(u.plan, p.plan)
                FROM seed_profile_updates u WHERE p.id = u.id
                """)
        }
        if !plan.statusChanges.isEmpty {
            try tx.query(
                """
                UPDATE profiles p SET status = u.status, updated_at = \(fromMicros)
                FROM unnest($1::bigint[], $2::smallint[], $3::bigint[]) AS u(id, status, us) WHERE p.id = u.id
                """,
                [
                    .int8Array(plan.statusChanges.map(\.id)), .int2Array(plan.statusChanges.map(\.status)),
                    microseconds(plan.statusChanges.map(\.at)),
                ])
        }
        if !plan.filterEdits.isEmpty {
            try tx.query(
                """
                UPDATE saved_filters f SET conditions = u.conditions::jsonb, updated_at = \(fromMicros)
                FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS u(id, conditions, us) WHERE f.id = u.id
                """,
                [
                    .int8Array(plan.filterEdits.map(\.id)), .textArray(plan.filterEdits.map(\.conditionsJSON)),
                    microseconds(plan.filterEdits.map(\.at)),
                ])
        }
        if !plan.filterDeletes.isEmpty {
            try tx.query(
                """
                UPDATE saved_filters f SET deleted_at = \(fromMicros), updated_at = \(fromMicros)
                FROM unnest($1::bigint[], $2::bigint[]) AS u(id, us) WHERE f.id = u.id
                """, [.int8Array(plan.filterDeletes.map(\.id)), microseconds(plan.filterDeletes.map(\.at))])
        }
        if !plan.newFilters.isEmpty {
            try tx.execute("CREATE TEMP TABLE seed_new_filters (LIKE saved_filters INCLUDING DEFAULTS) ON COMMIT DROP")
            try writer.insertFilters(plan.newFilters.map(\.filter), into: "seed_new_filters")
            try tx.execute("INSERT INTO saved_filters SELECT * FROM seed_new_filters ORDER BY id")
        }
        if !plan.blocks.isEmpty {
            try tx.query(
                """
                INSERT INTO blocks (blocker_id, blocked_id) SELECT * FROM unnest($1::bigint[], $2::bigint[])
                """, [.int8Array(plan.blocks.map(\.blockerId)), .int8Array(plan.blocks.map(\.blockedId))])
        }
    }
}
