import Foundation
import PostgresTestSupport
import Testing

@testable import matcher

/// A second SIGTERM/SIGINT aborts at once: the cancel of the statement in progress is sent from a thread of its
/// own and waited for at most `cancelWaitSeconds` (review of session 23: behind a frozen network, libpq's cancel
/// never returned, and the process never exited).
@Suite struct SignalTrapTests {
    @Test func aCancelThatNeverReturnsDoesNotHoldTheExit() {
        let never = DispatchSemaphore(value: 0)
        let start = ContinuousClock.now
        let returned = SignalTrap.within(0.2) { never.wait() }
        let waited = ContinuousClock.now - start
        #expect(!returned)
        #expect(waited < .seconds(10), "\(waited)")  // 0.2 s allowed; more only on a machine under load
        never.signal()
    }

    @Test func aCancelThatReturnsIsWaitedFor() {
        let finished = Locked(false)
        #expect(SignalTrap.within(5) { finished.update { $0 = true } })
        #expect(finished.value)
    }
}
