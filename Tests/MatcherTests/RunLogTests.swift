import Chronology
import Foundation
import Logging
import PostgresClient
import Testing

@testable import Matching
@testable import matcher

/// The lines a run logs (review of session 32): every event after a run starts carries its kind, shard and id, so
/// that shards logging to one place can be told apart, and counts and flags are JSON numbers and booleans.
@Suite struct RunLogTests {
    final class Lines: @unchecked Sendable {
        private let lock = NSLock()
        private var texts: [String] = []
        func append(_ text: String) { lock.lock(); texts.append(text); lock.unlock() }
        var all: [String] { lock.lock(); defer { lock.unlock() }; return texts }
    }

    /// Formats each event with the real handler's JSON, and keeps the text.
    struct Capturing: LogHandler {
        let lines: Lines
        var logLevel: Logger.Level = .debug
        var metadata: Logger.Metadata = [:]
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let handler = LineLogHandler(label: "test", format: .json, metadata: metadata)
            lines.append(handler.line(level: event.level, message: event.message.description, metadata: event.metadata))
        }
    }

    @Test func eventsCarryTheRunAndTypedValues() throws {
        let lines = Lines()
        let output = LoggingRunOutput(logger: Logger(label: "test") { _ in Capturing(lines: lines) })
        let shard = try Shard(index: 1, count: 4)
        output.handle(
            .started(
                kind: .run, shard: shard, clock: Timestamp(secondsSinceEpoch: 1_772_334_000), runId: 42, resumed: false,
                dryRun: false))
        output.handle(.unitRetried(lastFilterId: 7, attempt: 1, attempts: 3, reason: "deadlock"))
        output.handle(.forgotten(RetentionOutcome(forgotten: 5, backlog: true)))
        let texts = lines.all
        #expect(texts.count == 3)
        for text in texts {
            let fields = try #require(
                try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
            #expect(fields["run_id"] as? Int == 42, "\(text)")
            #expect(fields["shard"] as? String == "1/4" && fields["kind"] as? String == "run", "\(text)")
        }
        #expect(texts[1].contains(#""attempt":1"#) && texts[1].contains(#""last_filter_id":7"#), "\(texts[1])")
        #expect(texts[2].contains(#""matches_forgotten":5"#) && texts[2].contains(#""backlog":true"#), "\(texts[2])")
        // What follows a run's end (the next run's read, before it starts) is not that run's.
        output.handle(
            .finished(
                RunSummary(
                    runId: 42, kind: .run, shard: shard, clock: Timestamp(secondsSinceEpoch: 1_772_334_000),
                    dryRun: false, resumedRunId: nil, counters: .zero, matchesFound: 0, phaseSeconds: [:],
                    totalSeconds: 1, retention: nil, completedRun: nil)))
        output.handle(.candidatesLoaded(3))
        let after = try #require(lines.all.last)
        #expect(lines.all.dropLast().last?.contains(#""run_id":42"#) == true)
        #expect(!after.contains("run_id") && after.contains(#""shard":"1/4""#), "\(after)")
    }

    /// A sweep whose connection could not be opened is left to the next run, and the warning says what a run needs:
    /// two connections, up to --write-connections + 2 (README), not "--write-connections + 2" as a minimum.
    @Test func aSweepNotStartedSaysWhatARunNeeds() throws {
        let lines = Lines()
        let output = LoggingRunOutput(logger: Logger(label: "test") { _ in Capturing(lines: lines) })
        output.handle(
            .forgotten(
                RetentionOutcome(forgotten: 0, backlog: true, notStartedBecause: "too many connections for role")))
        let warning = try #require(lines.all.first { $0.contains("retention sweep not started") })
        #expect(
            warning.contains("a run needs two connections and uses up to --write-connections + 2"), "\(warning)")
    }

    /// Review of session 33: what to do about two refusals that read alike otherwise: a pooler refusing the worker's
    /// session settings, and row-level security on a table the worker reads.
    @Test func poolersAndRowLevelSecurityAreNamedInTheAdvice() {
        let pooler = PostgresError(
            kind: .connection,
            message: "could not connect to host=pool port=6432 dbname=m user=w: ERROR:  unsupported startup parameter "
                + "in options: jit")
        #expect(
            advice(for: pooler, kind: failureKind(of: pooler)).contains("connect the worker to PostgreSQL directly"))
        let hidden = PostgresError(
            kind: .server, sqlState: "42501",
            message: "query would be affected by row-level security policy for table \"blocks\"")
        let text = advice(for: hidden, kind: failureKind(of: hidden))
        #expect(text.contains("BYPASSRLS"), "\(text)")
    }

    /// Review of the explain output: a database that cannot be reached ended every command's line with "the next
    /// run retries", an explain's too, which nothing retries. What retries is now the command's own.
    @Test func unreachableAdviceSaysWhatRetriesForEachCommand() {
        struct Unreachable: ClassifiedError { var failureKind: FailureKind { .unavailable } }
        let refused = PostgresError(
            kind: .connection, message: "could not connect to host=127.0.0.1 port=1: Connection refused")
        for error in [refused, Unreachable()] as [any Error] {
            #expect(advice(for: error, kind: .unavailable, command: "run").hasSuffix("the next run retries"))
            for (command, retry) in [
                ("explain", "then run `matcher explain` again"), ("status", "then run `matcher status` again"),
                ("backfill", "then run the same backfill again"),
            ] {
                let text = advice(for: error, kind: .unavailable, command: command)
                #expect(text.contains(retry) && !text.contains("next run"), "\(command): \(text)")
            }
        }
    }

    /// Review of session 33: a retention other than the latest run's is a warning naming both values, as numbers.
    @Test func aChangedRetentionIsAWarningWithBothValues() throws {
        let lines = Lines()
        let output = LoggingRunOutput(logger: Logger(label: "test") { _ in Capturing(lines: lines) })
        output.handle(.retentionChanged(from: 180, to: 30))
        let text = try #require(lines.all.first)
        let fields = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
        #expect(fields["level"] as? String == "warning", "\(text)")
        #expect(fields["retention_days"] as? Int == 30 && fields["latest_retention_days"] as? Int == 180, "\(text)")
        #expect((fields["msg"] as? String)?.contains("--retention-days differs") == true, "\(text)")
    }

    /// Review of session 32: a server's or a trigger's message went into the one failure line raw (an escape
    /// sequence for the terminal, a line break that made it two).
    @Test func theFailureLineShowsControlCharactersVisibly() {
        let line = failureLine("run", "ERROR P0001: boom\nsecond line \u{1B}[31m red", "do this", 1)
        #expect(line.filter { $0 == "\n" }.count == 1 && line.hasSuffix("(exit 1)\n"), "\(line)")
        #expect(!line.unicodeScalars.contains { $0.value == 0x1B }, "\(line)")
        #expect(line.contains("boom\\u{a}second line \\u{1b}[31m red"), "\(line)")
    }
}
