extension MasterItem {
    /// 体型.
    public enum BodyType: SingleChoiceItemDefinition {
        public static let key = "body_type"
        public static let column = "body_type"
        public static let domain: ClosedRange<Int32>? = 1...7
        public static let labels = ["スリム", "やや細め", "普通", "グラマー", "筋肉質", "ややぽっちゃり", "ぽっちゃり"]
    }
}
