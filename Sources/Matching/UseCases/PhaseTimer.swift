/// Wall-clock seconds per phase, accumulated.
struct PhaseTimer {
    private(set) var seconds: [RunPhase: Double] = [:]
    private var started: [RunPhase: ContinuousClock.Instant] = [:]
    private let origin = ContinuousClock.now

    mutating func begin(_ phase: RunPhase, _ output: any RunOutputHandler) {
        started[phase] = .now
        output.handle(.phaseStarted(phase))
    }

    mutating func end(_ phase: RunPhase, _ output: any RunOutputHandler) {
        guard let start = started.removeValue(forKey: phase) else { return }
        let elapsed = (ContinuousClock.now - start).seconds
        seconds[phase, default: 0] += elapsed
        output.handle(.phaseFinished(phase, seconds: elapsed))
    }

    var total: Double { (ContinuousClock.now - origin).seconds }
}

extension Duration {
    /// The duration in seconds, as a `Double` (phase timings, reports).
    public var seconds: Double {
        let (s, attos) = components
        return Double(s) + Double(attos) / 1e18
    }
}
