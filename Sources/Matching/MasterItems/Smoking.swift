extension MasterItem {
    /// タバコ.
    public enum Smoking: SingleChoiceItemDefinition {
        public static let key = "smoking"
        public static let column = "smoking"
        public static let domain: ClosedRange<Int32>? = 1...6
        public static let labels = [
            "吸わない", "吸う", "吸う(電子タバコ)", "ときどき吸う", "非喫煙者の前では吸わない", "相手が嫌ならやめる",
        ]
    }
}
