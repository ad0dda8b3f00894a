extension MasterItem {
    /// サブ写真あり.
    public enum HasPhoto: FlagItemDefinition {
        public static let key = "has_photo"
        public static let column = "has_photo"
    }
}
