import ArgumentParser
import Foundation
import Logging
import Matching
import MatchingPostgres
import PostgresClient

/// Exit statuses (cli.md): 0 success; 64 usage; 69 the database cannot be reached; 75 another run of the
/// shard holds the lock; 78 configuration (retrying will not help); 1 any other failure; 130/143 when
/// stopped by SIGINT/SIGTERM at a unit-of-work boundary. Errors say which by `ClassifiedError`.
enum ExitStatus {
    static let usage: Int32 = 64
    static let unavailable: Int32 = 69
    static let locked: Int32 = 75
    static let configuration: Int32 = 78
    static let failure: Int32 = 1

    static func code(for kind: FailureKind) -> Int32 {
        switch kind {
        case .usage: return usage
        case .configuration: return configuration
        case .unavailable: return unavailable
        case .locked: return locked
        case .other: return failure
        }
    }
}

/// The kind of any error a command may end with: `ClassifiedError`s say theirs; an argument
/// validation error is a usage error; anything else is `.other`.
func failureKind(of error: any Error) -> FailureKind {
    if error is RunLocked { return .locked }
    if let classified = error as? any ClassifiedError { return classified.failureKind }
    if error is ValidationError { return .usage }
    return .other
}

/// A usage error's text with none of the arguments quoted when one of them may be a connection string: one typed
/// without its flag, or a value left unquoted, is quoted back as an unexpected argument, and its password may be
/// written in ways no mask finds (`user:pa/ss@host` with no scheme) or split by the shell into words no rule can
/// tell from others (`password=correct horse staple` unquoted). Found by review in session 32. When an argument
/// that is no option holds `@`, `=`, `://` or the word password, every argument that is no option is named by
/// its position wherever the message quotes it ('…'), the words of the message itself untouched.
func withoutPossibleConnectionStrings(_ text: String, arguments: [String] = CommandLine.arguments) -> String {
    let values = arguments.enumerated().dropFirst().filter { !$0.element.hasPrefix("-") }
    let suspect = values.contains { _, argument in
        ["@", "=", "://"].contains(where: argument.contains) || argument.lowercased().contains("password")
    }
    guard suspect else { return text }
    var text = text
    for (position, argument) in values where !argument.isEmpty {
        text = text.replacingOccurrences(
            of: "'\(argument)'", with: "'(argument \(position), not shown: it may hold a password)'")
    }
    return text
}

/// `text` without any password this process was given: in `--database-url`, `DATABASE_URL`,
/// `PGPASSWORD`, or the password file.
func redactingSecrets(_ text: String) -> String {
    let env = ProcessInfo.processInfo.environment
    var conninfos = [env["DATABASE_URL"]].compactMap { $0 }
    let arguments = CommandLine.arguments
    for (index, argument) in arguments.enumerated() {
        if argument == "--database-url", index + 1 < arguments.count { conninfos.append(arguments[index + 1]) }
        if argument.hasPrefix("--database-url=") {
            conninfos.append(String(argument.dropFirst("--database-url=".count)))
        }
    }
    let passwords = [env["PGPASSWORD"], (try? Database.workerPassword())?.value].compactMap { $0 }
    var text = text
    for conninfo in conninfos {
        text = PostgresConnection.redactingSecrets(text, conninfo: conninfo, passwords: passwords)
    }
    return PostgresConnection.redactingSecrets(text, conninfo: nil, passwords: passwords)
}

