extension MasterItem {
    /// 性格・タイプ (`smallint[]`).
    public enum Personality: MultiChoiceItemDefinition {
        public static let key = "personality"
        public static let column = "personality"
        public static let domain: ClosedRange<Int32>? = 1...40
    }
}
