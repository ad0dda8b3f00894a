import Foundation
import PostgresClient
import PostgresTestSupport
import Testing

/// A silent network partition: the connection goes through a TCP proxy that is then frozen (it keeps
/// the connection open and acknowledges nothing onwards). Keepalives cannot see that; the client's
/// call deadline must fail the call instead of hanging.
@Suite struct CallDeadlineTests {
    @Test func aFrozenProxyFailsTheCallWithinItsDeadline() throws {
        let database = try TestDatabase.create()
        let (proxy, connection) = try Self.throughProxy(database)
        let before = try connection.query("SELECT 41 + 1").rows[0].int32(0)
        #expect(before == 42)

        proxy.freeze()
        let started = ContinuousClock.now
        var failure: PostgresError?
        do {
            _ = try connection.query("SELECT 1")
        } catch let error as PostgresError {
            failure = error
        }
        let waited = ContinuousClock.now - started
        let error = try #require(failure)
        #expect(error.kind == .connection)
        #expect(error.message.contains("no answer from"), "\(error)")
        // At least the deadline; the upper bound only tells a deadline from a hang on a loaded machine.
        #expect(waited >= .seconds(2) && waited < .seconds(30), "waited \(waited)")
        #expect(!connection.isHealthy)
        proxy.stop()
    }

    /// Frozen in the middle of a COPY OUT: the call fails within its deadline. (The copy no longer sends a cancel
    /// request once the deadline has tripped or the connection broke: PQcancel connects again and waits for the
    /// server with no limit of its own. With this proxy the old code did not hang either, so this test shows the
    /// deadline on the COPY OUT path, not that wait.)
    @Test func aProxyFrozenDuringACopyOutFailsTheCopyWithinItsDeadline() throws {
        let database = try TestDatabase.create()
        let (proxy, connection) = try Self.throughProxy(database)
        var rows = 0
        let started = ContinuousClock.now
        var failure: PostgresError?
        do {
            try connection.copyOut(
                """
                COPY (SELECT g, pg_sleep(0.002) FROM generate_series(1, 5000) g) TO STDOUT (FORMAT binary)
                """
            ) { row in
                _ = try row.int32(); try row.skip()
                rows += 1
                if rows == 10 { proxy.freeze() }
            }
        } catch let error as PostgresError {
            failure = error
        }
        let waited = ContinuousClock.now - started
        let error = try #require(failure)
        #expect(error.kind == .connection || error.kind == .copy, "\(error)")
        #expect(waited < .seconds(15), "waited \(waited)")
        #expect(!connection.isHealthy)
        proxy.stop()
    }

    @Test func slowStatementsWithinTheDeadlineAreLeftAlone() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        connection.callTimeout = .seconds(2)
        // A COPY that streams for longer than the deadline keeps going: every chunk is progress.
        let started = ContinuousClock.now
        let rows = try connection.copyOut(
            """
            COPY (SELECT g, pg_sleep(0.001) FROM generate_series(1, 3000) g) TO STDOUT (FORMAT binary)
            """
        ) { row in
            _ = try row.int32(); try row.skip()
        }
        #expect(rows == 3_000)
        #expect(ContinuousClock.now - started > .seconds(2))
        #expect(try connection.query("SELECT pg_sleep(1), 7").rows[0].int32(1) == 7)
    }

    /// A connection to `database` through a `FreezableProxy`, with a call deadline of two seconds.
    static func throughProxy(_ database: TestDatabase) throws -> (FreezableProxy, PostgresConnection) {
        let socketDirectory = try #require(value(of: "host", in: database.conninfo))
        let proxy = try FreezableProxy(
            unixSocket: socketDirectory + "/.s.PGSQL.\(value(of: "port", in: database.conninfo) ?? "5432")")
        let conninfo = try PostgresConnection.conninfo(
            database.conninfo, overriding: ["host": "127.0.0.1", "port": String(proxy.port)])
        let connection = try PostgresConnection(conninfo, options: ["connect_timeout": "5"])
        connection.callTimeout = .seconds(2)
        return (proxy, connection)
    }

    static func value(of key: String, in conninfo: String) -> String? {
        for part in conninfo.split(separator: " ") where part.hasPrefix(key + "=") {
            return String(part.dropFirst(key.count + 1)).trimmingCharacters(in: CharacterSet(charactersIn: "'"))
        }
        return nil
    }
}

/// A one-connection TCP proxy on 127.0.0.1 to a Unix socket, which can be frozen: after `freeze()` it
/// keeps both sockets open and forwards nothing, like a stopped proxy process whose kernel still
/// accepts packets.
final class FreezableProxy: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    private let lock = NSLock()
    private var frozen = false
    private var stopped = false
    private var sockets: [Int32] = []

    init(unixSocket path: String) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0, listen(fd, 1) == 0 else { throw POSIXError(.EADDRINUSE) }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        Thread.detachNewThread { [self] in
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let server = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var target = sockaddr_un()
            target.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &target.sun_path) { buffer in
                for (i, byte) in path.utf8.prefix(buffer.count - 1).enumerated() { buffer[i] = byte }
            }
            let connected = withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(server, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard connected == 0 else { return }
            lock.lock(); sockets = [client, server]; lock.unlock()
            Thread.detachNewThread { self.pump(from: client, to: server) }
            self.pump(from: server, to: client)
        }
    }

    private func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            lock.lock(); let (isFrozen, isStopped) = (frozen, stopped); lock.unlock()
            if isStopped { return }
            if isFrozen { Thread.sleep(forTimeInterval: 0.05); continue }
            var descriptor = pollfd(fd: source, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 50) >= 0 else { return }
            if descriptor.revents == 0 { continue }
            lock.lock(); let nowFrozen = frozen; lock.unlock()
            if nowFrozen { continue }
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count <= 0 { return }
            var sent = 0
            while sent < count {
                let n = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + sent, count - sent) }
                if n <= 0 { return }
                sent += n
            }
        }
    }

    func freeze() {
        lock.lock(); frozen = true; lock.unlock()
    }

    func stop() {
        lock.lock()
        stopped = true
        for s in sockets { close(s) }
        lock.unlock()
        close(listener)
    }
}
