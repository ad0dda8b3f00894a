import ArgumentParser
import Foundation
import Logging
import Matching
import MatchingPostgres
import PostgresClient

/// Exit statuses (cli.md): 0 success; 75 another run of the shard holds the lock; 1 failure; 130/143 when
/// stopped by SIGINT/SIGTERM at a unit-of-work boundary.
enum ExitStatus {
    static let locked: Int32 = 75
    static let failure: Int32 = 1
}

/// Runs a command body, turning failures into one clear line on standard error and an exit status, and
/// records the outcome in the metrics file when one is configured.
func runReportingFailures(_ logger: Logger, _ what: String, metrics: MetricsFile? = nil,
                          _ body: () throws -> RunSummary?) throws {
    func record(_ result: MetricsFile.Result, _ summary: RunSummary?) {
        guard let metrics else { return }
        do {
            try metrics.write(result, summary: summary)
        } catch {
            logger.warning("metrics file not written", metadata: ["path": "\(metrics.path)", "error": "\(error)"])
        }
    }
    do {
        let summary = try body()
        record(.success, summary)
    } catch let error as RunLocked {
        record(.locked, nil)
        logger.notice("run lock held elsewhere", metadata: ["shard": "\(error.shard)", "kind": "\(error.kind.rawValue)"])
        FileHandle.standardError.write(Data("matcher: \(error.description) (exit 75)\n".utf8))
        throw ExitCode(ExitStatus.locked)
    } catch let error as RunStopped {
        record(.stopped, nil)
        logger.warning("stopped", metadata: ["reason": "\(error.reason)"])
        FileHandle.standardError.write(Data("matcher: \(what) \(error.description)\n".utf8))
        throw ExitCode(error.reason == "SIGINT" ? 130 : 143)
    } catch let error as ExitCode {
        throw error
    } catch {
        record(.failure, nil)
        let advice = advice(for: error)
        logger.error("failed", metadata: ["error": "\(error)"])
        FileHandle.standardError.write(Data("matcher: \(what) failed: \(error)\(advice)\n".utf8))
        throw ExitCode(ExitStatus.failure)
    }
}

private func advice(for error: Error) -> String {
    if let pg = error as? PostgresError {
        switch pg.kind {
        case .connection where pg.message.hasPrefix("could not connect") || pg.message.hasPrefix("invalid connection string"):
            return " — check --database-url / DATABASE_URL / PG* settings and that the server is up"
        case .connection:
            return " — the connection was lost mid-run; committed units are kept and the next run resumes the work"
        case .server where pg.sqlState == "42P01" || pg.sqlState == "42703":
            return " — the schema is missing or old: run `matcher migrate`"
        case .server where pg.sqlState == "57014":
            return " — a statement hit statement_timeout or was cancelled; the next run resumes the work"
        default:
            return " — committed units are kept; the next run resumes the work"
        }
    }
    if error is MigrationError { return "" }
    return " — committed units are kept; the next run resumes the work"
}

/// SIGTERM and SIGINT ask the run to stop at the next unit-of-work boundary; a second signal cancels the
/// statement in progress and exits at once (still nothing half-written: the open transaction rolls back).
final class SignalTrap: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    let stop = StopRequest()

    init(onSecond: @escaping @Sendable (String) -> Void) {
        for (signo, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: .global())
            source.setEventHandler { [stop] in
                if stop.requestedReason != nil {
                    onSecond(name)
                } else {
                    stop.request(name)
                    FileHandle.standardError.write(Data(
                        "matcher: \(name) received: stopping at the next unit-of-work boundary (send again to abort now)\n".utf8))
                }
            }
            source.resume()
            sources.append(source)
        }
    }
}

extension SignalTrap {
    /// The trap for a run or backfill on `store`: a second signal cancels the statement in progress and exits.
    static func stoppingAtUnitBoundaries(of store: PostgresMatchingStore) -> SignalTrap {
        SignalTrap { name in
            store.connection.cancelCurrentStatement()
            FileHandle.standardError.write(Data("matcher: second \(name): aborting now; the open unit rolls back\n".utf8))
            Foundation.exit(name == "SIGINT" ? 130 : 143)
        }
    }
}

/// Logs a run's events: phases, progress at most every few seconds, and the one summary line.
struct LoggingRunOutput: RunOutputHandler {
    let logger: Logger
    let progress = ProgressThrottle(interval: 5)
    /// Invalid filters logged one by one per run; the rest are counted (all are in matcher_invalid_filters).
    static let invalidFiltersLogged = 20
    let invalidSeen = Counter()
    /// Drawn on a terminal instead of the periodic progress lines.
    let bar: ProgressBar? = ProgressBar.isTerminal ? ProgressBar() : nil

