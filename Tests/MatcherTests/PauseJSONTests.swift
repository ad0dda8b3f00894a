import Chronology
import Matching
import Testing

@testable import matcher

/// `matcher notifications pause | resume | show --format json`: the same keys from each, `paused` the state after
/// the command.
@Suite struct PauseJSONTests {
    func pause() throws -> NotificationPause {
        let pausedAt = try #require(Timestamp(iso8601: "2026-03-01T03:00:00Z"))
        return NotificationPause(pausedAt: pausedAt, pausedBy: "ops", reason: "push outage")
    }

    @Test func pauseAndShowSayTheStateNow() throws {
        #expect(
            JSONText.encode(PauseJSON(try pause()))
                == #"{"lifted":null,"paused":true,"paused_at":"2026-03-01T03:00:00Z","paused_by":"ops","reason":"push outage"}"#
        )
        #expect(
            JSONText.encode(PauseJSON(nil))
                == #"{"lifted":null,"paused":false,"paused_at":null,"paused_by":null,"reason":null}"#)
    }

    /// Review of session 37: `resume` printed the pause it had just lifted as `"paused": true`, so a script
    /// checking `.paused` after resuming concluded the resume had failed.
    @Test func resumeSaysNotPausedAndWhatItLifted() throws {
        #expect(
            JSONText.encode(PauseJSON(nil, lifted: try pause()))
                == #"{"lifted":{"paused_at":"2026-03-01T03:00:00Z","paused_by":"ops","reason":"push outage"},"paused":false,"paused_at":null,"paused_by":null,"reason":null}"#
        )
    }
}
