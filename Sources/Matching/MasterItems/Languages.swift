extension MasterItem {
    /// 話せる言語 (`smallint[]`).
    public enum Languages: MultiChoiceItemDefinition {
        public static let key = "languages"
        public static let column = "languages"
        public static let domain: ClosedRange<Int32>? = 1...30
    }
}
