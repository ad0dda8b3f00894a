import ArgumentParser
import Chronology
import DeterministicRandom
import Dispatch
import Foundation
import Matching

/// The bitset engine in memory: generated profiles and filters, no database.
struct EngineBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engine",
        abstract: "Throughput of the bitset match engine on generated profiles and filters.",
        discussion: """
            Generates profiles (Tokyo-heavy residence, ages mostly 20–45, logins skewed to recent days) \
            straight into ProfileColumns, and filters of 1–10 conditions around their owners, then times \
            (a) counting every match of every filter while extracting its first --limit, and (b) the \
            normal run (first --limit with early stop). Prints each repetition, the medians, pair \
            evaluations per second (candidates × filters / seconds) and the peak RSS (VmHWM).

            A fixed reference loop (AND and popcount of two fixed word arrays, plain code, not the engine, \
            on every core) is timed in the same process before the first and after every repetition. \
            Each repetition's pairs/s is also printed as a ratio to the mean of the reference rates \
            around it: on a shared, noisy machine the ratio is the figure comparable across runs. The \
            summary gives the median and the range (min–max) of both.
            """)

    @Option(help: "Profiles to generate (about 95% active).")
    var profiles = 1_000_000

    @Option(help: "Filters to generate.")
    var filters = 100_000

    @Option(help: "Matches extracted per filter (K).")
    var limit = 100

    @Option(help: "Repetitions of each mode; the median is reported.")
    var repetitions = 3

    @Option(help: "Seed of the generator.")
    var seed: UInt64 = 2026

    @Option(help: "Filters per block of the engine's scan.")
    var filtersPerBlock = BitsetMatchEngine.Options().filtersPerBlock

    @Option(help: "MiB of bitsets for anyOf lists shared by several filters.")
    var groupBudgetMib = BitsetMatchEngine.Options().sharedGroupBudgetBytes >> 20

    @Option(help: "A code keeps a list of rows rather than a bitset below candidates / this.")
    var sparseDivisor = BitsetMatchEngine.Options().sparseDivisor

    @Option(help: "Recorded (filter, profile) pairs to generate as exclusions, with a block for one in four.")
    var exclusions = 200_000

    @Option(help: "Filters to check against the reference engine after the runs (0: none).")
    var verify = 0

    @Option(help: "Before each timed run, wait up to this many seconds for the CPUs to be 90% idle (shared machines).")
    var waitIdle = 0

    @Option(help: "Modes to time, comma-separated: count (a), run (b).")
    var modes = "count,run"

    @Option(help: "Passes of each worker over the reference loop's two arrays of 65,536 words (0: no reference).")
    var referencePasses = 2_000

    func validate() throws {
        guard profiles > 0, filters > 0 else { throw ValidationError("--profiles and --filters must be positive") }
        guard repetitions > 0 else { throw ValidationError("--repetitions must be positive") }
        guard limit >= 0, exclusions >= 0, verify >= 0, referencePasses >= 0 else {
            throw ValidationError("negative option")
        }
    }

    func run() throws {
        let clock = EvaluationClock(now: Timestamp(iso8601: "2026-03-01T03:00:00Z")!)
        var started = ContinuousClock.now
        var generator = BenchWorkload(seed: seed, clock: clock)
        let columns = generator.columns(count: profiles)
        let generated = started.elapsedSeconds
        started = .now
        let batch = CandidateBatch(columns)
        let batchSeconds = started.elapsedSeconds
        print(
            "profiles: \(profiles) generated in \(format(generated)) s; \(batch.count) active candidates "
                + "in cap order in \(format(batchSeconds)) s")

        started = .now
        let prepared = generator.filters(count: filters, columns: columns)
        let exclusionSet = generator.exclusions(count: exclusions, filters: prepared, columns: columns)
        print(
            "filters: \(prepared.count) (\(format(Double(prepared.reduce(0) { $0 + $1.conditions.conditions.count }) / Double(prepared.count))) conditions on average) "
                + "generated in \(format(started.elapsedSeconds)) s; exclusions: \(exclusionSet.existing.count) "
                + "pairs, \(exclusionSet.blocks.count) blocks")
        print("RSS after generation: \(PeakMemory.describe())")

        var options = BitsetMatchEngine.Options()
        options.filtersPerBlock = filtersPerBlock
        options.sharedGroupBudgetBytes = groupBudgetMib << 20
        options.sparseDivisor = sparseDivisor
        let engine = BitsetMatchEngine(options: options)
        let pairs = Double(batch.count) * Double(prepared.count)

        let modeList = Set(modes.split(separator: ",").map(String.init))
        let reference = ReferenceLoop(passes: referencePasses)
        if referencePasses > 0 {
            print(
                "reference loop: AND + popcount of two fixed arrays of \(ReferenceLoop.words) words, "
                    + "\(referencePasses) passes on each of \(ReferenceLoop.workers) workers")
        }
        var counted: [FilterResult] = []
        if modeList.contains("count") {
            print("\n(a) count every match, extract the first \(limit) per filter:")
            var countingTimes: [Double] = []
            var totals = ReferencedRates(reference: reference)
            var totalMatches = 0
            for repetition in 1...repetitions {
                CPUTime.waitForIdle(seconds: waitIdle)
                started = .now
                let cpu = CPUTime.seconds()
                let evaluation = engine.evaluateCounting(
                    prepared, against: batch, limit: limit, clock: clock,
                    exclusions: exclusionSet)
                let seconds = started.elapsedSeconds
                let cpuSeconds = CPUTime.seconds() - cpu
                countingTimes.append(seconds)
                totalMatches = evaluation.matchCounts.reduce(0, +)
                counted = evaluation.results
                let s = evaluation.statistics
                print(
                    "  run \(repetition): \(format(seconds)) s = \(rate(pairs / seconds)) pairs/s, CPU \(format(cpuSeconds)) s "
                        + "(plan \(format(s.planSeconds)) s, index \(format(s.indexSeconds)) s, scan \(format(s.scanSeconds)) s; "
                        + "\(s.bitsets) bitsets = \(s.bitsetBytes >> 20) MiB, \(s.sparseRows) listed rows, "
                        + "\(s.sharedGroups) shared groups)")
                print("    " + totals.add(pairsPerSecond: pairs / seconds))
            }
            let countingMedian = median(countingTimes)
            print(
                "  matches: \(totalMatches) (\(format(Double(totalMatches) / Double(prepared.count))) per filter), "
                    + "extracted: \(counted.reduce(0) { $0 + $1.profileIds.count })")
            print("  median: \(format(countingMedian)) s = \(rate(pairs / countingMedian)) pair evaluations/s")
            print(totals.summary())
        }

        var results: [FilterResult] = []
        if modeList.contains("run") {
            print("\n(b) run mode: the first \(limit) per filter, early stop:")
            var runTimes: [Double] = []
            var totals = ReferencedRates(reference: reference)
            for repetition in 1...repetitions {
                CPUTime.waitForIdle(seconds: waitIdle)
                started = .now
                let cpu = CPUTime.seconds()
                let evaluation = engine.evaluateWithStatistics(
                    prepared, against: batch, limit: limit, clock: clock,
                    exclusions: exclusionSet)
                let seconds = started.elapsedSeconds
                let cpuSeconds = CPUTime.seconds() - cpu
                runTimes.append(seconds)
                results = evaluation.results
                let s = evaluation.statistics
                print(
                    "  run \(repetition): \(format(seconds)) s = \(rate(pairs / seconds)) pairs/s, CPU \(format(cpuSeconds)) s "
                        + "(plan \(format(s.planSeconds)) s, index \(format(s.indexSeconds)) s, scan \(format(s.scanSeconds)) s)"
                )
                print("    " + totals.add(pairsPerSecond: pairs / seconds))
            }
            let runMedian = median(runTimes)
            print(
                "  found: \(results.reduce(0) { $0 + $1.profileIds.count })"
                    + (counted.isEmpty ? "" : "; same as (a): \(results == counted)"))
            print("  median: \(format(runMedian)) s = \(rate(pairs / runMedian)) pair evaluations/s")
            print(totals.summary())
        }

        print("\npeak RSS (VmHWM) of the runs: \(PeakMemory.describe())")
        if verify > 0 {
            let sample = Array(prepared.prefix(verify))
            started = .now
            let expected = ReferenceMatchEngine().evaluate(
                sample, against: batch, limit: limit, clock: clock,
                exclusions: exclusionSet)
            let same = expected == Array((results.isEmpty ? counted : results).prefix(verify))
            print(
                "reference engine on the first \(sample.count) filters (\(format(started.elapsedSeconds)) s): "
                    + (same ? "identical" : "DIFFERENT"))
            if !same { throw ExitCode.failure }
        }
        if verify > 0 {
            print("peak RSS (VmHWM) with the reference engine's profiles: \(PeakMemory.describe())")
        }
    }

    private func format(_ value: Double) -> String { String(format: "%.3f", value) }

    private func rate(_ value: Double) -> String { String(format: "%.2f×10^9", value / 1e9) }
}

