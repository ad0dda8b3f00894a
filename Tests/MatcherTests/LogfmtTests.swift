import Testing

@testable import matcher

/// A logged value stays on its line and inert, whatever a server's message or a row carried (review of
/// session 23: `\r`, ESC and other controls went out raw).
@Suite struct LogfmtTests {
    @Test func controlCharactersAreEscapedAndQuoted() {
        #expect(LineLogHandler.logfmtValue("plain") == "plain")
        #expect(LineLogHandler.logfmtValue("two words") == #""two words""#)
        #expect(LineLogHandler.logfmtValue("a\rb") == #""a\rb""#)
        #expect(LineLogHandler.logfmtValue("tab\there") == #""tab\there""#)
        #expect(LineLogHandler.logfmtValue("esc\u{1B}[2J") == #""esc\u001b[2J""#)
        #expect(LineLogHandler.logfmtValue("say \"hi\"\n\\") == #""say \"hi\"\n\\""#)
        let escaped = LineLogHandler.logfmtValue("x\u{1B}\u{85}\u{2028}y")
        #expect(!escaped.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x85 || $0.value == 0x2028 })
        // Review of session 32: Unicode spaces split a field for readers that split on any space; a bidi override
        // reorders what a terminal shows.
        #expect(LineLogHandler.logfmtValue("a\u{3000}b") == "\"a\u{3000}b\"")
        #expect(LineLogHandler.logfmtValue("x\u{202E}y") == #""x\u202ey""#)
        #expect(LineLogHandler.logfmtValue("tag\u{E0067}") == #""tag\udb40\udc67""#)  // a surrogate pair, as JSON
    }

    @Test func thePriorityPrefixIsForcedByCommonWordsAndATypoIsIgnored() {
        #expect(Log.standardErrorIsJournal(environment: ["MATCHER_LOG_PRIORITY_PREFIX": "true"]))
        #expect(Log.standardErrorIsJournal(environment: ["MATCHER_LOG_PRIORITY_PREFIX": "YES"]))
        #expect(!Log.standardErrorIsJournal(environment: ["MATCHER_LOG_PRIORITY_PREFIX": "0"]))
        #expect(!Log.standardErrorIsJournal(environment: ["MATCHER_LOG_PRIORITY_PREFIX": "tru"]))  // as if unset
    }
}
