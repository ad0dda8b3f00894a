extension MasterItem {
    /// 自己紹介文あり.
    public enum HasIntroduction: FlagItemDefinition {
        public static let key = "has_introduction"
        public static let column = "has_introduction"
    }
}