/// The fixed reference of the engine benchmark: a plain loop that ANDs two fixed arrays of words and counts
/// the set bits, on every core at once (as the engine's scan), the arrays' words salted per pass so that no
/// pass can be skipped. It never changes with the engine: its rate measures how much of the machine the
/// benchmark got, so the engine's pairs/s over this rate compares across runs on a shared machine.
struct ReferenceLoop: Sendable {
    static let words = 1 << 16
    static let workers = max(ProcessInfo.processInfo.activeProcessorCount, 1)
    let passes: Int
    private let left: [UInt64]
    private let right: [UInt64]

    init(passes: Int) {
        self.passes = passes
        var random = BenchRandom(seed: 0x5EED)
        left = (0..<Self.words).map { _ in random.next() }
        right = (0..<Self.words).map { _ in random.next() }
    }

    /// Words ANDed and counted per second, over all workers.
    func wordsPerSecond() -> Double {
        let started = ContinuousClock.now
        let checksums = UnsafeMutableBufferPointer<Int>.allocate(capacity: Self.workers)
        defer { checksums.deallocate() }
        nonisolated(unsafe) let slots = checksums  // each worker writes its own slot only
        DispatchQueue.concurrentPerform(iterations: Self.workers) { worker in
            var total = 0
            for pass in 0..<passes {
                let salt = UInt64(pass) &* 0x9E37_79B9_7F4A_7C15
                for index in 0..<Self.words { total &+= ((left[index] ^ salt) & right[index]).nonzeroBitCount }
            }
            slots[worker] = total
        }
        let seconds = started.elapsedSeconds
        if checksums.reduce(0, &+) == -1 { print("(unreachable checksum)") }
        return Double(Self.words) * Double(passes) * Double(Self.workers) / seconds
    }
}

