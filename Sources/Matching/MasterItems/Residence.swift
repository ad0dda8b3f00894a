extension MasterItem {
    /// 居住地: JIS X 0401 prefecture codes, 48 = abroad.
    public enum Residence: SingleChoiceItemDefinition {
        public static let key = "residence"
        public static let column = "residence"
        public static let domain: ClosedRange<Int32>? = 1...48
        public static let labels = Prefecture.labels
    }
}
