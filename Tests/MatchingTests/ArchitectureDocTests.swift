import Foundation
import Testing

/// ARCHITECTURE.md names files and folders as the places where things live: each must exist, so the page
/// cannot drift from the code unnoticed.
@Suite struct ArchitectureDocTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func everyPathTheArchitecturePageNamesExists() throws {
        let page = try String(contentsOf: Self.root.appendingPathComponent("ARCHITECTURE.md"), encoding: .utf8)
        let paths = page.matches(of: #/`((?:Sources|Tests|sql|scripts|deploy|docs)/[^`\s]*)`/#).map {
            String($0.output.1)
        }
        #expect(paths.count >= 20)
        let missing = paths.filter {
            !FileManager.default.fileExists(atPath: Self.root.appendingPathComponent($0).path)
        }
        #expect(missing.isEmpty, "named in ARCHITECTURE.md but missing: \(missing)")
    }
}
