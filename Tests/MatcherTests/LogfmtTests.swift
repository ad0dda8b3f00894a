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
    }
}
