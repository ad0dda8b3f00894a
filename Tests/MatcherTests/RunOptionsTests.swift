import ArgumentParser
import Testing

@testable import matcher

/// The run-like commands' options as the command line gives them.
@Suite struct RunOptionsTests {
    /// Review of the explain output: `explain --profile -5` was "Missing value for '--profile <profile>'" (the id
    /// read as a flag); a negative id is now the id, and gets explain's own answer.
    @Test func explainTakesNegativeIds() throws {
        let negative = try Explain.parse(["--filter", "-5", "--profile", "-3"])
        #expect(negative.filterId == -5 && negative.profileId == -3)
        let positive = try Explain.parse(["--profile", "3", "--filter=7", "--format", "json"])
        #expect(positive.filterId == 7 && positive.profileId == 3 && positive.format == .json)
        #expect(throws: (any Error).self) { try Explain.parse(["--filter", "1"]) }
        #expect(throws: (any Error).self) { try Explain.parse(["--filter", "x", "--profile", "1"]) }
    }

    /// Found by review in session 32: a dry run opened `--write-connections` connections (3 by default) for its
    /// probe, slots a real run beside it may need (cli.md: a dry run never fails a real run started beside it).
    @Test func aDryRunOpensOneConnection() throws {
        let dry = try Run.parse(["--dry-run", "--write-connections", "4"])
        #expect(dry.options.storeConnections == 1)
        let real = try Run.parse(["--write-connections", "4"])
        #expect(real.options.storeConnections == 4)
        let dryBackfill = try Backfill.parse(["--dry-run"])
        #expect(dryBackfill.options.storeConnections == 1)
    }

    /// Found by review in session 32: 0 recorded nothing and still moved the shard's progress past the day's
    /// changes.
    @Test func aCapOfZeroIsAUsageError() throws {
        #expect(throws: (any Error).self) { try Run.parse(["--max-per-filter", "0"]) }
        #expect(try Run.parse(["--max-per-filter", "1"]).options.maxPerFilter == 1)
    }
}
