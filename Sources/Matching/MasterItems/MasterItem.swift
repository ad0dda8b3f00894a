/// The MasterItem catalogue (master-items.md): one caseless enum per item, each in its own file.
///
/// Adding an item: a new file declaring `MasterItem.<Name>` through its kind's protocol, and one
/// line in `definitions` below. Nothing else in the engine changes.
public enum MasterItem {
    /// The catalogue, in the order of master-items.md.
    static let definitions: [any MasterItemDefinition.Type] = [
        Gender.self,
        Age.self,
        Height.self,
        Income.self,
        Residence.self,
        Hometown.self,
        BodyType.self,
        BloodType.self,
        Education.self,
        Occupation.self,
        Holiday.self,
        Smoking.self,
        Drinking.self,
        MaritalStatus.self,
        HasChildren.self,
        MarriageIntent.self,
        WantsChildren.self,
        Housework.self,
        MeetingPreference.self,
        DateCost.self,
        SiblingOrder.self,
        Housemate.self,
        Languages.self,
        Personality.self,
        Communities.self,
        HasPhoto.self,
        HasIntroduction.self,
        Verified.self,
        LastLogin.self,
        Registered.self,
    ]

    /// Every item, in catalogue order; `all[i].index == i`.
    public static let all: [AnyMasterItem] = definitions.enumerated().map { AnyMasterItem($1, index: $0) }

    private static let byKey: [String: AnyMasterItem] =
        Dictionary(all.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })

    /// The item with `key`, or nil for an unknown key.
    public static func item(forKey key: String) -> AnyMasterItem? {
        byKey[key]
    }
}
