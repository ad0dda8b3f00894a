extension MasterItem {
    /// 性別.
    public enum Gender: SingleChoiceItemDefinition {
        public static let key = "gender"
        public static let column = "gender"
        public static let domain: ClosedRange<Int32>? = 1...2
        /// Every profile has a gender (never 0), so a condition listing 0 is a mistake: rejected.
        public static let acceptsUnanswered = false
        public static let labels = ["男性", "女性"]
    }
}
