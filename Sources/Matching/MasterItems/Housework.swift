extension MasterItem {
    /// 家事・育児.
    public enum Housework: SingleChoiceItemDefinition {
        public static let key = "housework"
        public static let column = "housework"
        public static let domain: ClosedRange<Int32>? = 1...5
    }
}
