extension MasterItem {
    /// 年齢: full years from `birth_date` to the run's date in the run's time zone.
    public enum Age: RangeItemDefinition {
        public static let key = "age"
        public static let column = "birth_date"
        public static let domain: ClosedRange<Int32>? = 18...120
        /// In explanations only.
        public static let unit: String? = "years"
        public static let storage = ColumnStorage.nullableDate
    }
}
