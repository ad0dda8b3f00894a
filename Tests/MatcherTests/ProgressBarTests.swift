import Testing

@testable import matcher

/// The bar's rate and ETA: measured once there is something to measure by, not "0/s ETA 0:00" at the first
/// update (review of session 23).
@Suite struct ProgressBarTests {
    @Test func theFirstUpdateShowsNoRate() {
        let first = ProgressBar.line(done: 10, total: 100, matches: 5, elapsed: 0)
        #expect(first.contains("-/s  ETA -"), "\(first)")
        let later = ProgressBar.line(done: 50, total: 100, matches: 25, elapsed: 10)
        #expect(later.contains("5/s  ETA 0:10"), "\(later)")
        #expect(later.contains(" 50%"))
    }
}
