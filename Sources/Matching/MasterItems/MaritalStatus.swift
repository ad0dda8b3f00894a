extension MasterItem {
    /// 結婚歴.
    public enum MaritalStatus: SingleChoiceItemDefinition {
        public static let key = "marital_status"
        public static let column = "marital_status"
        public static let domain: ClosedRange<Int32>? = 1...3
        public static let labels = ["独身(未婚)", "独身(離婚)", "独身(死別)"]
    }
}
