/// SplitMix64 (Steele, Lea and Flood, 2014): the project's one small deterministic generator.
///
/// A fixed algorithm, so that a seed gives the same numbers on every machine and Swift version (Swift's own
/// generators promise neither). The load-test world seeds its xoshiro streams and hashes ids with it; tests
/// and benchmarks draw reproducible values from it (`Int.random(in:using:)` and friends).
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    @inline(__always)
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return SplitMix64.mix(state)
    }

    /// The output function alone: a good 64-bit hash of `value`.
    @inline(__always)
    public static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
