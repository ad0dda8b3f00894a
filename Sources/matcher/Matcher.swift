import ArgumentParser

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
        main(nil)
    }
}
