import Foundation

/// A value one thread writes and another reads (what a helper thread saw, a pipe's bytes so far).
public final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    public init(_ value: Value) { stored = value }

    public func update(_ body: (inout Value) -> Void) { lock.withLock { body(&stored) } }

    public var value: Value { lock.withLock { stored } }
}
