import Chronology
import Testing

@testable import matcher

/// An instant on the command line (`--now`, `--to`, `--changed-since`, `--changed-before`): ISO 8601 with its zone
/// offset, in the years 0001-9999 in UTC. Review of session 29: `progress reset --to
/// 0001-01-01T00:00:00+09:00` stored a mark in the year 0, which PostgreSQL cannot read, and every later run of
/// the shard failed.
@Suite struct InstantArgumentTests {
    @Test func anInstantOutsideTheYearsPostgresReadsAsTextIsRefused() throws {
        let inTokyo = try instant("--to", "2026-03-01T12:00:00+09:00")
        #expect(inTokyo == Timestamp(iso8601: "2026-03-01T03:00:00Z"))
        #expect(try instant("--to", "0001-01-01T09:00:00+09:00") == Timestamp(iso8601: "0001-01-01T00:00:00Z"))
        for text in ["0001-01-01T00:00:00+09:00", "9999-12-31T23:00:00-05:00"] {
            var message = ""
            do {
                _ = try instant("--to", text)
            } catch {
                message = String(describing: error)
            }
            #expect(message.contains("only years 0001-9999 are accepted"), "\(text): \(message)")
        }
        var noOffset = ""
        do { _ = try instant("--now", "2026-03-01T03:00:00") } catch { noOffset = String(describing: error) }
        #expect(noOffset.contains("not an ISO 8601 time with a zone offset"))
    }
}
