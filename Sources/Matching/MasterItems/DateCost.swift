extension MasterItem {
    /// 初回デート費用.
    public enum DateCost: SingleChoiceItemDefinition {
        public static let key = "date_cost"
        public static let column = "date_cost"
        public static let domain: ClosedRange<Int32>? = 1...7
    }
}
