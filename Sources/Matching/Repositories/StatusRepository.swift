/// Reads the service's status (`matcher status`) with nothing but reads, so the worker's least-privilege
/// role can run it beside the runs.
public protocol StatusRepository: Sendable {
    /// The status as the store holds it now. `retention`: also read the oldest `matched_at` kept (on a large
    /// table this costs a scan of the oldest block ranges; the metrics after a run leave it out). `digestsOf`:
    /// the digests (`ServiceStatus.digests`) of that shard's filters only (owners with `owner_id mod N = K`),
    /// as a run's metrics file reports them: each shard's file then says what its own run left, fresh as of
    /// that run, and an alert's maximum over the files never keeps another shard's reading from before its run.
    func serviceStatus(retention: Bool, digestsOf shard: Shard) throws -> ServiceStatus
}

extension StatusRepository {
    public func serviceStatus() throws -> ServiceStatus { try serviceStatus(retention: true, digestsOf: .all) }
    public func serviceStatus(retention: Bool) throws -> ServiceStatus {
        try serviceStatus(retention: retention, digestsOf: .all)
    }
}
