import Chronology
import Foundation
import LoadWorld
import Matching
import MatchingPostgres
import PostgresClient
import PostgresTestSupport
import Testing

/// `matcher seed`: deterministic worlds, their distributions, their filters (valid and planted invalid),
/// a day of changes as the change capture sees it, and the OkCupid import.
@Suite struct SeedTests {
    static let now = Timestamp(iso8601: "2026-03-01T03:00:00Z")!
    static let day2 = now.adding(days: 1)

    /// md5 of every row of the app's tables, in key order.
    static func checksum(_ connection: PostgresConnection) throws -> [String] {
        try connection.query(
            """
            SELECT (SELECT coalesce(md5(string_agg(p::text, '|' ORDER BY id)), '') FROM profiles p),
                   (SELECT coalesce(md5(string_agg(f::text, '|' ORDER BY id)), '') FROM saved_filters f),
                   (SELECT coalesce(md5(string_agg(b::text, '|' ORDER BY blocker_id, blocked_id)), '') FROM blocks b)
            """
        ).rows[0].values.map { $0.stringValue ?? "" }
    }

    // MARK: - Determinism

    @Test func sameSeedGivesIdenticalRowsAndAnotherSeedDifferentOnes() throws {
        let a = try MigratedDatabase.create(), b = try MigratedDatabase.create()
        let ca = try a.connect(), cb = try b.connect()
        let first = try WorldSeeder(connection: ca).seedWorld(
            profiles: 3_000, filters: 400, seed: 11, now: Self.now, existing: .refuse)
        _ = try WorldSeeder(connection: cb).seedWorld(
            profiles: 3_000, filters: 400, seed: 11, now: Self.now, existing: .refuse)
        let sumA = try Self.checksum(ca)
        #expect(sumA == (try Self.checksum(cb)))
        #expect(first.rows("profiles") == 3_000 && first.rows("saved_filters") == 400)
        #expect(first.rows("blocks") == (try ca.query("SELECT count(*) FROM blocks").rows[0].int64(0)).asInt)

        // A day of changes is deterministic too, for a given seed and world.
        _ = try DailyChangeApplier(connection: ca).apply(count: 200, seed: 5, now: Self.day2)
        _ = try DailyChangeApplier(connection: cb).apply(count: 200, seed: 5, now: Self.day2)
        #expect(try Self.checksum(ca) == (try Self.checksum(cb)))

        // Another seed: every table differs. --replace empties the tables first and starts ids at 1.
        _ = try WorldSeeder(connection: cb).seedWorld(
            profiles: 3_000, filters: 400, seed: 12, now: Self.now, existing: .replace)
        let sumOther = try Self.checksum(cb)
        for (x, y) in zip(sumA, sumOther) { #expect(x != y) }
        #expect(try cb.query("SELECT min(id), max(id) FROM profiles").rows[0].int64(1) == 3_000)
        #expect(try cb.query("SELECT count(*) FROM matcher_profile_changes").rows[0].int64(0) == 3_000)
    }

    @Test func refusesAWorldOnTopOfAnotherUnlessAppendingOrReplacing() throws {
        let db = try MigratedDatabase.create()
        let c = try db.connect()
        _ = try WorldSeeder(connection: c).seedWorld(
            profiles: 500, filters: 50, seed: 1, now: Self.now, existing: .refuse)
        #expect(throws: SeedError.self) {
            try WorldSeeder(connection: c).seedWorld(
                profiles: 10, filters: 1, seed: 1, now: Self.now, existing: .refuse)
        }
        let appended = try WorldSeeder(connection: c).seedWorld(
            profiles: 200, filters: 20, seed: 2, now: Self.now, existing: .append)
        #expect(appended.detail("first profile id") == 501 && appended.detail("first filter id") == 51)
        let row = try c.query(
            """
            SELECT count(*), max(id), (SELECT count(*) FROM saved_filters WHERE id > 50 AND owner_id <= 500) FROM profiles
            """
        ).rows[0]
        #expect(try row.int64(0) == 700 && row.int64(1) == 700)
        #expect(try row.int64(2) == 0)  // an appended world's filters belong to its own members

        // The command line refuses too, with one line saying what to do.
        let refused = try MatcherProcess.run(
            ["seed", "--profiles", "10", "--now", "2026-03-01T03:00:00Z"], database: db.conninfo)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("pass --append to add to them or --replace"))