/// One mode's engine rates, each beside the reference loop's rates measured just before and just after it.
struct ReferencedRates {
    let reference: ReferenceLoop
    private(set) var engine: [Double] = []
    private(set) var references: [Double] = []
    private(set) var ratios: [Double] = []

    init(reference: ReferenceLoop) {
        self.reference = reference
        if reference.passes > 0 { references.append(reference.wordsPerSecond()) }
    }

    /// Records one engine run (measuring the reference after it) and describes it.
    mutating func add(pairsPerSecond: Double) -> String {
        engine.append(pairsPerSecond)
        guard reference.passes > 0 else { return "(no reference loop)" }
        let before = references.last!
        let after = reference.wordsPerSecond()
        references.append(after)
        let ratio = pairsPerSecond / ((before + after) / 2)
        ratios.append(ratio)
        return "reference loop \(Self.rate(before)) -> \(Self.rate(after)) words/s; "
            + "engine / reference = \(Self.ratio(ratio)) pairs per word"
    }

    func summary() -> String {
        var lines = ["  engine pairs/s: " + Self.spread(engine, Self.rate)]
        if !ratios.isEmpty {
            lines.append("  reference loop words/s: " + Self.spread(references, Self.rate))
            lines.append("  engine / reference (pairs per word): " + Self.spread(ratios, Self.ratio))
        }
        return lines.joined(separator: "\n")
    }

    /// Median (min–max) of `values`.
    private static func spread(_ values: [Double], _ format: (Double) -> String) -> String {
        let sorted = values.sorted()
        let median =
            sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        return "median \(format(median)) (range \(format(sorted.first!))–\(format(sorted.last!)), "
            + "\(sorted.count) values)"
    }

    private static func rate(_ value: Double) -> String { String(format: "%.2f×10^9", value / 1e9) }
    private static func ratio(_ value: Double) -> String { String(format: "%.3f", value) }
}

extension ContinuousClock.Instant {
    fileprivate var elapsedSeconds: Double { (ContinuousClock.now - self).seconds }
}

