import ArgumentParser
import Foundation

@main
struct Matcher: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "matcher",
        abstract: "Finds new matches for saved search filters and writes match and notification rows.",
        version: BuildInfo.versionLine,
        subcommands: [
            Migrate.self, Run.self, Backfill.self, Explain.self, Seed.self, Status.self, Notifications.self,
            Runs.self, Progress.self, Reindex.self,
        ],
        defaultSubcommand: nil
    )

    static func main() {
        MallocArenas.limitToCores()  // before any thread allocates
        let command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            // A usage error is one line, as every failure (cli.md); help and --version print as usual.
            let code = exitCode(for: error)
            guard code == .validationFailure else { exit(withError: error) }
            // Redacted: a connection string mistyped on the command line (unquoted, or without its flag) is quoted
            // back as unexpected arguments.
            let message = redactingSecrets(
                withoutPossibleConnectionStrings(
                    message(for: error).split(separator: "\n").first.map(String.init) ?? "usage error"))
            FileHandle.standardError.write(
                Data(
                    (Log.errorPriority
                        + "matcher: \(message) — see `matcher help` or `matcher <command> --help` (exit 64)\n").utf8))
            exit(withError: ExitCode.validationFailure)
        }
        do {
            var command = command
            try command.run()
        } catch {
            exit(withError: error)
        }
    }
}