    func handle(_ event: RunEvent) {
        switch event {
        case .started(let kind, let shard, let clock, let runId, let resumed, let dryRun):
            logger.info(resumed ? "resuming interrupted run" : "run started", metadata: [
                "kind": "\(kind.rawValue)", "shard": "\(shard)", "clock": "\(clock.iso8601)",
                "run_id": "\(runId.map(String.init) ?? "-")", "dry_run": "\(dryRun)",
            ])
        case .phaseStarted:
            break
        case .phaseFinished(let phase, let seconds):
            logger.info("phase finished", metadata: ["phase": "\(phase.rawValue)", "seconds": "\(String(format: "%.3f", seconds))"])
        case .candidatesLoaded(let count):
            logger.info("candidates loaded", metadata: ["candidates": "\(count)"])
        case .filtersLoaded(let total, let invalid, let paid, let inactive):
            if invalid > Self.invalidFiltersLogged {
                logger.warning("more invalid filters skipped", metadata: [
                    "count": "\(invalid - Self.invalidFiltersLogged)", "see": "matcher_invalid_filters",
                ])
            }
            logger.info("filters loaded", metadata: [
                "filters": "\(total)", "invalid": "\(invalid)", "paid_ignored": "\(paid)", "owner_inactive": "\(inactive)",
            ])
        case .invalidFilter(let record):
            if invalidSeen.increment() <= Self.invalidFiltersLogged {
                logger.warning("invalid filter skipped", metadata: [
                    "filter_id": "\(record.filterId)", "owner_id": "\(record.ownerId)", "reason": "\(record.error.description)",
                ])
            }
        case .quarantined(let row):
            if invalidSeen.increment() <= Self.invalidFiltersLogged {
                logger.warning("unreadable row quarantined", metadata: [
                    "kind": "\(row.kind.rawValue)", "row_id": "\(row.rowId.map(String.init) ?? "-")",
                    "reason": "\(row.reason)", "see": "matcher_quarantine",
                ])
            }
        case .unitCommitted(let done, let total, let matches, let notifications):
            if let bar {
                bar.update(done: done, total: total, matches: matches)
                if done == total { bar.finish() }
            } else if progress.due() || done == total {
                logger.info("progress", metadata: [
                    "filters_done": "\(done)", "filters_total": "\(total)",
                    "matches_written": "\(matches)", "notifications_written": "\(notifications)",
                ])
            }
        case .finished(let s):
            bar?.finish()
            let c = s.counters
            logger.info("run finished", metadata: [
                "kind": "\(s.kind.rawValue)", "run_id": "\(s.runId.map(String.init) ?? "-")", "shard": "\(s.shard)",
                "clock": "\(s.clock.iso8601)", "dry_run": "\(s.dryRun)", "candidates": "\(c.candidates)",
                "filters_evaluated": "\(c.filtersEvaluated)", "filters_invalid": "\(c.filtersInvalid)",
                "filters_paid_ignored": "\(c.filtersPaidIgnored)",
                "matches_written": "\(s.dryRun ? 0 : c.matchesWritten)", "matches_found": "\(s.matchesFound)",
                "notifications_written": "\(c.notificationsWritten)",
                "profiles_quarantined": "\(c.profilesQuarantined)", "filters_quarantined": "\(c.filtersQuarantined)",
                "odd_values": "\(c.oddValues)",
                "read_s": "\(String(format: "%.3f", s.phaseSeconds[.read] ?? 0))",
                "evaluate_s": "\(String(format: "%.3f", s.phaseSeconds[.evaluate] ?? 0))",
                "write_s": "\(String(format: "%.3f", s.phaseSeconds[.write] ?? 0))",
                "total_s": "\(String(format: "%.3f", s.totalSeconds))",
            ])
        }
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0

    /// Adds one; returns the new value.
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}

final class ProgressThrottle: @unchecked Sendable {
    private let interval: Double
    private var last = Date.distantPast
    private let lock = NSLock()

    init(interval: Double) { self.interval = interval }

    func due() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let now = Date()
        guard now.timeIntervalSince(last) >= interval else { return false }
        last = now
        return true
    }
}

func printReport(_ report: Report, _ format: ReportFormat) {
    print(ReportRenderer.render(report, as: format))
}
