extension MasterItem {
    /// 出身地: JIS X 0401 prefecture codes, 48 = abroad.
    public enum Hometown: SingleChoiceItemDefinition {
        public static let key = "hometown"
        public static let column = "hometown"
        public static let domain: ClosedRange<Int32>? = 1...48
        public static let labels = Prefecture.labels
    }
}
