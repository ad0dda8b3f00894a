import CLibPQ
import Foundation

/// A client-side deadline for every blocking libpq call of one connection.
///
/// Keepalives and `tcp_user_timeout` do not fire when the network path stays up but nothing answers
/// (a frozen proxy acknowledges every packet), and `statement_timeout` cannot reach a client the
/// server's error never arrives at. So while a call is under way, a timer checks once a second
/// how long it has waited without progress (a COPY chunk counts); past `timeout` it shuts the socket
/// down (never closes it, so the descriptor cannot be reused under libpq), the blocked call returns
/// with a connection error, and the caller learns why.
final class CallDeadline: @unchecked Sendable {
    private let lock = NSLock()
    private var timeout: Duration?
    private var socket: Int32 = -1
    private var depth = 0
    private var lastProgress = ContinuousClock.now
    private var tripped = false
    private var timer: DispatchSourceTimer?

    /// The connection's socket; -1 once it is closed.
    func attach(socket: Int32) {
        lock.lock()
        self.socket = socket
        lock.unlock()
    }

    func detach() {
        lock.lock()
        socket = -1
        timer?.cancel()
        timer = nil
        lock.unlock()
    }

    func setTimeout(_ value: Duration?) {
        lock.lock()
        defer { lock.unlock() }
        timeout = value
        if value != nil && timer == nil {
            let source = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
            source.schedule(deadline: .now() + 1, repeating: 1)
            source.setEventHandler { [weak self] in self?.check() }
            source.resume()
            timer = source
        } else if value == nil {
            timer?.cancel()
            timer = nil
        }
    }

    var currentTimeout: Duration? {
        lock.lock()
        defer { lock.unlock() }
        return timeout
    }

    /// A call begins (calls nest inside a transaction).
    func enter() {
        lock.lock()
        depth += 1
        lastProgress = .now
        lock.unlock()
    }

    func leave() {
        lock.lock()
        depth -= 1
        lastProgress = .now
        lock.unlock()
    }

    /// Data moved: the wait starts over.
    func progress() {
        lock.lock()
        lastProgress = .now
        lock.unlock()
    }

    /// Whether the deadline shut the socket down (the connection is then broken for good).
    var hasTripped: Bool {
        lock.lock()
        defer { lock.unlock() }
        return tripped
    }

    private func check() {
        lock.lock()
        defer { lock.unlock() }
        guard let timeout, depth > 0, socket >= 0, !tripped, ContinuousClock.now - lastProgress > timeout else {
            return
        }
        tripped = true
        shutdown(socket, Int32(SHUT_RDWR))
    }
}
