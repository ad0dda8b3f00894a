extension MasterItem {
    /// 趣味・関心 community ids (`int[]`); filtering on them needs the paid plan.
    public enum Communities: MultiChoiceItemDefinition {
        public static let key = "communities"
        public static let column = "communities"
        public static let domain: ClosedRange<Int32>? = 1...Int32.max
        public static let storage = ColumnStorage.integerArray
        public static let requiredPlan = Profile.Plan.paid
    }
}
