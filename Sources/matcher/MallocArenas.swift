import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// glibc's allocator gives each thread that allocates while another holds an arena an arena of its own, up to
/// eight per core, and keeps what each has freed. The engine allocates on every core (Dispatch's threads) and
/// the writers on theirs, so a run's resident memory stood well above what it had allocated. One arena per
/// core: a 200k x 20k soak day's peak RSS 147 -> 127 MiB, for about 5 % more CPU in the worker
/// (`docs/decisions.md`, "Memory"). An operator's `MALLOC_ARENA_MAX` wins.
enum MallocArenas {
    static func limitToCores() {
        #if canImport(Glibc)
            guard ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil,
                let process = dlopen(nil, RTLD_NOW), let symbol = dlsym(process, "mallopt")
            else { return }
            // mallopt(3) and M_ARENA_MAX (-8) are in <malloc.h>, which the Glibc module does not import.
            typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
            let mallopt = unsafeBitCast(symbol, to: Mallopt.self)
            _ = mallopt(-8, Int32(clamping: max(1, ProcessInfo.processInfo.activeProcessorCount)))
        #endif
    }
}
