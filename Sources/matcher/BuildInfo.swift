/// What `matcher --version` prints and `matcher_build_info` exports.
enum BuildInfo {
    static let version = "0.1.0"
    /// The git commit this binary was built from, with "-dirty" for uncommitted changes, or "unknown" (no git,
    /// no `MATCHER_GIT_COMMIT`): `buildCommit`, written by the BuildCommit plugin before each build.
    static let commit = buildCommit
    static var versionLine: String { "\(version) (commit \(commit))" }
}
