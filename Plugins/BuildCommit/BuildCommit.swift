import Foundation
import PackagePlugin

/// The git commit a build is made from, for `matcher --version` and `matcher_build_info`: writes
/// `BuildCommit.swift` (`let buildCommit = "…"`) into the target before it compiles. The commit is git's HEAD,
/// with "-dirty" when the sources or the manifest differ from it; `MATCHER_GIT_COMMIT` names it where there is
/// no `.git` (an image build); otherwise "unknown". It runs again when HEAD, the index, the manifest or any
/// target's source file changes, so a plain `swift build` never reports an earlier build's commit.
@main struct BuildCommit: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let root = context.package.directoryURL
        let output = context.pluginWorkDirectoryURL.appending(path: "BuildCommit.swift")
        let git = Self.gitDirectory(root)
        // A worktree keeps its HEAD, index and reflog in its own git directory, and the refs in the common one.
        let common = git.flatMap { dir in
            (try? String(contentsOf: dir.appending(path: "commondir"), encoding: .utf8)).map { text in
                let path = text.trimmingCharacters(in: .whitespacesAndNewlines)
                return path.hasPrefix("/") ? URL(filePath: path) : dir.appending(path: path)
            }
        }
        let gitState =
            (["HEAD", "index", "logs/HEAD", "packed-refs"].compactMap { git?.appending(path: $0) }
            + [common?.appending(path: "packed-refs")].compactMap { $0 })
            .filter { FileManager.default.fileExists(atPath: $0.path) }
        let sources = context.package.targets.compactMap(\.sourceModule).flatMap { $0.sourceFiles.map(\.url) }
        return [
            .buildCommand(
                displayName: "Stamping the git commit for \(target.name)",
                executable: URL(filePath: "/bin/sh"),
                arguments: ["-c", Self.script, "stamp", root.path, output.path],
                environment: ProcessInfo.processInfo.environment.filter { $0.key == "MATCHER_GIT_COMMIT" },
                inputFiles: gitState + [root.appending(path: "Package.swift")] + sources,
                outputFiles: [output])
        ]
    }

    /// The checkout's git directory: `.git`, or where a `.git` file points (`gitdir: …`, in a worktree or a
    /// submodule), so that a commit there reruns the stamp too.
    static func gitDirectory(_ root: URL) -> URL? {
        let dotGit = root.appending(path: ".git")
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dotGit.path, isDirectory: &isDirectory) else { return nil }
        if isDirectory.boolValue { return dotGit }
        guard let text = try? String(contentsOf: dotGit, encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("gitdir:") })
        else { return nil }
        let path = line.dropFirst("gitdir:".count).trimmingCharacters(in: .whitespaces)
        return path.hasPrefix("/") ? URL(filePath: path) : root.appending(path: path)
    }

    /// `$1` the package's root, `$2` the file to write (rewritten only when its text changes). A commit that is
    /// not a plain name (letters, digits, `.`, `_`, `-`) is "unknown": it becomes a Swift string literal.
    static let script = """
        c="${MATCHER_GIT_COMMIT:-}"
        if [ -z "$c" ] && command -v git >/dev/null 2>&1 && git -C "$1" rev-parse --git-dir >/dev/null 2>&1; then
          c="$(git -C "$1" rev-parse --short=12 HEAD 2>/dev/null || true)"
          if [ -n "$c" ] && ! git -C "$1" diff --quiet HEAD -- Sources Package.swift 2>/dev/null; then
            c="$c-dirty"
          fi
        fi
        case "$c" in ''|*[!A-Za-z0-9._-]*) c=unknown ;; esac
        text="let buildCommit = \\"$c\\""
        if [ ! -f "$2" ] || [ "$(cat "$2")" != "$text" ]; then printf '%s\\n' "$text" > "$2"; fi
        """
}
