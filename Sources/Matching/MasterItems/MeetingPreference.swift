extension MasterItem {
    /// 出会うまでの希望.
    public enum MeetingPreference: SingleChoiceItemDefinition {
        public static let key = "meeting_preference"
        public static let column = "meeting_preference"
        public static let domain: ClosedRange<Int32>? = 1...3
        public static let labels = ["まずは会いたい", "気が合えば会いたい", "メッセージを重ねてから"]
    }
}
