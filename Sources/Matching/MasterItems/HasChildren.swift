extension MasterItem {
    /// 子供の有無.
    public enum HasChildren: SingleChoiceItemDefinition {
        public static let key = "has_children"
        public static let column = "has_children"
        public static let domain: ClosedRange<Int32>? = 1...3
        public static let labels = ["いない", "同居中", "別居中"]
    }
}
