extension MasterItem {
    /// 年収, as an ordered band.
    public enum Income: RangeItemDefinition {
        public static let key = "income"
        public static let column = "income_band"
        public static let domain: ClosedRange<Int32>? = 1...9
        public static let labels = [
            "<200万", "200-400万", "400-600万", "600-800万", "800-1000万", "1000-1500万", "1500-2000万",
            "2000-3000万", "3000万以上",
        ]
    }
}
