/// The pair-level checks of runs.md's eligibility rule, on plain facts: the profile is active, is not the
/// filter's owner, and neither has blocked the other. Every path that decides a pair calls these (the
/// engines' exclusions, the digest findings, the notification planner, `EligibilityFacts` for the reference
/// evaluator and explain), so the rule is written here once.
public enum PairEligibility {
    /// A profile (or owner) status that counts as active; anything else, an absent row included, does not.
    @inline(__always)
    public static func isActive(_ status: Int16?) -> Bool { status == Profile.Status.active }

    /// The profile is the filter's owner.
    @inline(__always)
    public static func isOwner(profileId: Int64, ownerId: Int64) -> Bool { profileId == ownerId }

    /// One of the two has blocked the other.
    @inline(__always)
    public static func isBlocked(profileId: Int64, ownerId: Int64, blocks: some BlockLookup) -> Bool {
        blocks.blocksEitherWay(ownerId, profileId)
    }

    /// Whether the pair is ruled out whatever the conditions say: the profile is the owner, or a block either way.
    @inline(__always)
    public static func excludes(profileId: Int64, ownerId: Int64, blocks: some BlockLookup) -> Bool {
        isOwner(profileId: profileId, ownerId: ownerId)
            || isBlocked(profileId: profileId, ownerId: ownerId, blocks: blocks)
    }

    /// Same, when whether a block stands between the two is known already.
    @inline(__always)
    public static func excludes(profileId: Int64, ownerId: Int64, blockedEitherWay: Bool) -> Bool {
        isOwner(profileId: profileId, ownerId: ownerId) || blockedEitherWay
    }
}

/// The cap's order (runs.md: when more qualify than `max-per-filter`, "it keeps those with the latest
/// `last_login_at`, then the smallest id"), written once: the candidate batch's order the engines take
/// the first of, `CandidateBatch.capOrder` for profiles, and the order of a digest's profiles. A missing
/// or infinite login counts as the oldest (`Timestamp.missing`).
public enum CapOrder {
    /// Whether (login `a`, id `idA`) comes before (login `b`, id `idB`); logins in microseconds.
    @inline(__always)
    public static func precedes(login a: Int64, id idA: Int64, login b: Int64, id idB: Int64) -> Bool {
        a != b ? a > b : idA < idB
    }
}

/// The checks of runs.md's eligibility rule, other than the conditions themselves, in the order an
/// explanation lists them. `ReferenceEvaluator.matches` and `explain` both evaluate them through
/// `EligibilityFacts`, so the rule lives in this one place.
public enum EligibilityRule: String, Sendable, Hashable, CaseIterable {
    case profileActive = "profile active"
    case ownerActive = "owner active"
    case filterNotDeleted = "filter not deleted"
    /// Every column of the filter's row could be read; a row that cannot be is quarantined and never
    /// evaluated (runs.md "Eligibility": such a value never stops a run).
    case filterReadable = "filter readable"
    case filterValid = "filter valid"
    /// Every condition paid while the owner lacks the plan: the filter matches nothing (filter-language.md).
    case filterNotSuspended = "filter not suspended"
    case notTheOwner = "not the owner"
    case noBlockEitherWay = "no block either way"
}

/// What the eligibility of one (filter, profile) pair depends on.
struct EligibilityFacts<Blocks: BlockLookup> {
    let profile: Profile?
    let filter: SavedFilter
    /// The filter's owner; nil when absent, or when the record given is not `filter.ownerId`'s.
    let owner: FilterOwner?
    let conditions: Result<FilterConditions, FilterValidationError>
    let blocks: Blocks
    /// Why the profile (nil) could not be read, when that is why it is missing: a run quarantines such a row.
    let profileUnreadable: UnreadableProfile?

    init(
        profile: Profile?, filter: SavedFilter, owner: FilterOwner?,
        conditions: Result<FilterConditions, FilterValidationError>, blocks: Blocks,
        profileUnreadable: UnreadableProfile? = nil
    ) {
        self.profile = profile
        self.filter = filter
        self.owner = owner?.id == filter.ownerId ? owner : nil
        self.conditions = conditions
        self.blocks = blocks
        self.profileUnreadable = profile == nil ? profileUnreadable : nil
    }

    /// What stands for a missing profile in a detail: not found, or its row's reading failure.
    private var noProfile: String { profileUnreadable?.description ?? "profile not found" }

