extension MasterItem {
    /// ログイン日時.
    public enum LastLogin: RecencyItemDefinition {
        public static let key = "last_login"
        public static let column = "last_login_at"
    }
}
