import CBuildInfo

/// What `matcher --version` prints and `matcher_build_info` exports.
enum BuildInfo {
    static let version = "0.1.0"
    /// The git commit stamped by scripts/stamp-build (with "-dirty" for uncommitted changes), or "unknown".
    static let commit = String(cString: matcher_build_commit())
    static var versionLine: String { "\(version) (commit \(commit))" }
}
