extension MasterItem {
    /// 同居人.
    public enum Housemate: SingleChoiceItemDefinition {
        public static let key = "housemate"
        public static let column = "housemate"
        public static let domain: ClosedRange<Int32>? = 1...5
        public static let labels = ["一人暮らし", "実家暮らし", "ルームシェア", "ペットと一緒", "その他"]
    }
}
