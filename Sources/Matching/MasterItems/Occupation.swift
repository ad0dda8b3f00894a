extension MasterItem {
    /// 職業.
    public enum Occupation: SingleChoiceItemDefinition {
        public static let key = "occupation"
        public static let column = "occupation"
        public static let domain: ClosedRange<Int32>? = 1...60
    }
}
