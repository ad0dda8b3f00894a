extension MasterItem {
    /// 本人確認済み.
    public enum Verified: FlagItemDefinition {
        public static let key = "verified"
        public static let column = "verified"
    }
}
