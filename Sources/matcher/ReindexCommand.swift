import ArgumentParser
import Foundation
import Logging
import Matching
import MatchingPostgres

/// `matcher reindex`: rebuilds `filter_matches`' primary key once it has grown well past its packed size
/// (docs/runbook.md, "MatcherPrimaryKeyBloated"). Run as the table's owner, like `matcher migrate`; weekly
/// from `deploy/systemd/matcher-reindex.timer` or `deploy/k8s/reindex-cronjob.yaml`.
struct Reindex: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rebuild filter_matches' primary key (REINDEX CONCURRENTLY) when it is well past its packed size.",
        discussion: """
            At the retention bound the table keeps a constant number of pairs while its primary key keeps \
            growing (pages split by each day's inserts are given back only when empty), and so does what \
            each day's run touches. This compares the key with its packed size (the same entries built at \
            fillfactor 90) and, when it is --min-ratio times that or more, rebuilds it at fillfactor 70 (room \
            for the next days' inserts) without blocking the app's reads or the runs' writes. It first drops \
            what an interrupted rebuild left (an invalid filter_matches_pkey_ccnew or _ccold). Needs the owner of \
            filter_matches (the role of `matcher migrate`; another role gets exit 78). Exit 0 whether or not \
            it rebuilt; 75 while another `matcher reindex` runs.
            """)

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Rebuild when the key is at least this many times its packed size (1 rebuilds always).")
    var minRatio = RetentionState.rebuildRatio
    @Option(help: "Output format: text or json.") var format: ReportFormat = .text
    @Option(help: "Log format on standard error: logfmt or json.")
    var logFormat: LogFormat = .logfmt

    func validate() throws {
        guard minRatio >= 1, minRatio.isFinite else { throw ValidationError("--min-ratio must be 1 or more") }
    }

    func run() throws {
        Log.bootstrap(logFormat)
        let logger = Logger(label: "matcher.reindex")
        try runReportingFailures(logger, "reindex") {
            let connection = try Database(database, applicationName: "matcher reindex").connect()
            defer { connection.close() }
            let outcome: PrimaryKeyRebuild
            do {
                outcome = try PrimaryKeyUpkeep(connection: connection).rebuild(minimumRatio: minRatio)
            } catch let busy as PrimaryKeyUpkeep.Busy {
                logger.debug("reindex lock held elsewhere")  // the line below is the one line (cli.md)
                FileHandle.standardError.write(Data("matcher: \(busy.description) (exit 75)\n".utf8))
                throw ExitCode(ExitStatus.locked)
            }
            logger.notice(
                outcome.after == nil ? "primary key left as it is" : "primary key rebuilt",
                metadata: [
                    "bytes_before": "\(outcome.before.bytes)",
                    "bytes_after": "\(outcome.after?.bytes ?? outcome.before.bytes)",
                    "ratio_before": "\(String(format: "%.2f", outcome.before.ratio))",
                    "leftovers_dropped": "\(outcome.droppedLeftovers.count)",
                    "seconds": "\(String(format: "%.2f", outcome.seconds))",
                ])
            printReport(.primaryKeyRebuild(outcome), format)
            return nil
        }
    }
}
