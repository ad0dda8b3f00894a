import DeterministicRandom

/// The seeder's pseudo-random numbers: xoshiro256** (Blackman & Vigna), seeded through SplitMix64.
///
/// Fixed algorithms, so that a seed gives the same world on every machine and Swift version (Swift's
/// own generators promise neither). Every entity draws from its own stream, keyed by (seed, stream,
/// index): profile 17's values never depend on how many numbers profile 16 used, so generation can be
/// chunked or parallel and still be byte-identical.
public struct SeedRandom: Sendable {
    private var s0: UInt64
    private var s1: UInt64
    private var s2: UInt64
    private var s3: UInt64

    /// The streams of a world: one per kind of entity, so that their ids never collide.
    public enum Stream: UInt64, Sendable {
        case profile = 1
        case filter = 2
        case filterOwner = 3
        case blocks = 4
        case changes = 5
        case changeRow = 6
        case okcupid = 7
    }

    public init(seed: UInt64, stream: Stream, index: UInt64) {
        var mixer = SplitMix64(seed: seed ^ (stream.rawValue &* 0xD6E8_FEB8_6659_FD93))
        // Fold the index in through a full SplitMix round, so that neighbouring ids give unrelated streams.
        mixer.state ^= SplitMix64.mix(index &+ 0x632B_E59B_D9B4_E019)
        s0 = mixer.next()
        s1 = mixer.next()
        s2 = mixer.next()
        s3 = mixer.next()
        if s0 | s1 | s2 | s3 == 0 { s0 = 1 }  // the one state xoshiro cannot leave
    }

    @inline(__always)
    public mutating func next() -> UInt64 {
        let result = rotl(s1 &* 5, 7) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = rotl(s3, 45)
        return result
    }

    @inline(__always)
    private func rotl(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }

    /// A uniform integer in `0..<bound` (Lemire's multiply-shift; the bias is below 2^-40 for our bounds).
    @inline(__always)
    public mutating func below(_ bound: Int) -> Int {
        precondition(bound > 0, "below(\(bound))")
        return Int(next().multipliedFullWidth(by: UInt64(bound)).high)
    }

    /// A uniform integer in `range`.
    @inline(__always)
    public mutating func int(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + below(range.count)
    }

    /// A uniform double in [0, 1).
    @inline(__always)
    public mutating func unit() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// true with probability `p`.
    @inline(__always)
    public mutating func chance(_ p: Double) -> Bool {
        unit() < p
    }

    /// An approximately standard-normal number (the sum of four uniforms, rescaled): cheap, bounded to
    /// ±3.46, and the same on every platform (no libm).
    @inline(__always)
    public mutating func normal() -> Double {
        (unit() + unit() + unit() + unit() - 2) * 1.7320508075688772
    }

    /// One element, uniformly.
    public mutating func element<T>(_ items: [T]) -> T {
        items[below(items.count)]
    }

    /// `count` distinct indices of `0..<population`, in the order drawn (Floyd's algorithm when the
    /// sample is small against the population).
    public mutating func distinctIndices(_ count: Int, of population: Int) -> [Int] {
        let count = min(count, population)
        var chosen = Set<Int>(minimumCapacity: count)
        var order: [Int] = []
        order.reserveCapacity(count)
        for j in (population - count)..<population {
            let t = below(j + 1)
            if chosen.insert(t).inserted {
                order.append(t)
            } else {
                chosen.insert(j)
                order.append(j)
            }
        }
        return order
    }
}

/// A discrete distribution over values with integer weights; a draw is one random number and a
/// binary search over the cumulative weights.
public struct WeightedTable<Value: Sendable>: Sendable {
    public let values: [Value]
    private let cumulative: [UInt64]

    public init(_ pairs: [(Value, Double)]) {
        precondition(!pairs.isEmpty, "an empty weighted table")
        values = pairs.map(\.0)
        var total: UInt64 = 0
        var cumulative: [UInt64] = []
        cumulative.reserveCapacity(pairs.count)
        for (_, weight) in pairs {
            precondition(weight >= 0, "a negative weight")
            total += UInt64((weight * 1_000_000).rounded())
            cumulative.append(total)
        }
        precondition(total > 0, "weights add up to zero")
        self.cumulative = cumulative
    }

    public var totalWeight: UInt64 { cumulative.last! }

    @inline(__always)
    public func draw(_ random: inout SeedRandom) -> Value {
        let target = random.next().multipliedFullWidth(by: totalWeight).high
        var low = 0
        var high = cumulative.count - 1
        while low < high {
            let mid = (low + high) / 2
            if cumulative[mid] > target { high = mid } else { low = mid + 1 }
        }
        return values[low]
    }
}

extension WeightedTable where Value == Int16 {
    /// Codes 1, 2, … with these weights.
    public init(codeWeights weights: [Double]) {
        self.init(weights.enumerated().map { (Int16($0.offset + 1), $0.element) })
    }
}
