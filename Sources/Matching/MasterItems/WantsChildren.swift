extension MasterItem {
    /// 子供が欲しいか.
    public enum WantsChildren: SingleChoiceItemDefinition {
        public static let key = "wants_children"
        public static let column = "wants_children"
        public static let domain: ClosedRange<Int32>? = 1...4
        public static let labels = ["欲しい", "欲しくない", "わからない", "相手と相談して決める"]
    }
}
