extension MasterItem {
    /// 結婚に対する意思.
    public enum MarriageIntent: SingleChoiceItemDefinition {
        public static let key = "marriage_intent"
        public static let column = "marriage_intent"
        public static let domain: ClosedRange<Int32>? = 1...5
        public static let labels = ["すぐにでもしたい", "2〜3年のうちに", "良い人がいれば", "今は考えていない", "わからない"]
    }
}
