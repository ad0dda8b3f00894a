import Foundation

/// Runs the built `matcher` executable, as an operator or a timer would.
struct MatcherProcess {
    struct Outcome {
        let status: Int32
        /// true when the process was ended by a signal (then `status` is the signal number).
        let signalled: Bool
        let stdout: String
        let stderr: String
    }

    static var executable: URL {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
                "matcher"),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("matcher"),
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent(".build/debug/matcher"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates.last!
    }

    static func run(
        _ arguments: [String], database: String, environment extra: [String: String] = [:],
        timeout: TimeInterval = 300
    ) throws -> Outcome {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = database
        environment["MATCHER_FAULT"] = nil
        for (key, value) in extra { environment[key] = value }
        process.environment = environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Drain both pipes while the process runs so that it never blocks on a full pipe.
        let outData = LockedData(), errData = LockedData()
        let group = DispatchGroup()
        for (pipe, sink) in [(out, outData), (err, errData)] {
            group.enter()
            DispatchQueue.global().async {
                sink.set(pipe.fileHandleForReading.readDataToEndOfFile())
                group.leave()
            }
        }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        group.wait()
        return Outcome(
            status: process.terminationStatus, signalled: process.terminationReason == .uncaughtSignal,
            stdout: String(decoding: outData.get(), as: UTF8.self),
            stderr: String(decoding: errData.get(), as: UTF8.self))
    }
}

final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func set(_ d: Data) { lock.lock(); data = d; lock.unlock() }
    func get() -> Data { lock.lock(); defer { lock.unlock() }; return data }
}