/// This process's CPU time (user and system, every thread).
enum CPUTime {
    static func seconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// Waits (up to `seconds`) until the machine's CPUs were at least 90% idle over half a second.
    static func waitForIdle(seconds: Int) {
        guard seconds > 0 else { return }
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            guard let first = ticks() else { return }
            Thread.sleep(forTimeInterval: 0.5)
            guard let second = ticks() else { return }
            let total = second.total - first.total
            if total > 0 && (second.idle - first.idle) * 10 >= total * 9 { return }
        }
        print("  (the machine stayed busy)")
    }

    /// The aggregate CPU line of /proc/stat: all ticks, and idle plus iowait ticks.
    private static func ticks() -> (total: Int, idle: Int)? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first
        else { return nil }
        let fields = line.split(separator: " ").dropFirst().compactMap { Int($0) }
        guard fields.count >= 5 else { return nil }
        return (fields.reduce(0, +), fields[3] + fields[4])
    }
}

/// This process's memory from /proc/self/status.
enum PeakMemory {
    static func kilobytes(_ field: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return nil
    }

    static func describe() -> String {
        let peak = kilobytes("VmHWM").map { String(format: "%.0f MiB", Double($0) / 1024) } ?? "unknown"
        let now = kilobytes("VmRSS").map { String(format: "%.0f MiB", Double($0) / 1024) } ?? "unknown"
        return "peak \(peak), now \(now)"
    }
}

/// The benchmark's draws, from the shared SplitMix64.
private typealias BenchRandom = SplitMix64

extension SplitMix64 {
    fileprivate mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }
    fileprivate mutating func chance(_ p: Double) -> Bool { unit() < p }
    fileprivate mutating func int(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.count))
    }
    fileprivate mutating func normal(_ mean: Double, _ deviation: Double) -> Double {
        let u = max(unit(), 1e-12), v = unit()
        return mean + deviation * (-2 * log(u)).squareRoot() * cos(2 * .pi * v)
    }
}

/// A weighted choice among codes.
private struct Weighted {
    let codes: [Int32]
    let cumulative: [Double]

    init(_ pairs: [(Int32, Double)]) {
        codes = pairs.map(\.0)
        var total = 0.0
        cumulative = pairs.map {
            total += $0.1; return total
        }
    }

    func draw(_ random: inout BenchRandom) -> Int32 {
        let target = random.unit() * cumulative.last!
        var low = 0, high = cumulative.count - 1
        while low < high {
            let middle = (low + high) / 2
            if cumulative[middle] < target { low = middle + 1 } else { high = middle }
        }
        return codes[low]
    }
}

/// Realistic-looking profiles and saved filters.
private struct BenchWorkload {
    var random: BenchRandom
    let clock: EvaluationClock
    /// Community ids: sparse up to Int32.max, popularity following a Zipf law.
    let communityIds: [Int32]
    let communityDraw: Weighted

    static let residence = Weighted(
        [
            (13, 30), (14, 12), (11, 8), (12, 7), (27, 8), (23, 5), (40, 4), (28, 3), (26, 2), (1, 2), (22, 1.5),
            (34, 1.2), (4, 1),
        ] + (1...48).map { (Int32($0), 0.35) } + [(0, 2)])
    static let neighbours: [Int32: [Int32]] = [
        13: [14, 11, 12, 19], 14: [13, 11, 12, 22], 11: [13, 12, 14, 10], 12: [13, 11, 14, 8],
        27: [28, 26, 29, 30], 28: [27, 26, 33], 26: [27, 25, 29], 23: [21, 24, 22], 40: [41, 43, 44, 35],
    ]

    init(seed: UInt64, clock: EvaluationClock) {
        random = BenchRandom(seed: seed)
        self.clock = clock
        var ids = Set<Int32>()
        while ids.count < 20_000 { ids.insert(Int32(truncatingIfNeeded: random.next() & 0x7FFF_FFFF) | 1) }
        communityIds = ids.sorted()
        communityDraw = Weighted(communityIds.enumerated().map { ($1, 1.0 / Double($0 + 1)) })
    }

    func index(_ key: String) -> Int { BenchWorkload.indexes[key]! }

    static let indexes = Dictionary(uniqueKeysWithValues: MasterItem.all.map { ($0.key, $0.index) })

    mutating func drawAge() -> Int {
        random.chance(0.85) ? random.int(20...45) : (random.chance(0.3) ? random.int(18...19) : random.int(46...70))
    }

