extension MasterItem {
    /// 学歴.
    public enum Education: SingleChoiceItemDefinition {
        public static let key = "education"
        public static let column = "education"
        public static let domain: ClosedRange<Int32>? = 1...5
        public static let labels = ["高校卒", "短大/専門学校卒", "大学卒", "大学院卒", "その他"]
    }
}