/// Runs a command body, turning failures into one clear line on standard error and an exit status, and
/// records the outcome in the metrics file when one is configured.
func runReportingFailures(
    _ logger: Logger, _ what: String, metrics: MetricsFile? = nil,
    gauges: @escaping () -> MetricsFile.Gauges = { .init() },
    _ body: () throws -> RunSummary?
) throws {
    func record(_ result: MetricsFile.Result, _ summary: RunSummary?, _ status: Int32) {
        guard let metrics else { return }
        do {
            try metrics.write(result, summary: summary, gauges: gauges(), exitStatus: status)
        } catch {
            logger.warning("metrics file not written", metadata: ["path": "\(metrics.path)", "error": "\(error)"])
        }
    }
    do {
        let summary = try body()
        record(.success, summary, 0)
    } catch let error as RunLocked {
        record(.locked, nil, ExitStatus.locked)
        // cli.md: every failure prints one line on standard error. The structured events of these outcomes are
        // for `--log-level debug`; the line below is what an operator (and the journal, at its priority) reads.
        logger.debug(
            "run lock held elsewhere", metadata: ["shard": "\(error.shard)", "kind": "\(error.kind.rawValue)"])
        // What to do: nothing, usually (the timer's next run), or the same command once the other is done.
        let next =
            switch what {
            case "run": "the next run goes on from where that one stops; `matcher status` shows it"
            case "backfill": "run the same backfill again once the other has finished"
            default: "run `matcher \(what)` again once that \(error.kind.rawValue) has finished or stopped"
            }
        FileHandle.standardError.write(
            Data("matcher: \(error.description) — \(next) (exit 75)\n".utf8))
        throw ExitCode(ExitStatus.locked)
    } catch let error as RunStopped {
        record(.stopped, nil, error.reason == "SIGINT" ? 130 : 143)
        logger.debug("stopped", metadata: ["reason": "\(error.reason)"])
        FileHandle.standardError.write(Data("matcher: \(what) \(error.description)\n".utf8))
        throw ExitCode(error.reason == "SIGINT" ? 130 : 143)
    } catch let error as ExitCode {
        throw error
    } catch {
        let kind = failureKind(of: error)
        let status = ExitStatus.code(for: kind)
        record(kind == .locked ? .locked : .failure, nil, status)
        let message = redactingSecrets("\(error)")
        logger.debug(
            "failed",
            metadata: [
                "error": "\(message)", "failure": "\(kind.rawValue)",
                "exit": .stringConvertible(Int(status)),
            ])
        FileHandle.standardError.write(
            Data(failureLine(what, message, advice(for: error, kind: kind, command: what), status).utf8))
        throw ExitCode(status)
    }
}

/// The one line on standard error: what failed, why, what to do, and the exit status. The message's control
/// characters are written visibly (a server's or a trigger's words may carry an escape sequence or a line break:
/// review of session 32), as `matcher status` shows the same error.
func failureLine(_ what: String, _ message: String, _ advice: String, _ status: Int32) -> String {
    Log.errorPriority + "matcher: \(what) failed: \(ReportRenderer.printable(message)) — \(advice) (exit \(status))\n"
}