        // The exit statuses of cli.md: a server that cannot be reached 69, a database without the schema 78.
        let unreachable = try MatcherProcess.run(
            ["seed", "--profiles", "10", "--connect-timeout", "3"], database: "host=127.0.0.1 port=1 dbname=x")
        #expect(unreachable.status == 69, "\(unreachable.stderr)")
        let empty = try TestDatabase.create()
        let unmigrated = try MatcherProcess.run(["seed", "--profiles", "10"], database: empty.conninfo)
        #expect(unmigrated.status == 78, "\(unmigrated.stderr)")
        #expect(unmigrated.stderr.contains("matcher migrate") && unmigrated.stderr.hasSuffix("(exit 78)\n"))
    }

    @Test func commandLineWritesTheWorldAndPrintsASummary() throws {
        let db = try MigratedDatabase.create()
        let out = try MatcherProcess.run(
            [
                "seed", "--profiles", "1000", "--filters", "100", "--seed", "3", "--now", "2026-03-01T03:00:00Z",
                "--format", "json",
            ],
            database: db.conninfo)
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stdout.contains("\"profiles\":1000") && out.stdout.contains("\"saved_filters\":100"))
        let c = try db.connect()
        // The same rows as the library writes for the same seed and clock.
        let twin = try MigratedDatabase.create()
        let tc = try twin.connect()
        _ = try WorldSeeder(connection: tc).seedWorld(
            profiles: 1000, filters: 100, seed: 3, now: Self.now, existing: .refuse)
        #expect(try Self.checksum(c) == (try Self.checksum(tc)))
    }

    // MARK: - Distributions

    @Test func profilesFollowTheModelledDistributions() throws {
        let db = try MigratedDatabase.create()
        let c = try db.connect()
        let n = 20_000
        let summary = try WorldSeeder(connection: c).seedWorld(
            profiles: n, filters: 0, seed: 21, now: Self.now, existing: .refuse)
        let r = try c.query(
            """
            WITH p AS (SELECT *, date_part('year', age(date '2026-03-01', birth_date))::int AS age FROM profiles)
            SELECT avg((residence = 13)::int)::float8, avg((residence = 48)::int)::float8,
                   avg((gender = 1)::int)::float8, min(age), max(age), avg((age BETWEEN 20 AND 45)::int)::float8,
                   avg((height_cm IS NULL)::int)::float8, avg((income_band IS NULL)::int)::float8,
                   avg((smoking = 0)::int)::float8, avg((languages = '{}')::int)::float8,
                   avg((personality = '{}')::int)::float8, max(cardinality(personality)),
                   avg((languages = '{1}')::int)::float8, avg(plan)::float8,
                   avg((status = 2)::int)::float8, avg((status = 3)::int)::float8, avg((status = 4)::int)::float8,
                   avg((last_login_at >= timestamptz '2026-02-22 03:00+00')::int)::float8,
                   min(created_at) >= timestamptz '2023-02-28 03:00+00', max(last_login_at) <= timestamptz '2026-03-01 03:00+00',
                   bool_and(last_login_at >= created_at), avg((communities = '{}')::int)::float8,
                   avg(height_cm) FILTER (WHERE gender = 1)::float8, avg(height_cm) FILTER (WHERE gender = 2)::float8,
                   bool_and(gender IN (1, 2)), bool_and(birth_date IS NOT NULL)
            FROM p
            """
        ).rows[0]
        func d(_ i: Int) -> Double { (try? r.double(i)) ?? .nan }
        #expect((0.17...0.28).contains(d(0)), "Tokyo share \(d(0))")
        #expect((0.0005...0.01).contains(d(1)), "abroad share \(d(1))")
        #expect((0.52...0.58).contains(d(2)), "men \(d(2))")
        #expect(try r.int32(3) >= 18 && r.int32(4) <= 72)
        #expect(d(5) > 0.8, "ages 20 to 45: \(d(5))")
        #expect((0.09...0.15).contains(d(6)), "height unanswered \(d(6))")
        #expect((0.29...0.39).contains(d(7)), "income unanswered \(d(7))")
        #expect((0.07...0.13).contains(d(8)), "smoking unanswered \(d(8))")
        #expect((0.12...0.18).contains(d(9)), "languages unanswered \(d(9))")
        #expect((0.21...0.29).contains(d(10)), "personality unanswered \(d(10))")
        #expect(try r.int32(11) == 5)
        #expect(d(12) > 0.55, "languages [1] \(d(12))")
        #expect((0.13...0.17).contains(d(13)), "paid \(d(13))")
        #expect((0.02...0.04).contains(d(14)) && (0.002...0.009).contains(d(15)) && (0.013...0.028).contains(d(16)))
        #expect((0.5...0.7).contains(d(17)), "logged in within 7 days \(d(17))")
        #expect(try r.bool(18) && r.bool(19) && r.bool(20))
        #expect((0.4...0.5).contains(d(21)), "no community \(d(21))")
        #expect((169...174).contains(d(22)) && (156...161).contains(d(23)))
        #expect(try r.bool(24) && r.bool(25))
        #expect((0.4...0.6).contains(Double(summary.rows("blocks")) / Double(n)), "blocks a profile")

        // The large prefectures lead, in population order give or take.
        let top = try c.query("SELECT residence FROM profiles GROUP BY 1 ORDER BY count(*) DESC LIMIT 7").rows.map {
            try $0.int16(0)
        }
        #expect(top.first == 13)
        #expect(Set(top).isSubset(of: [13, 14, 27, 11, 23, 12, 40, 28, 1]))
        // Codes stay in their domains; communities are sparse ids with a Zipf-like head.
        let domains = try c.query(
            """
            SELECT bool_and(personality <@ (SELECT array_agg(g::smallint) FROM generate_series(1, 40) g)),
                   bool_and(languages <@ (SELECT array_agg(g::smallint) FROM generate_series(1, 30) g)),
                   bool_and(income_band IS NULL OR income_band BETWEEN 1 AND 9),
                   bool_and(height_cm IS NULL OR height_cm BETWEEN 120 AND 230),
                   bool_and(residence BETWEEN 0 AND 48 AND hometown BETWEEN 0 AND 48 AND occupation BETWEEN 0 AND 60)
            FROM profiles
            """
        ).rows[0]
        #expect(try (0..<5).allSatisfy { try domains.bool($0) })
        let communities = try c.query(
            """
            SELECT count(*) FROM profiles, unnest(communities) c GROUP BY c ORDER BY count(*) DESC LIMIT 10
            """
        ).rows.map { try $0.int64(0) }
        #expect(communities.count == 10 && communities[0] > 4 * communities[9])
        let maxCommunity = try c.query("SELECT max(c) FROM profiles, unnest(communities) c").rows[0].int32(0)
        #expect(maxCommunity > 100_000)
    }

    // MARK: - Filters

    @Test func generatedFiltersAreValidExceptThePlantedInvalidOnes() throws {
        let model = SeedWorldModel(seed: 99, now: Self.now)
        let generator = SeedFilterGenerator(seed: 99, now: Self.now)
        let population: ClosedRange<Int64> = 1...100_000
        var invalidByKind: [InvalidFilterKind: Int] = [:]
        var valid = 0, deleted = 0, notify = 0, activeOwners = 0, withGender = 0
        let count = 20_000
        for id in 1...Int64(count) {
            let owner = model.owner(ofFilter: id, in: population)
            if owner.profile.isActive { activeOwners += 1 }
            let seeded = generator.filter(id: id, owner: SeedOwner(owner, today: model.today))
            let f = seeded.filter
            if f.isDeleted { deleted += 1 }
            if f.notify { notify += 1 }
            #expect(f.createdAt <= f.updatedAt && f.updatedAt <= Self.now && f.createdAt >= owner.createdAt)
            if let kind = seeded.invalidKind {
                invalidByKind[kind, default: 0] += 1
                do {
                    _ = try FilterConditions.decode(json: f.conditionsJSON)
                    Issue.record("planted \(kind) decodes: \(f.conditionsJSON)")
                } catch {
                    #expect(error == seeded.expectedError, "\(kind): \(f.conditionsJSON)")
                }
            } else {
                valid += 1
                do {
                    let decoded = try FilterConditions.decode(json: f.conditionsJSON)
                    #expect((1...10).contains(decoded.conditions.count))
                    #expect(decoded.canonicalJSON == f.conditionsJSON)
                    if decoded[MasterItem.Gender.item] != nil { withGender += 1 }
                } catch {
                    Issue.record("filter \(id) is invalid: \(error): \(f.conditionsJSON)")
                }
            }
        }
        let invalid = count - valid
        #expect((0.003...0.0075).contains(Double(invalid) / Double(count)), "invalid share \(invalid)")
        #expect(Set(invalidByKind.keys) == Set(InvalidFilterKind.allCases), "\(invalidByKind)")
        #expect((0.03...0.05).contains(Double(deleted) / Double(count)))
        #expect((0.83...0.87).contains(Double(notify) / Double(count)))
        #expect(Double(activeOwners) / Double(count) > 0.97)
        #expect(Double(withGender) / Double(valid) > 0.93)
    }

    @Test func seededFiltersInTheDatabaseDecodeAsPlanned() throws {
        let db = try MigratedDatabase.create()
        let c = try db.connect()
        let summary = try WorldSeeder(connection: c).seedWorld(
            profiles: 4_000, filters: 4_000, seed: 5, now: Self.now, existing: .refuse)
        var invalid = 0
        var genderOpposite = 0, total = 0
        let rows = try c.query(
            """
            SELECT f.conditions::text, p.gender, p.residence FROM saved_filters f JOIN profiles p ON p.id = f.owner_id ORDER BY f.id
            """
        ).rows
        for row in rows {
            total += 1
            do {
                let conditions = try FilterConditions.decode(json: try row.string(0))
                let ownerGender = try row.int16(1)
                if case .anyOf(let codes)? = conditions[MasterItem.Gender.item], codes == [Int32(3 - ownerGender)] {
                    genderOpposite += 1
                }
            } catch {
                invalid += 1
            }
        }
        #expect(invalid == summary.detail("filters invalid"))
        #expect(invalid > 0)
        #expect(Double(genderOpposite) / Double(total) > 0.9)
        // Notify intervals: mostly a day, some 12 hours, 3 and 7 days.
        let every = try c.query("SELECT notify_every::text, count(*) FROM saved_filters GROUP BY 1 ORDER BY 2 DESC")
            .rows
            .map { (try $0.string(0), try $0.int64(1)) }
        #expect(every.first?.0 == "1 day" && Set(every.map(\.0)) == ["1 day", "12:00:00", "3 days", "7 days"])
        // Owners' own prefecture is in their residence condition.
        let ownPrefecture = try c.query(
            """
            SELECT avg((p.residence = ANY (ARRAY(SELECT jsonb_array_elements_text(f.conditions -> 'residence' -> 'anyOf')::smallint)))::int)::float8
            FROM saved_filters f JOIN profiles p ON p.id = f.owner_id
            WHERE f.conditions ? 'residence' AND p.residence BETWEEN 1 AND 47
              AND jsonb_typeof(f.conditions -> 'residence' -> 'anyOf') = 'array'
            """
        ).rows[0].double(0)
        #expect(ownPrefecture > 0.99)
    }

    // MARK: - A day of changes

    @Test func changesTouchExactlyTheIntendedCountsAndTheChangeCaptureSeesThem() throws {
        let db = try MigratedDatabase.create()
        let c = try db.connect()
        _ = try WorldSeeder(connection: c).seedWorld(
            profiles: 5_000, filters: 1_000, seed: 8, now: Self.now, existing: .refuse)
        let before = try c.query(
            """
            SELECT (SELECT count(*) FROM profiles WHERE status = 2), (SELECT count(*) FROM profiles WHERE status = 4),
                   (SELECT count(*) FROM saved_filters WHERE deleted_at IS NOT NULL), (SELECT count(*) FROM blocks),
                   (SELECT count(*) FROM profiles WHERE status = 1)
            """
        ).rows[0]
        try c.execute("CREATE TEMP TABLE filters_before AS SELECT id, conditions, updated_at FROM saved_filters")
        try c.execute("CREATE TEMP TABLE profiles_before AS SELECT * FROM profiles")
        let seedXid = try c.query("SELECT DISTINCT changed_by::text FROM matcher_profile_changes").rows.map {
            try $0.string(0)
        }
        #expect(seedXid.count == 1)

        let (plan, summary) = try DailyChangeApplier(connection: c).apply(count: 1_000, seed: 4, now: Self.day2)
        #expect(plan.inserts.count == 150 && plan.updates.count == 850)
        #expect(plan.hides == 20 && plan.deletes == 10 && plan.reactivations == 10)
        #expect(plan.filterEdits.count == 30 && plan.filterDeletes.count == 6 && plan.newFilters.count == 20)
        #expect(plan.blocks.count == 50)
        #expect(summary.detail("profiles touched") == 1_040)
        #expect(Set(plan.touchedProfileIds).count == 1_040)

        // The change capture recorded exactly the profiles whose matching state the day changed (inserted, or a
        // column matching reads changed: not a login or a plan alone), in one new transaction.
        let captured = try c.query(
            """
            SELECT profile_id FROM matcher_profile_changes WHERE changed_by::text <> $1 ORDER BY profile_id
            """, [.text(seedXid[0])]
        ).rows.map { try $0.int64(0) }
        let watched = ChangeCapture.watchedColumns.map { "\"\($0)\"" }
        let reallyChanged = try c.query(
            """
            SELECT p.id FROM profiles p LEFT JOIN profiles_before b ON b.id = p.id
            WHERE b.id IS NULL OR (\(watched.map { "p.\($0)" }.joined(separator: ", ")))
                                  IS DISTINCT FROM (\(watched.map { "b.\($0)" }.joined(separator: ", ")))
            ORDER BY p.id
            """
        ).rows.map { try $0.int64(0) }
        #expect(captured == reallyChanged)
        #expect(Set(captured).isSubset(of: Set(plan.touchedProfileIds)))
        #expect(Set(plan.inserts.map(\.profile.id)).isSubset(of: Set(captured)))
        #expect(Set(plan.statusChanges.map(\.id)).isSubset(of: Set(captured)))
        let loginOnly = plan.updates.filter { !$0.setsItems }.map(\.id)
        #expect(!loginOnly.isEmpty && Set(loginOnly).isDisjoint(with: Set(captured)))
        // Every update the day counts as an edit changed an item's value, so the capture recorded it (an edit
        // that wrote the value a profile held, a photo set on a profile with one, was not recorded), and the
        // summary counts exactly those.
        let edits = plan.updates.filter(\.setsItems).map(\.id)
        #expect(Set(captured).intersection(plan.updates.map(\.id)) == Set(edits))
        #expect(plan.editedProfiles == edits.count && summary.detail("profiles edited") == edits.count)
        #expect((340...425).contains(edits.count), "\(edits.count) edits: about 45 % of the 850 updates")

        let after = try c.query(
            """
            SELECT (SELECT count(*) FROM profiles WHERE status = 2), (SELECT count(*) FROM profiles WHERE status = 4),
                   (SELECT count(*) FROM saved_filters WHERE deleted_at IS NOT NULL), (SELECT count(*) FROM blocks),
                   (SELECT count(*) FROM profiles), (SELECT max(id) FROM saved_filters),
                   (SELECT count(*) FROM filters_before b JOIN saved_filters f USING (id) WHERE f.updated_at <> b.updated_at),
                   (SELECT count(*) FROM filters_before b JOIN saved_filters f USING (id) WHERE f.conditions <> b.conditions),
                   (SELECT count(*) FROM profiles WHERE updated_at > $1 AND id <= 5000),
                   (SELECT count(*) FROM profiles WHERE last_login_at > $1 AND id <= 5000 AND status = 1)
            """, [.timestamptz(Self.now)]
        ).rows[0]
        let a = try (0..<10).map { try after.int64($0) }, b = try (0..<5).map { try before.int64($0) }
        #expect(a[0] == b[0] + 20 - 10, "hidden \(a[0]), before \(b[0])")
        #expect(a[1] == b[1] + 10, "deleted \(a[1]), before \(b[1])")
        #expect(a[2] == b[2] + 6)
        #expect(a[3] == b[3] + 50)
        #expect(a[4] == 5_150)
        #expect(a[5] == 1_020)
        #expect(a[6] == 36)  // edits and deletes
        #expect(a[7] <= 30 && a[7] >= 25)  // an edit may rarely give the same conditions
        #expect(a[8] == 890)  // updates, hides, deletes, reactivations of existing profiles
        #expect(a[9] == 850)  // every update is a login
        // Inserted profiles are new registrations of the day.
        let inserted = try c.query(
            "SELECT min(id), max(id), min(created_at), max(created_at) FROM profiles WHERE id > 5000"
        ).rows[0]
        #expect(try inserted.int64(0) == 5_001 && inserted.int64(1) == 5_150)
        #expect(try inserted.timestamp(2) > Self.now && inserted.timestamp(3) <= Self.day2)
        // New filters decode unless planted invalid.
        for seeded in plan.newFilters where seeded.invalidKind == nil {
            #expect(throws: Never.self) { try FilterConditions.decode(json: seeded.filter.conditionsJSON) }
        }
    }

    /// The steady mix (`matcher seed --changes K --mix steady`, `soak --mix steady`): as many members leave as
    /// sign up, as many hidden ones come back as hide, as many filters go as come, a leaving member's first.
    @Test func steadyMixTakesAwayWhatItAdds() throws {
        let db = try MigratedDatabase.create()
        let c = try db.connect()
        _ = try WorldSeeder(connection: c).seedWorld(
            profiles: 10_000, filters: 1_000, seed: 8, now: Self.now, existing: .refuse)
        let counts = """
            SELECT (SELECT count(*) FROM profiles WHERE status = 1), (SELECT count(*) FROM profiles WHERE status = 2),
                   (SELECT count(*) FROM saved_filters WHERE deleted_at IS NULL)
            """
        let before = try c.query(counts).rows[0]
        let (plan, _) = try DailyChangeApplier(connection: c).apply(
            count: 1_000, seed: 4, now: Self.day2, mix: .steady)
        #expect(plan.inserts.count == 150 && plan.deletes == 150)
        #expect(plan.hides == 20 && plan.reactivations == 20)
        let leavers = PostgresValue.int8Array(
            plan.statusChanges.filter { $0.status == Profile.Status.deleted }.map(\.id))
        let leaving = try c.query(
            "SELECT count(*) FROM saved_filters WHERE id = ANY($1) AND owner_id = ANY($2)",
            [.int8Array(plan.filterDeletes.map(\.id)), leavers]
        ).rows[0].int64(0)
        #expect(leaving > 0)
        #expect(plan.newFilters.count == 20 && plan.filterDeletes.count == max(20, Int(leaving)))
        let after = try c.query(counts).rows[0]
        #expect(try after.int64(0) == before.int64(0))  // active members
        #expect(try after.int64(1) == before.int64(1))  // hidden members
        #expect(try after.int64(2) == before.int64(2) + 20 - Int64(plan.filterDeletes.count))  // live filters
        // No live filter is left to a member who left today.
        let leftBehind = try c.query(
            """
            SELECT count(*) FROM saved_filters f JOIN profiles p ON p.id = f.owner_id
            WHERE f.deleted_at IS NULL AND p.status = 4 AND p.id = ANY($1)
            """, [leavers]
        ).rows[0]
        #expect(try leftBehind.int64(0) == 0)
    }

    // MARK: - OkCupid

    static let okcupidPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "shared/data/okcupid-profiles.csv.gz"
        ).path

    /// The data set's first 2,000 records (CC0, Tests/Fixtures/README.md), in the repository so that the import
    /// is tested wherever the tests run, a CI clone included.
    static let okcupidFixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/okcupid-first-2000.csv.gz").path

    @Test func csvHandlesQuotedCommasQuotesAndLineBreaks() throws {
        let text = "id,a,b\r\n1,\"x, y\",plain\n2,\"say \"\"hi\"\"\",\"two\nlines\"\n3,,\"\"\n4,last,row"
        let records = try CSV.parse(Array(text.utf8))
        #expect(
            records == [
                ["id", "a", "b"], ["1", "x, y", "plain"], ["2", "say \"hi\"", "two\nlines"], ["3", "", ""],
                ["4", "last", "row"],
            ])
        #expect(throws: CSV.ParseError.self) { try CSV.parse(Array("a,\"open".utf8)) }
    }

    @Test func okcupidMappingRules() {
        #expect(
            OkCupidMapping.heightCm(75) == 191 && OkCupidMapping.heightCm(1) == nil
                && OkCupidMapping.heightCm(95) == nil)
        #expect(
            OkCupidMapping.incomeBand(20_000) == 2 && OkCupidMapping.incomeBand(80_000) == 5
                && OkCupidMapping.incomeBand(1_000_000) == 9 && OkCupidMapping.incomeBand(-1) == nil)
        #expect(OkCupidMapping.education("graduated from masters program") == 4)
        #expect(OkCupidMapping.education("working on college/university") == 1)
        #expect(OkCupidMapping.education("dropped out of ph.d program") == 3)
        #expect(OkCupidMapping.education("working on space camp") == 5)
        #expect(OkCupidMapping.education("two-year college") == 2)
        #expect(OkCupidMapping.offspring("doesn't have kids, but might want them") == (1, 3))
        #expect(OkCupidMapping.offspring("has a kid, but doesn't want more") == (2, 2))
        #expect(OkCupidMapping.offspring("wants kids") == (0, 1))
        #expect(OkCupidMapping.languages("english (fluently), spanish (poorly), french (poorly)") == [2])
        #expect(OkCupidMapping.languages("english, french, c++") == [2, 6])
        #expect(OkCupidMapping.languages("english (okay), japanese, latin") == [1, 2, 30])
        #expect(OkCupidMapping.soughtGenders(sex: "m", orientation: "straight") == [2])
        #expect(OkCupidMapping.soughtGenders(sex: "f", orientation: "gay") == [2])
        #expect(OkCupidMapping.soughtGenders(sex: "m", orientation: "bisexual") == [])
    }

    /// The fixture is the shared data set's beginning, where that data set is at hand (this machine; not a CI clone).
    @Test(.enabled(if: FileManager.default.fileExists(atPath: okcupidPath)))
    func theFixtureIsTheSharedDataSetsFirstRecords() throws {
        let fixture = try OkCupidRecord.read(path: Self.okcupidFixture)
        let shared = try OkCupidRecord.read(path: Self.okcupidPath, limit: 2_000)
        #expect(fixture.count == 2_000 && fixture == shared)
    }

    @Test func okcupidImportMapsTheFirstRowsAsDocumented() throws {
        let records = try OkCupidRecord.read(path: Self.okcupidFixture)
        #expect(records.count == 2_000 && records.first?.id == 1 && records.last?.id == 2_000)
        let db = try MigratedDatabase.create()
        let c = try db.connect()
        let summary = try OkCupidSeeder(connection: c).seed(
            records: records, filters: 200, seed: 3, now: Self.now, existing: .refuse)
        #expect(summary.rows("profiles") == 2_000 && summary.rows("saved_filters") == 200)

        let rows = try c.query(
            """
            SELECT id, gender, date_part('year', age(date '2026-03-01', birth_date))::int, height_cm, income_band, body_type,
                   drinking, smoking, education, occupation, has_children, wants_children, marital_status, languages, housemate
            FROM profiles WHERE id IN (1, 2, 3, 4) ORDER BY id
            """
        ).rows
        try #require(rows.count == 4)
        func values(_ r: PostgresRow) throws -> [Int] {
            try [
                Int(r.int64(0)), Int(r.int16(1)), Int(r.int32(2)), r.optionalInt16(3).map(Int.init) ?? -1,
                r.optionalInt16(4).map(Int.init) ?? -1, Int(r.int16(5)), Int(r.int16(6)), Int(r.int16(7)),
                Int(r.int16(8)),
                Int(r.int16(9)), Int(r.int16(10)), Int(r.int16(11)), Int(r.int16(12)),
            ]
        }
        // 1: m, 22, a little extra, socially, working on college/university, 75 in, transportation,
        //    "doesn't have kids, but might want them", sometimes, english, single.
        #expect(try values(rows[0]) == [1, 1, 22, 191, -1, 6, 3, 4, 1, 18, 1, 3, 1])
        #expect(try rows[0].int16Array(13) == [2])
        // 2: m, 36, average, often, working on space camp, 70 in, $80,000, hospitality / travel, no, single;
        //    speaks english (fluently), spanish (poorly), french (poorly).
        #expect(try values(rows[1]) == [2, 1, 36, 178, 5, 3, 2, 1, 5, 17, 1, 3, 1])
        #expect(try rows[1].int16Array(13) == [2])
        // 3: m, 37, thin, socially, graduated from masters program, 68 in, no job, no offspring answer,
        //    has cats, "english, french, c++", available.
        #expect(try values(rows[2]) == [3, 1, 37, 173, -1, 2, 3, 1, 4, 0, 0, 0, 1])
        #expect(try rows[2].int16Array(13) == [2, 6] && rows[2].int16(14) == 4)
        // 4: m, 22, thin, working on college/university, 71 in, $20,000, student, doesn't want kids,
        //    "english, german (poorly)".
        #expect(try values(rows[3]) == [4, 1, 22, 180, 2, 2, 3, 1, 1, 4, 0, 2, 1])
        #expect(try rows[3].int16Array(13) == [2])

        // Aggregates over the 2,000 follow the records.
        let men = records.filter { $0.sex == "m" }.count
        let noIncome = records.filter { ($0.income ?? -1) <= 0 }.count
        let aggregate = try c.query(
            """
            SELECT count(*) FILTER (WHERE gender = 1), count(*) FILTER (WHERE income_band IS NULL),
                   count(*) FILTER (WHERE birth_date IS NULL), count(*) FILTER (WHERE residence = 0)
            FROM profiles
            """
        ).rows[0]
        #expect(try aggregate.int64(0) == Int64(men) && aggregate.int64(1) == Int64(noIncome))
        #expect(try aggregate.int64(2) == 0)
        // Filters follow orientation: a gay member's gender condition names his or her own gender.
        let filters = try c.query("SELECT owner_id, conditions::text FROM saved_filters ORDER BY id").rows
        let byId = Dictionary(uniqueKeysWithValues: records.map { ($0.id, $0) })
        var checked = 0
        for row in filters {
            guard let record = byId[try row.int64(0)],
                let conditions = try? FilterConditions.decode(json: try row.string(1)),
                case .anyOf(let codes)? = conditions[MasterItem.Gender.item]
            else { continue }
            #expect(
                codes.map(Int16.init) == OkCupidMapping.soughtGenders(sex: record.sex, orientation: record.orientation))
            checked += 1
        }
        #expect(checked > 150)
    }
}

extension Int64 {
    fileprivate var asInt: Int { Int(self) }
}
