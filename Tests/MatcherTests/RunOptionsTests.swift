import ArgumentParser
import Testing

@testable import matcher

/// The run-like commands' options as the command line gives them.
@Suite struct RunOptionsTests {
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