/// What to do after a failure of `command` ("run", "backfill", "explain", …): which command picks up the work. The
/// connection string and the operator's server settings (for what a lost login or a timeout says) are the
/// process's: `--database-url` or `DATABASE_URL`, and `options=` in it or `PGOPTIONS`.
func advice(
    for error: any Error, kind: FailureKind, command: String = "run",
    arguments: [String] = CommandLine.arguments,
    environment: [String: String] = ProcessInfo.processInfo.environment
) -> String {
    let resumes =
        switch command {
        case "run": "the next run resumes the work"
        case "backfill": "the same backfill command resumes the work"
        // Review against a real server: explain said "check the filter and profile ids" after a lock or statement
        // timeout and a lost connection too. The ids are advised only where they are the cause (below).
        case "explain": "explain writes nothing; retrying is safe"
        default: "retry the command once the cause is fixed"
        }
    // What retries after the database could not be reached: the timer's next run, or the operator; nothing retries
    // an explain or any other command run by hand (review of the explain output: it said "the next run retries").
    let retries =
        switch command {
        case "run": "the next run retries"
        case "backfill": "then run the same backfill again (it resumes the work)"
        default: "then run `matcher \(command)` again"
        }
    // What a failure after the command reached the database leaves, and what to run: a run's or backfill's
    // committed units are kept and the work resumes; the other commands have no units and no run (review against a
    // real server: a lost connection told `matcher status` its "committed units are kept").
    let kept =
        switch command {
        case "run", "backfill": "committed units are kept"
        case "explain", "status", "notifications show": "\(command) writes nothing"
        case "migrate": "each migration commits whole or not at all"
        case "reindex": "the next reindex first drops what an interrupted rebuild left"
        default: "each change it makes commits whole or not at all"
        }
    let again = command == "run" || command == "backfill" ? resumes : "run `matcher \(command)` again"
    let afterward = command == "run" || command == "backfill" ? "\(kept) and \(again)" : "\(kept): \(again)"
    let conninfo = configuredConninfo(arguments: arguments, environment: environment)
    // The server settings the operator adds after the worker's (`Database.sessionOptions`), which win.
    let operatorsOptions =
        conninfo.flatMap { PostgresConnection.setting("options", in: $0) } ?? environment["PGOPTIONS"]
    let operatorsSource =
        conninfo.flatMap { PostgresConnection.setting("options", in: $0) } != nil
        ? "options= in the connection string" : "PGOPTIONS"
    func operatorSets(_ setting: String) -> Bool { operatorsOptions?.contains(setting) ?? false }
    if let pg = error as? PostgresError {
        switch (pg.kind, kind) {
        case (.connection, .configuration) where pg.message.hasPrefix("invalid connection string"),
            (.usage, .configuration):
            return
                "fix --database-url / DATABASE_URL (a libpq keyword string or postgresql:// URI); retrying will not help"
        case (.connection, .configuration) where pg.message.contains("unsupported startup parameter"):
            return
                "a connection pooler refused the worker's session settings (libpq's options): connect the worker to PostgreSQL directly (README, \"Connection poolers\"); retrying will not help"
        // Refused for want of a password, or a password refused (in English or, by libpq's word, in any language):
        // which password file libpq would have read and why it gave none, or where the refused password came from.
        case (.connection, .configuration)
        where pg.password == .missing || pg.message.contains("no password supplied")
            || pg.message.contains("password authentication failed")
            || (pg.password == .sent && pg.reasonIsLocalized):
            let sent = pg.password == .sent || pg.message.contains("password authentication failed")
            let note = PasswordSource.note(sent: sent, conninfo: conninfo, environment: environment)
            return "the server refused the login: \(note); retrying will not help"
        case (.connection, .configuration)
        where ["authentication", "password", "pg_hba", "does not exist", "not permitted", "permission denied"]
            .contains(where: pg.message.contains):
            return
                "the server refused the login: check the user, database and password (password file, PGPASSFILE); retrying will not help"
        case (.connection, .configuration):
            return
                "fix --database-url / DATABASE_URL (a setting libpq cannot use: sslmode, port, certificates); retrying will not help"
        // Reached, but out of connection slots (53300, which a refused connect gives in words only): no network to
        // check (review against a real server).
        case (.connection, _)
        where pg.message.hasPrefix("could not connect")
            && [
                "too many clients already", "too many connections for role", "too many connections for database",
                "remaining connection slots are reserved",
            ].contains(where: pg.message.contains),
            (.server, _) where pg.sqlState == "53300":
            return
                "the server was reached but its connection slots are full (max_connections, or the role's or database's CONNECTION LIMIT; a run needs two of them and uses up to --write-connections + 2: README): free some or raise the limit; \(retries)"
        // target_session_attrs=read-write (or primary) refused every host it reached: libpq 14+'s words, then 13's.
        case (.connection, _)
        where pg.message.hasPrefix("could not connect")
            && ["session is read-only", "server is in hot standby mode", "could not make a writable connection"]
                .contains(where: pg.message.contains):
            return
                "the server is read-only (a standby, or default_transaction_read_only on?) and target_session_attrs refused it: point DATABASE_URL at the primary (or list every host, host=a,b, for libpq to find it); \(retries)"
        case (.connection, _) where pg.message.hasPrefix("could not connect"):
            return
                "check that the server is up and reachable (host, port, firewall, --connect-timeout) and DATABASE_URL; \(retries)"
        case (.connection, _):
            switch command {
            case "run", "backfill": return "the connection was lost mid-\(command); \(afterward)"
            default: return "the connection was lost; \(afterward)"
            }
        case (.server, _) where pg.identityBehind != nil:
            let table = pg.identityBehind ?? ""
            return
                "the id sequence of \(table) is behind its rows (a database moved by logical replication, which copies no sequences, or rows written with ids by hand): as the owner, SELECT setval(pg_get_serial_sequence('\(table)', 'id'), (SELECT max(id) FROM \(table))); and the same for the other of matcher_runs and notifications (docs/runbook.md, \"A database moved by logical replication\"); retrying will not help"
        case (.server, _) where pg.sqlState == "42501" && pg.message.contains("row-level security"):
            return
                "row-level security applies to the worker's role on a table it must read whole: let the role bypass it (ALTER ROLE ... BYPASSRLS, deploy/README.md \"The worker role\")"
        case (.server, _) where pg.sqlState == "42501":
            return "the role lacks a privilege: run `matcher migrate` as the owner, then sql/roles/worker_role.sql"
        case (.server, .configuration):
            return "the schema is missing or old: run `matcher migrate` (as the owner), then sql/roles/worker_role.sql"
        // A statement timeout: the worker's (--statement-timeout) unless the operator's settings give one, which win
        // (README, the database row); then the next run fails the same way until that one is changed.
        case (.server, _) where pg.sqlState == "57014" && pg.message.contains("statement timeout"):
            if operatorSets("statement_timeout") {
                return
                    "a statement ran past the statement_timeout that \(operatorsSource) sets (it overrides --statement-timeout: README, the database row): raise it there or leave it out, else every attempt fails the same way; \(kept)"
            }
            return
                "a statement ran past --statement-timeout (default 300 s; a statement_timeout in options= or PGOPTIONS would override it: README, the database row): \(kept); if it waited for a lock held elsewhere, \(again); if it is that slow, raise --statement-timeout, or the next attempt fails the same way"
        case (.server, _) where pg.sqlState == "57014":
            return "a statement was cancelled (pg_cancel_backend?); \(afterward)"
        // A lock wait given up (lock_timeout): a run's units wait at most about 60 s (jittered, no flag) for rows
        // another writer holds and are written three times before the run fails; migrate has --lock-timeout for its
        // own; anything else is a lock_timeout from the operator's settings or the role's or database's.
        case (.server, _) where pg.sqlState == "55P03":
            let others =
                operatorSets("lock_timeout")
                ? "the lock_timeout that \(operatorsSource) sets" : "a lock_timeout the role or database sets"
            switch command {
            case "run", "backfill":
                return
                    "a lock wait ran out: a unit's wait for rows another writer holds (about 60 s, three tries; a backfill --notify or a long transaction of the app beside it?), or \(others); \(afterward)"
            case "migrate":
                return
                    "a lock wait ran out (--lock-timeout sets the migrations' own; outside them \(others)): another session held the lock; \(afterward), when the database is quieter"
            default:
                return "a lock wait ran out (\(others)): another session held the lock; \(afterward)"
            }
        // Writing to a read-only server: a standby, or a read-only endpoint after a failover. Still exit 1.
        case (.server, _) where pg.sqlState == "25006":
            return
                "the database is read-only (a hot standby, or a read-only endpoint after a failover?): point DATABASE_URL at the primary (e.g. with target_session_attrs=read-write); \(afterward)"
        // A row of the filter or profile explain reads that cannot be read: the ids are the cause.
        case (.decoding, _) where command == "explain",
            (.server, _) where command == "explain" && pg.sqlState?.hasPrefix("22") == true:
            return "explain writes nothing; check the filter and profile ids (a row of theirs could not be read)"
        default:
            break
        }
    }
    switch kind {
    case .usage:
        return error is ExplainMatch.FilterNotFound
            ? "check the --filter id (saved_filters.id)" : "see `matcher help` for the command's flags"
    case .configuration: return "fix the configuration; retrying will not help"
    case .unavailable: return "check that the database is up and reachable; \(retries)"
    case .locked where error is MigrationError && command != "migrate":
        // A run lock taken while a `matcher migrate` held the migrators' lock past the wait. The timer runs `run`
        // only: a backfill is the operator's to start again.
        return command == "run"
            ? "run it again once that migrate has finished (the timer's next run does)"
            : "run the same \(command) again once that migrate has finished (no timer runs it)"
    case .locked:
        return command == "migrate"
            ? "nothing of the migration was applied; run `matcher migrate` again"
            : "another run holds the lock; nothing was written"
    case .other:
        return command == "run" || command == "backfill" ? "committed units are kept; \(resumes)" : resumes
    }
}

