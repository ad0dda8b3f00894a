extension MasterItem {
    /// 身長, in cm.
    public enum Height: RangeItemDefinition {
        public static let key = "height"
        public static let column = "height_cm"
        public static let domain: ClosedRange<Int32>? = 120...230
        /// In explanations only.
        public static let unit: String? = "cm"
    }
}
