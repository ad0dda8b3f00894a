import Foundation

/// Runs `body(slot)` for every slot in `0..<count`, each on a thread of its own rather than Dispatch's pool
/// (whose threads are one a core: a slot blocks on its database connection while the others work), and
/// returns when all have. Throws the error of the lowest slot that threw; the other slots run to their end.
package enum SlotThreads {
    package static func run(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
        guard count > 1 else {
            if count == 1 { try body(0) }
            return
        }
        let errors = ResultSlots<(any Error)?>(count: count)
        let done = DispatchGroup()
        for slot in 0..<count {
            done.enter()
            let thread = Thread {
                defer { done.leave() }
                do {
                    try body(slot)
                    errors.set(slot, nil)
                } catch {
                    errors.set(slot, error)
                }
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
        done.wait()
        if let error = errors.values().lazy.compactMap({ $0 }).first { throw error }
    }
}
