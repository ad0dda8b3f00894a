extension MasterItem {
    /// 血液型.
    public enum BloodType: SingleChoiceItemDefinition {
        public static let key = "blood_type"
        public static let column = "blood_type"
        public static let domain: ClosedRange<Int32>? = 1...4
        public static let labels = ["A", "B", "O", "AB"]
    }
}
