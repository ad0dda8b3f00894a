extension MasterItem {
    /// 休日.
    public enum Holiday: SingleChoiceItemDefinition {
        public static let key = "holiday"
        public static let column = "holiday"
        public static let domain: ClosedRange<Int32>? = 1...4
        public static let labels = ["土日", "平日", "不定期", "その他"]
    }
}