    mutating func columns(count: Int) -> ProfileColumns {
        var builder = ProfileColumns.Builder(reservingCapacity: count)
        let now = clock.now.microsecondsSinceEpoch
        let day = Timestamp.microsecondsPerDay
        let runDay = clock.runDate.daysSinceEpoch
        let singles = MasterItem.all.filter {
            $0.kind == .single && !["gender", "residence", "hometown"].contains($0.key)
        }
        .map { ($0.index, Int($0.domain!.upperBound)) }
        let gender = index("gender"), age = index("age"), height = index("height"), income = index("income")
        let residenceItem = index("residence"), hometown = index("hometown"), languages = index("languages")
        let personality = index("personality"), communities = index("communities"), hasPhoto = index("has_photo")
        let hasIntroduction = index("has_introduction"), verified = index("verified")
        let lastLogin = index("last_login"), registered = index("registered")
        for id in 1...count {
            let status: Int16 = random.chance(0.95) ? 1 : Int16(random.int(2...4))
            builder.beginRow(id: Int64(id), status: status, plan: random.chance(0.2) ? 1 : 0)
            let sex: Int16 = random.chance(0.55) ? 1 : 2
            builder.appendCode(sex, item: gender)
            let birth = runDay - Int32(drawAge() * 365 + random.int(0...364))
            builder.appendDate(days: random.chance(0.02) ? nil : birth, item: age)
            let centimetres = sex == 1 ? random.normal(171, 6) : random.normal(158, 5.5)
            builder.appendInteger(
                random.chance(0.1) ? nil : Int32(min(230, max(120, centimetres.rounded()))),
                item: height)
            builder.appendInteger(
                random.chance(0.3)
                    ? nil : Int32(1 + min(8, Int(random.unit() * random.unit() * 9 + random.unit() * 2))),
                item: income)
            let residence = Int16(Self.residence.draw(&random))
            builder.appendCode(residence, item: residenceItem)
            builder.appendCode(random.chance(0.5) ? residence : Int16(Self.residence.draw(&random)), item: hometown)
            for (item, top) in singles {
                builder.appendCode(
                    random.chance(0.15) ? 0 : Int16(1 + Int(random.unit() * random.unit() * Double(top))), item: item)
            }
            // Languages: Japanese, often English, rarely more.
            builder.appendCodeElement(1, item: languages)
            if random.chance(0.3) { builder.appendCodeElement(2, item: languages) }
            if random.chance(0.05) { builder.appendCodeElement(Int32(random.int(3...30)), item: languages) }
            builder.endCodes(item: languages)
            for _ in 0..<random.int(0...5) {
                builder.appendCodeElement(Int32(1 + Int(random.unit() * random.unit() * 40)), item: personality)
            }
            builder.endCodes(item: personality)
            for _ in 0..<(random.chance(0.4) ? 0 : random.int(1...10)) {
                builder.appendCodeElement(communityDraw.draw(&random), item: communities)
            }
            builder.endCodes(item: communities)
            builder.appendFlag(random.chance(0.7), item: hasPhoto)
            builder.appendFlag(random.chance(0.6), item: hasIntroduction)
            builder.appendFlag(random.chance(0.5), item: verified)
            // Logins: a quarter within a day, over half within a week, the rest up to two years.
            let loginDays =
                random.chance(0.25)
                ? random.unit()
                : random.chance(0.4)
                    ? 1 + random.unit() * 6
                    : random.chance(0.5) ? 7 + random.unit() * 23 : 30 + random.unit() * 700
            builder.appendTimestamp(microseconds: now - Int64(loginDays * Double(day)), item: lastLogin)
            builder.appendTimestamp(microseconds: now - Int64(random.unit() * 1_100 * Double(day)), item: registered)
        }
        return builder.build()
    }

