extension MasterItem {
    /// お酒.
    public enum Drinking: SingleChoiceItemDefinition {
        public static let key = "drinking"
        public static let column = "drinking"
        public static let domain: ClosedRange<Int32>? = 1...3
        public static let labels = ["飲まない", "飲む", "ときどき飲む"]
    }
}
