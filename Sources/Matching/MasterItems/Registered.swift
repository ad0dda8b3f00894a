extension MasterItem {
    /// 登録日.
    public enum Registered: RecencyItemDefinition {
        public static let key = "registered"
        public static let column = "created_at"
    }
}
