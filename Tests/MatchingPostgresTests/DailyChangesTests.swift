import Chronology
import Matching
import Testing

@testable import LoadWorld

/// A day of changes planned in pure Swift (`DailyChangePlan.make`, no database): every update the day counts as
/// an edit changes an item's value, so that the change capture (`OLD.x IS DISTINCT FROM NEW.x`) sees it.
@Suite struct DailyChangesTests {
    static let now = Timestamp(iso8601: "2026-03-01T03:00:00Z")!
    static let day2 = now.adding(days: 1)

    /// `count` active members, every one holding `items` (the seeded world's most common answers: photo,
    /// introduction and verification set, no traits or communities, the first code of the coded items).
    static func world(_ count: Int) -> WorldSnapshot {
        WorldSnapshot(
            profiles: (1...Int64(count)).map { id in
                WorldSnapshot.ProfileRow(
                    id: id, status: Profile.Status.active, gender: id % 2 == 0 ? 1 : 2, birthDate: nil,
                    residence: 13, plan: id % 7 == 0 ? Profile.Plan.paid : Profile.Plan.free,
                    createdAt: now.adding(days: -100))
            },
            filters: [])
    }

    static let items = EditableItems(
        residence: 13, personality: [], communities: [], incomeBand: 5, smoking: 1, drinking: 1, marriageIntent: 1,
        hasPhoto: true, hasIntroduction: true, verified: true)

    static func plan(seed: UInt64 = 4, mix: DailyChangeMix = .steady) -> DailyChangePlan {
        DailyChangePlan.make(
            count: 1_000, seed: seed, now: day2, snapshot: world(3_000), mix: mix,
            items: { ids in Dictionary(uniqueKeysWithValues: ids.map { ($0, items) }) })
    }

    @Test func everyEditChangesAValueTheCaptureCompares() {
        let plan = Self.plan()
        let edits = plan.updates.filter(\.setsItems)
        #expect(plan.updates.count == 850)
        // Each item an update sets differs from the value the profile held (a photo set on a profile that has
        // one, the old generator's most common edit, changed nothing).
        for update in edits {
            #expect(update.changesItems(from: Self.items), "update of \(update.id) changes no item")
            #expect(update.residence.map { $0 != Self.items.residence } ?? true)
            #expect(update.personality.map { $0 != Self.items.personality } ?? true)
            #expect(update.communities.map { $0 != Self.items.communities } ?? true)
            #expect(update.incomeBand.map { $0 != Self.items.incomeBand } ?? true)
            #expect(update.smoking.map { $0 != Self.items.smoking } ?? true)
            #expect(update.drinking.map { $0 != Self.items.drinking } ?? true)
            #expect(update.marriageIntent.map { $0 != Self.items.marriageIntent } ?? true)
            #expect(update.hasPhoto.map { $0 != Self.items.hasPhoto } ?? true)
            #expect(update.hasIntroduction.map { $0 != Self.items.hasIntroduction } ?? true)
            #expect(update.verified.map { $0 != Self.items.verified } ?? true)
        }
        // The flags are among the edits (flipped), and the count the day reports is the edits'.
        #expect(edits.contains { $0.hasPhoto == false } && edits.contains { $0.verified == false })
        #expect(plan.editedProfiles == edits.count)
        // 90 % of the 850 updates edit (765; the binomial's deviation is about 9).
        #expect((720...810).contains(edits.count), "\(edits.count) edits")
        // A plan change is on top of an edit, never an edit alone: the capture does not watch `plan`.
        let planChanges = plan.updates.filter { $0.plan != nil }
        #expect(!planChanges.isEmpty && planChanges.allSatisfy(\.setsItems))
    }

    @Test func aWriteOfTheValueAlreadyHeldIsNoEdit() {
        var update = DailyChangePlan.ProfileUpdate(id: 1, at: Self.day2)
        update.hasPhoto = true
        update.plan = Profile.Plan.paid
        #expect(update.setsItems && !update.changesItems(from: Self.items))
        update.incomeBand = 6
        #expect(update.changesItems(from: Self.items))
    }

    @Test func theSameSeedAndWorldGiveTheSameDay() {
        let a = Self.plan(), b = Self.plan(), other = Self.plan(seed: 5)
        #expect(a.updates == b.updates && a.statusChanges == b.statusChanges && a.blocks == b.blocks)
        #expect(a.editedProfiles == b.editedProfiles)
        #expect(a.updates != other.updates)
    }

    @Test func theGrowingMixEditsWithAboutFortyFivePercentOfItsUpdates() {
        let plan = Self.plan(mix: .standard)
        #expect(plan.editedProfiles == plan.updates.filter(\.setsItems).count)
        #expect((340...425).contains(plan.editedProfiles), "\(plan.editedProfiles) edits")
        #expect(abs(DailyChangeMix.standard.itemEditShare - 0.3825) < 1e-9)
        #expect(abs(DailyChangeMix.steady.itemEditShare - 0.765) < 1e-9)
    }
}
