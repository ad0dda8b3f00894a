import Foundation
import PostgresClient

/// CPU time the PostgreSQL server has used, read from `/proc` on this machine: the postmaster's own and its
/// reaped children's (a backend that exits is added to its parent's `cutime`/`cstime` when the postmaster waits
/// for it), plus every live child's. A difference of two readings is the server's CPU between them, whatever
/// the wall clock did: on a shared VM whose speed varies by a quarter, a steadier measure of a day's work.
/// Nil when the server is not a process on this machine (a remote URL) or `/proc` cannot be read.
struct ServerCPU {
    let postmaster: Int32

    /// The server `db` is connected to, if it runs here: its backend's parent is the postmaster.
    init?(_ db: PostgresConnection) {
        guard let backend = try? db.query("SELECT pg_backend_pid()").rows[0].int32(0),
            let fields = Self.statFields(backend), fields.count > 1, let parent = Int32(fields[1])
        else { return nil }
        postmaster = parent
    }

    /// Seconds of CPU, user and system, the server has used so far. A child reaped while the live children
    /// are listed would be counted in neither (its time moves to the postmaster's `cutime` after that was
    /// read), and a client's exit makes its backends exit just then: the first run's readings lost the write
    /// connections' backends (server 2.0 s against 3.7-4.2 s). So the reading is taken again until the
    /// postmaster's own times are the same before and after the listing.
    func seconds() -> Double? {
        for _ in 0..<100 {
            guard let before = ownTicks() else { return nil }
            var ticks = before
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            for entry in entries {
                guard let pid = Int32(entry), pid != postmaster, let fields = Self.statFields(pid), fields.count > 12,
                    Int32(fields[1]) == postmaster
                else { continue }
                ticks += Self.ticks(fields, 11...12)
            }
            if ownTicks() == before { return Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK))) }
        }
        return nil
    }

    /// The postmaster's own and its reaped children's ticks.
    private func ownTicks() -> Int? {
        guard let own = Self.statFields(postmaster), own.count > 14 else { return nil }
        return Self.ticks(own, 11...14)
    }

    /// `/proc/<pid>/stat` after the command name, split on spaces: index 0 is field 3 (state), so field n of
    /// proc(5) is at n - 3 (ppid 1, utime 11, stime 12, cutime 13, cstime 14).
    private static func statFields(_ pid: Int32) -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    private static func ticks(_ fields: [Substring], _ range: ClosedRange<Int>) -> Int {
        range.reduce(0) { $0 + (Int(fields[$1]) ?? 0) }
    }
}