/// The connection string the command connects with: the last `--database-url`, else `DATABASE_URL` (`Database`).
func configuredConninfo(arguments: [String], environment: [String: String]) -> String? {
    var given: String?
    for (index, argument) in arguments.enumerated() {
        if argument == "--database-url", index + 1 < arguments.count { given = arguments[index + 1] }
        if argument.hasPrefix("--database-url=") { given = String(argument.dropFirst("--database-url=".count)) }
    }
    if let given { return given }
    return environment["DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
}

/// SIGTERM and SIGINT ask the run to stop at the next unit-of-work boundary; a second signal cancels the
/// statement in progress and exits at once (still nothing half-written: the open transaction rolls back).
final class SignalTrap: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    let stop = StopRequest()

    init(onSecond: @escaping @Sendable (String) -> Void) {
        // One serial queue for both signals: on the concurrent global queue a SIGTERM and a SIGINT arriving together
        // each found no stop requested and each asked for one (review of session 33).
        let queue = DispatchQueue(label: "matcher.signals")
        for (signo, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            // Signals merged into one event (two arriving before the handler runs) count as one: GNU `timeout`
            // sends its SIGTERM to the process and again to its group, microseconds apart, and means one stop.
            source.setEventHandler { [stop] in
                if stop.requestedReason != nil {
                    onSecond(name)
                } else {
                    stop.request(name)
                    FileHandle.standardError.write(
                        Data(
                            "matcher: \(name) received: stopping at the next unit-of-work boundary (send again to abort now)\n"
                                .utf8))
                }
            }
            source.resume()
            sources.append(source)
        }
    }
}

