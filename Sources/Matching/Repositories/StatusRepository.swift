/// Reads the service's status (`matcher status`) with nothing but reads, so the worker's least-privilege
/// role can run it beside the runs.
public protocol StatusRepository: Sendable {
    /// The status as the store holds it now. `retention`: also read the oldest `matched_at` kept (on a large
    /// table this costs a scan of the oldest block ranges; the metrics after a run leave it out).
    func serviceStatus(retention: Bool) throws -> ServiceStatus
}

extension StatusRepository {
    public func serviceStatus() throws -> ServiceStatus { try serviceStatus(retention: true) }
}