    mutating func filters(count: Int, columns: ProfileColumns) -> [PreparedFilter] {
        guard case .codes(let genders) = columns.columns[index("gender")],
            case .codes(let residences) = columns.columns[index("residence")],
            case .dates(let births) = columns.columns[index("age")]
        else { fatalError("unexpected columns") }
        let runDay = clock.runDate.daysSinceEpoch
        var result: [PreparedFilter] = []
        result.reserveCapacity(count)
        let now = clock.now
        // Optional conditions: key, probability, and how to draw them.
        for id in 1...count {
            var row = random.int(0...columns.count - 1)
            while columns.statuses[row] != 1 { row = random.int(0...columns.count - 1) }
            let ownerPlan = columns.plans[row]
            let ownerAge = births.answered[row] ? Int((runDay - births.values[row]) / 365) : 30
            var members: [String] = []
            if random.chance(0.95) { members.append(#""gender":{"anyOf":[\#(genders[row] == 1 ? 2 : 1)]}"#) }
            if random.chance(0.9) {
                let low = max(18, ownerAge - random.int(0...6)), high = min(120, ownerAge + random.int(0...8))
                members.append(
                    random.chance(0.15) ? #""age":{"min":\#(low)}"# : #""age":{"min":\#(low),"max":\#(high)}"#)
            }
            if random.chance(0.7) {
                let home = Int32(residences[row] == 0 ? 13 : residences[row])
                var codes = [home]
                let near = Self.neighbours[home] ?? []
                if !near.isEmpty { codes += near.prefix(random.int(0...near.count)) }
                members.append(#""residence":{"anyOf":[\#(codes.map(String.init).joined(separator: ","))]}"#)
            }
            let extra = random.int(0...6)
            var optional: [String] = []
            while optional.count < extra {
                let member: String
                switch random.int(0...15) {
                case 0:
                    let low = 150 + random.int(0...30);
                    member = #""height":{"min":\#(low),"max":\#(low + random.int(5...30))}"#
                case 1: member = #""income":{"min":\#(random.int(2...6))}"#
                case 2, 3: member = #""last_login":{"withinDays":\#([1, 3, 7, 14, 30][random.int(0...4)])}"#
                case 4: member = #""has_photo":true"#
                case 5: member = #""verified":true"#
                case 6: member = random.chance(0.6) ? #""smoking":{"anyOf":[1]}"# : #""smoking":{"anyOf":[0,1,5]}"#
                case 7: member = #""drinking":{"anyOf":[\#(random.chance(0.5) ? "1,3" : "1,2,3")]}"#
                case 8: member = #""body_type":{"anyOf":[\#(random.chance(0.5) ? "1,2,3" : "2,3,4")]}"#
                case 9: member = #""education":{"anyOf":[3,4]}"#
                case 10: member = #""marital_status":{"anyOf":[1]}"#
                case 11: member = #""marriage_intent":{"anyOf":[\#(random.chance(0.5) ? "1,2" : "1,2,3")]}"#
                case 12:
                    let codes = Set((0..<random.int(1...3)).map { _ in 1 + Int(random.unit() * random.unit() * 40) })
                    member = #""personality":{"anyOf":[\#(codes.sorted().map(String.init).joined(separator: ","))]}"#
                case 13:
                    let codes = Set((0..<random.int(1...3)).map { _ in communityDraw.draw(&random) })
                    member = #""communities":{"anyOf":[\#(codes.sorted().map(String.init).joined(separator: ","))]}"#
                case 14: member = #""has_children":{"anyOf":[1]}"#
                default: member = #""registered":{"withinDays":\#(random.chance(0.5) ? 30 : 90)}"#
                }
                let key = String(member.split(separator: "\"")[0])
                if !members.contains(where: { $0.hasPrefix("\"\(key)\"") })
                    && !optional.contains(where: { $0.hasPrefix("\"\(key)\"") })
                {
                    optional.append(member)
                }
            }
            members += optional
            if members.isEmpty { members.append(#""has_photo":true"#) }
            members = Array(members.prefix(10))
            let json = "{" + members.joined(separator: ",") + "}"
            let conditions: FilterConditions
            do {
                conditions = try FilterConditions.decode(json: json)
            } catch {
                fatalError("generated an invalid filter \(json): \(error)")
            }
            let ownerId = columns.ids[row]
            let filter = SavedFilter(
                id: Int64(id), ownerId: ownerId, conditionsJSON: json, createdAt: now, updatedAt: now)
            result.append(
                PreparedFilter(
                    filter: filter, owner: FilterOwner(id: ownerId, status: 1, plan: ownerPlan),
                    conditions: conditions.effective(forOwnerPlan: ownerPlan).conditions))
        }
        return result
    }

    mutating func exclusions(count: Int, filters: [PreparedFilter], columns: ProfileColumns) -> MatchExclusions {
        var existing = Set<MatchPair>()
        var blocks: [(blocker: Int64, blocked: Int64)] = []
        for _ in 0..<count {
            let filter = filters[random.int(0...filters.count - 1)]
            let profile = columns.ids[random.int(0...columns.count - 1)]
            existing.insert(MatchPair(filterId: filter.filter.id, profileId: profile))
            if random.chance(0.25) { blocks.append((filter.owner.id, profile)) }
        }
        return MatchExclusions(existing: existing, blocks: BlockSet(blocks))
    }
}