extension SignalTrap {
    /// How long a second signal waits for the cancel of the statement in progress before it exits anyway.
    static let cancelWaitSeconds = 2.0

    /// Runs `body` on a thread of its own and waits for it at most `seconds`; whether it returned in time.
    static func within(_ seconds: Double, _ body: @escaping @Sendable () -> Void) -> Bool {
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            body()
            done.signal()
        }
        return done.wait(timeout: .now() + seconds) == .success
    }

    /// The trap for a run or backfill on `store`: a second signal cancels the statement in progress and exits.
    static func stoppingAtUnitBoundaries(of store: PostgresMatchingStore) -> SignalTrap {
        SignalTrap { name in
            // The cancel opens a connection of its own and waits for the server, with no timeout of its own:
            // behind a frozen network it would never return, and the process would not exit. Sent from another
            // thread, waited for at most a moment; the open transaction rolls back either way when the
            // connection goes with the process.
            _ = SignalTrap.within(SignalTrap.cancelWaitSeconds) { store.connection.cancelCurrentStatement() }
            FileHandle.standardError.write(
                Data("matcher: second \(name): aborting now; the open unit rolls back\n".utf8))
            Foundation.exit(name == "SIGINT" ? 130 : 143)
        }
    }
}

/// Logs a run's events: phases, progress at most every few seconds, and the one summary line.
struct LoggingRunOutput: RunOutputHandler {
    let logger: Logger
    let progress = ProgressThrottle(interval: 5)
    /// Invalid filters, and quarantined rows, logged one by one per pass; the rest are counted (all are in
    /// matcher_invalid_filters and matcher_quarantine). A run that completes an interrupted one makes two passes.
    static let invalidFiltersLogged = 20
    let invalidSeen = Counter()
    let quarantinedSeen = Counter()
    /// The run the events are about (kind, shard, run id), set when it starts: every event carries it, so that
    /// the lines of shards writing to one place can be told apart (review of session 32).
    let current = RunContext()

    /// The logger with the current run's fields.
    private var log: Logger {
        var logger = self.logger
        for (key, value) in current.metadata { logger[metadataKey: key] = value }
        return logger
    }

    /// Seconds to the millisecond, logged as a number.
    static func rounded(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }
    /// Drawn on a terminal instead of the periodic progress lines.
    let bar: ProgressBar? = ProgressBar.isTerminal ? ProgressBar() : nil

