extension MasterItem {
    /// 兄弟姉妹.
    public enum SiblingOrder: SingleChoiceItemDefinition {
        public static let key = "sibling_order"
        public static let column = "sibling_order"
        public static let domain: ClosedRange<Int32>? = 1...5
        public static let labels = ["長男・長女", "次男・次女", "三男・三女以降", "一人っ子", "その他"]
    }
}
