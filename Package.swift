// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "matcher",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "matcher", targets: ["matcher"]),
        .executable(name: "matcher-bench", targets: ["matcher-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // The text exposition format of the metrics file (deploy/README.md, "Logs and metrics").
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // libpq, the only way this project talks to PostgreSQL.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // Exact time values shared by the database client and the domain.
        .target(name: "Chronology"),
        // A small PostgreSQL client over libpq: connections, parameters, binary COPY, errors.
        .target(name: "PostgresClient", dependencies: ["CLibPQ", "Chronology"]),
        // The one deterministic generator (SplitMix64) of the seeder, the tests and the benchmarks.
        .target(name: "DeterministicRandom"),
        // The domain: entities, MasterItems, conditions, engine, repositories, use cases, reports.
        .target(name: "Matching", dependencies: ["Chronology"]),
        // The PostgreSQL repositories, migrations runner, change capture and app-table writers.
        .target(name: "MatchingPostgres", dependencies: ["Matching", "PostgresClient", "Chronology"]),
        // The deterministic load-test world (`matcher seed`): never a dependency of the store.
        .target(
            name: "LoadWorld",
            dependencies: ["Matching", "MatchingPostgres", "PostgresClient", "Chronology", "DeterministicRandom"]),
        // The git commit the binary is built from, for `--version` (`buildCommit`, written before each build).
        .plugin(name: "BuildCommit", capability: .buildTool()),
        // The command line: commands only.
        .executableTarget(
            name: "matcher",
            dependencies: [
                "Matching", "MatchingPostgres", "LoadWorld", "PostgresClient", "Chronology",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            // Sources/matcher/FaultInjection.swift: SIGKILL at MATCHER_FAULT's point, for the tests that run
            // this binary (debug builds); release builds are without it.
            swiftSettings: [.define("MATCHER_FAULTS", .when(configuration: .debug))],
            plugins: ["BuildCommit"]
        ),
        // Benchmarks that print numbers (never timed tests).
        .executableTarget(
            name: "matcher-bench",
            dependencies: [
                "Matching", "MatchingPostgres", "PostgresClient", "Chronology", "DeterministicRandom", "LoadWorld",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Provisioning of throwaway databases on the private PostgreSQL for integration tests.
        .target(
            name: "PostgresTestSupport",
            dependencies: ["PostgresClient", "MatchingPostgres"],
            path: "Tests/PostgresTestSupport"
        ),
        // Builders of small worlds for use-case tests, shared by the in-memory and PostgreSQL suites.
        .target(
            name: "MatchingTestSupport", dependencies: ["Matching", "Chronology"], path: "Tests/MatchingTestSupport"),
        .testTarget(name: "ChronologyTests", dependencies: ["Chronology"]),
        .testTarget(
            name: "PostgresClientTests", dependencies: ["PostgresClient", "PostgresTestSupport", "Chronology"]),
        .testTarget(
            name: "MatchingTests",
            dependencies: ["Matching", "MatchingTestSupport", "Chronology", "DeterministicRandom"],
            exclude: ["Golden"]),  // read by path (ServiceStatusTests)
        .testTarget(
            name: "MatcherTests",
            dependencies: ["matcher", "Matching", "Chronology", "PostgresClient", "PostgresTestSupport"]),
        .testTarget(
            name: "MatchingPostgresTests",
            dependencies: [
                "Matching", "MatchingPostgres", "LoadWorld", "MatchingTestSupport", "PostgresClient",
                "PostgresTestSupport", "Chronology", "DeterministicRandom",
            ]
        ),
    ]
)