    func handle(_ event: RunEvent) {
        switch event {
        case .started(let kind, let shard, let clock, let runId, let resumed, let dryRun):
            invalidSeen.reset()
            quarantinedSeen.reset()
            var context: Logger.Metadata = ["kind": "\(kind.rawValue)", "shard": "\(shard)"]
            if let runId { context["run_id"] = .stringConvertible(runId) }
            current.metadata = context
            log.info(
                resumed ? "resuming interrupted run" : "run started",
                metadata: ["clock": "\(clock.iso8601)", "dry_run": .stringConvertible(dryRun)])
        case .phaseStarted:
            break
        case .phaseFinished(let phase, let seconds):
            log.info(
                "phase finished",
                metadata: ["phase": "\(phase.rawValue)", "seconds": .stringConvertible(Self.rounded(seconds))])
        case .candidatesLoaded(let count):
            log.info("candidates loaded", metadata: ["candidates": .stringConvertible(count)])
        case .filtersLoaded(let total, let invalid, let paid, let inactive):
            log.info(
                "filters loaded",
                metadata: [
                    "filters": .stringConvertible(total), "invalid": .stringConvertible(invalid),
                    "paid_ignored": .stringConvertible(paid),
                    "owner_inactive": .stringConvertible(inactive),
                ])
        case .invalidFilter(let record):
            // A run reports the filters it newly found invalid; the others are in the summary's count.
            let seen = invalidSeen.increment()
            if seen <= Self.invalidFiltersLogged {
                log.warning(
                    "invalid filter skipped",
                    metadata: [
                        "filter_id": .stringConvertible(record.filterId),
                        "owner_id": .stringConvertible(record.ownerId), "reason": "\(record.error.description)",
                    ])
            } else if seen == Self.invalidFiltersLogged + 1 {
                log.warning(
                    "more invalid filters skipped, not logged one by one",
                    metadata: ["see": "matcher_invalid_filters; the run's summary counts them"])
            }
        case .quarantined(let row):
            let seen = quarantinedSeen.increment()
            if seen <= Self.invalidFiltersLogged {
                // No row_id when the row's id itself could not be read: one type for the field, a number.
                var fields: Logger.Metadata = [
                    "row_kind": "\(row.kind.rawValue)", "reason": "\(row.reason)", "see": "matcher_quarantine",
                ]
                if let id = row.rowId { fields["row_id"] = .stringConvertible(id) }
                log.warning("unreadable row quarantined", metadata: fields)
            } else if seen == Self.invalidFiltersLogged + 1 {
                log.warning(
                    "more unreadable rows quarantined, not logged one by one",
                    metadata: ["see": "matcher_quarantine; the run's summary counts them"])
            }
        case .unitCommitted(let done, let total, let matches, let notifications):
            if let bar {
                bar.update(done: done, total: total, matches: matches)
                if done == total { bar.finish() }
            } else if progress.due() || done == total {
                log.info(
                    "progress",
                    metadata: [
                        "filters_done": .stringConvertible(done), "filters_total": .stringConvertible(total),
                        "matches_written": .stringConvertible(matches),
                        "notifications_written": .stringConvertible(notifications),
                    ])
            }
        case .unitRetried(let lastFilterId, let attempt, let attempts, let reason):
            log.warning(
                "unit rolled back by a conflict with another writer; writing it again",
                metadata: [
                    "last_filter_id": .stringConvertible(lastFilterId), "attempt": .stringConvertible(attempt),
                    "attempts": .stringConvertible(attempts),
                    "reason": "\(reason)",
                ])
        case .writersUnavailable(let shortfall):
            log.warning(
                "fewer write connections than configured",
                metadata: [
                    "opened": .stringConvertible(shortfall.opened),
                    "configured": .stringConvertible(shortfall.configured), "reason": "\(shortfall.reason)",
                ])
        case .forgotten(let outcome):
            log.info(
                "retention sweep",
                metadata: [
                    "matches_forgotten": .stringConvertible(outcome.forgotten),
                    "backlog": .stringConvertible(outcome.backlog),
                    "notifications_forgotten": .stringConvertible(outcome.notificationsForgotten),
                    "bookkeeping_forgotten": .stringConvertible(outcome.bookkeepingForgotten),
                    "conflicts_rolled_back": .stringConvertible(outcome.conflictsRolledBack),
                ])
            if let reason = outcome.stoppedByRequest {
                log.notice(
                    "retention sweep ended early on request; the next run forgets the rest",
                    metadata: ["reason": "\(reason)"])
            }
            if let reason = outcome.notStartedBecause {
                log.warning(
                    "retention sweep not started; the next run forgets what expired (a run needs two connections and uses up to --write-connections + 2: README)",
                    metadata: ["reason": "\(redactingSecrets(reason))"])
            }
            if let reason = outcome.stoppedByConflict {
                log.warning(
                    "retention sweep stopped early: a batch kept conflicting with another writer; the next run forgets the rest",
                    metadata: ["reason": "\(reason)"])
            }
        case .superseded(let runId, let shard):
            log.notice(
                "interrupted run of another shard layout superseded",
                metadata: ["superseded_run_id": .stringConvertible(runId), "superseded_shard": "\(shard)"])
        case .selectionSkipped(let skipped):
            log.notice(
                "backfill skips listed filters or owners it has nothing to do for",
                metadata: ["skipped": "\(skipped.joined(separator: "; "))"])
        case .unlistedMatchesListed(let filters, let matches):
            log.info(
                "matches recorded while notify was off now wait for their filters' digests (notify turned on)",
                metadata: ["filters": .stringConvertible(filters), "matches": .stringConvertible(matches)])
        case .retentionChanged(let from, let to):
            log.warning(
                "--retention-days differs from the service's latest run or backfill: give every run and backfill the same value (each sweep forgets every filter's pairs at its own)",
                metadata: ["retention_days": .stringConvertible(to), "latest_retention_days": .stringConvertible(from)])
        case .filtersCreatedSinceLeftOut(let runId, let count):
            log.notice(
                "filters created after the interrupted run started are left to the new run",
                metadata: ["run_id": .stringConvertible(runId), "filters": .stringConvertible(count)])
        case .resumedWithItsOwnSettings(let runId, let notUsed):
            log.warning(
                "the interrupted backfill of this selection is resumed with its own settings, which differ from this backfill's (given or by default); to use this backfill's instead: matcher runs abandon --run ID, then the backfill again",
                metadata: ["run_id": .stringConvertible(runId), "not_used": "\(notUsed.joined(separator: "; "))"])
        case .interruptedBackfillAbandoned(let runId):
            log.notice(
                "interrupted backfill of another selection abandoned (a backfill resumes only the shard's latest)",
                metadata: ["abandoned_run_id": .stringConvertible(runId)])
        case .finished(let s):
            defer {
                // What comes next (the read of the run after a completed one) is not this run's.
                current.metadata["run_id"] = nil
            }
            bar?.finish()
            let c = s.counters
            log.info(
                "run finished",
                metadata: [
                    "clock": "\(s.clock.iso8601)", "dry_run": .stringConvertible(s.dryRun),
                    "candidates": .stringConvertible(c.candidates),
                    "filters_evaluated": .stringConvertible(c.filtersEvaluated),
                    "filters_invalid": .stringConvertible(c.filtersInvalid),
                    "filters_paid_ignored": .stringConvertible(c.filtersPaidIgnored),
                    "matches_written": .stringConvertible(s.dryRun ? 0 : c.matchesWritten),
                    "matches_found": .stringConvertible(s.matchesFound),
                    "notifications_written": .stringConvertible(c.notificationsWritten),
                    "matches_forgotten": .stringConvertible(c.matchesForgotten),
                    "profiles_quarantined": .stringConvertible(c.profilesQuarantined),
                    "filters_quarantined": .stringConvertible(c.filtersQuarantined),
                    "odd_values": .stringConvertible(c.oddValues),
                    "filters_suspended": .stringConvertible(c.filtersSuspended),
                    "digests_held_back": .stringConvertible(c.digestsHeldBack),
                    "matches_mutual": .stringConvertible(c.matchesMutual),
                    "read_s": .stringConvertible(Self.rounded(s.phaseSeconds[.read] ?? 0)),
                    "evaluate_s": .stringConvertible(Self.rounded(s.phaseSeconds[.evaluate] ?? 0)),
                    "write_s": .stringConvertible(Self.rounded(s.phaseSeconds[.write] ?? 0)),
                    "total_s": .stringConvertible(Self.rounded(s.totalSeconds)),
                ])
        }
    }
}

/// The fields of the run a `LoggingRunOutput` reports on.
final class RunContext: @unchecked Sendable {
    private let lock = NSLock()
    private var fields: Logger.Metadata = [:]
    var metadata: Logger.Metadata {
        get { lock.lock(); defer { lock.unlock() }; return fields }
        set { lock.lock(); fields = newValue; lock.unlock() }
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

    /// Back to zero (a new pass of the same process).
    func reset() {
        lock.lock()
        defer { lock.unlock() }
        value = 0
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

/// The frame of a command that needs one connection: logs, one clear failure line and its exit status, and a
/// connection named `matcher <what>` in `pg_stat_activity`, closed at the end.
func withConnection(
    _ database: DatabaseOptions, _ what: String,
    _ body: (PostgresConnection, Logger) throws -> Void
) throws {
    Log.bootstrap(.logfmt)
    let logger = Logger(label: "matcher." + (what.split(separator: " ").first.map(String.init) ?? what))
    try runReportingFailures(logger, what) {
        let connection = try Database(database, applicationName: "matcher \(what)").connect()
        defer { connection.close() }
        try body(connection, logger)
        return nil
    }
}