    /// Whether `rule` holds. A missing profile or owner fails every rule about it.
    func passes(_ rule: EligibilityRule) -> Bool {
        switch rule {
        case .profileActive:
            return PairEligibility.isActive(profile?.status)
        case .ownerActive:
            return PairEligibility.isActive(owner?.status)
        case .filterNotDeleted:
            return !filter.isDeleted
        case .filterReadable:
            return filter.quarantineReason == nil
        case .filterValid:
            if case .success = conditions { return true }
            return false
        case .filterNotSuspended:
            guard case .success(let decoded) = conditions else { return true }  // invalid: its own check fails
            return !decoded.isSuspended(forOwnerPlan: owner?.plan ?? Profile.Plan.free)
        case .notTheOwner:
            guard let profile else { return false }
            return !PairEligibility.isOwner(profileId: profile.id, ownerId: filter.ownerId)
        case .noBlockEitherWay:
            guard let profile else { return false }
            return !PairEligibility.isBlocked(profileId: profile.id, ownerId: filter.ownerId, blocks: blocks)
        }
    }

    /// Whether explain checks `rule` at all. A quarantined filter's row was not read (its conditions may be a
    /// stand-in), and a run never evaluates it: its validity and suspension are not checked. Nor is the
    /// suspension of a filter whose owner has no row: there is no plan to check, and a run does not evaluate it; nor
    /// that of an invalid filter, which has no conditions to hold against a plan (a run lists it invalid).
    /// An unchecked rule rules nothing out by itself (`Explanation.Check.passed`); another check fails then.
    func checked(_ rule: EligibilityRule) -> Bool {
        switch rule {
        case .filterValid: return filter.quarantineReason == nil
        case .filterNotSuspended:
            guard case .success = conditions else { return false }
            return filter.quarantineReason == nil && owner != nil
        default: return true
        }
    }

    /// Why `rule` holds or not, for an operator.
    func detail(_ rule: EligibilityRule) -> String {
        if !checked(rule) {
            // The result column says "not checked" (`Explanation.Check.checked`); the detail says why.
            if filter.quarantineReason != nil { return "the filter is quarantined: a run never evaluates it" }
            if owner == nil {
                return "owner \(filter.ownerId) not found: no plan to check, and a run does not evaluate the filter"
            }
            return "the filter is invalid: no conditions to hold against the owner's plan"
        }
        switch rule {
        case .profileActive:
            guard let profile else { return noProfile }
            return "profile \(profile.id) status \(Profile.Status.describe(profile.status))"
        case .ownerActive:
            guard let owner else { return "owner \(filter.ownerId) not found" }
            return
                "owner \(owner.id) status \(Profile.Status.describe(owner.status)), plan \(Profile.Plan.describe(owner.plan))"
        case .filterNotDeleted:
            guard let deletedAt = filter.deletedAt else { return "filter \(filter.id) not deleted" }
            // An infinite deleted_at still marks the filter deleted (docs/decisions.md, session 23); said as such,
            // not as the year 294247 (review of session 32).
            switch deletedAt.microsecondsSinceEpoch {
            case .max: return "filter \(filter.id) deleted (deleted_at infinity)"
            case .min: return "filter \(filter.id) deleted (deleted_at -infinity)"
            default: return "filter \(filter.id) deleted at \(deletedAt.iso8601)"
            }
        case .filterReadable:
            guard let reason = filter.quarantineReason else { return "readable" }
            return "quarantined, never evaluated: \(reason)"
        case .filterValid:
            switch conditions {
            case .success: return "valid"
            case .failure(let error): return error.description
            }
        case .filterNotSuspended:
            guard !passes(.filterNotSuspended) else { return "not suspended" }
            // Checked only with an owner (`checked`); the plan is the owner's, never a stand-in.
            return "owner \(filter.ownerId) is on plan \(Profile.Plan.describe(owner?.plan ?? Profile.Plan.free)), "
                + "and every condition needs a plan it lacks: suspended, it matches nothing until the owner pays again"
        case .notTheOwner:
            guard let profile else { return noProfile }
            return profile.id == filter.ownerId
                ? "profile \(profile.id) is the filter's owner"
                : "profile \(profile.id), owner \(filter.ownerId)"
        case .noBlockEitherWay:
            guard let profile else { return noProfile }
            return blocks.blocksEitherWay(profile.id, filter.ownerId)
                ? "profile \(profile.id) and owner \(filter.ownerId) are blocked (one way or both)"
                : "no block between profile \(profile.id) and owner \(filter.ownerId)"
        }
    }

    /// Whether every rule holds.
    var eligible: Bool {
        EligibilityRule.allCases.allSatisfy(passes)
    }

    /// The conditions that count: those the owner's plan allows (an absent owner counts as free).
    var effectiveConditions: (conditions: FilterConditions, ignoredPaidKeys: [String])? {
        guard case .success(let decoded) = conditions else { return nil }
        return decoded.effective(forOwnerPlan: owner?.plan ?? Profile.Plan.free)
    }
}
