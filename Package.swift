// swift-tools-version:6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "Skyros",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Skyros", targets: ["Skyros"]),
        .library(name: "SkyrosPostgres", targets: ["SkyrosPostgres"]),
        .library(name: "SkyrosMigrations", targets: ["SkyrosMigrations"]),
        .library(name: "SkyrosTesting", targets: ["SkyrosTesting"]),
        .executable(name: "migrate", targets: ["migrate"]),
        .executable(name: "skyros-demo", targets: ["skyros-demo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // SHA-256 for migration checksums, the migrations' lock key and the hint keys' tags.
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        // `swift package generate-documentation` (a plugin: nothing of it is linked into the library).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        .target(
            name: "SkyrosPostgres",
            dependencies: [
                "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SkyrosMigrations",
            dependencies: [
                "SkyrosPostgres",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        // The stack's layers, lowest first; each may import only the ones above it in this list (ARCHITECTURE.md).
        // Entities, the row codec, queries → SQL, the store protocol, the in-memory and PostgreSQL stores.
        .target(
            name: "SkyrosStore",
            dependencies: [
                "SkyrosPostgres",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Contexts, the row cache and overlay, the commit queue (state machine, driver, group commit).
        .target(
            name: "SkyrosStack",
            dependencies: [
                "SkyrosStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        // Observers of fetches and rows: registry, result diffs, the async sequences.
        .target(
            name: "SkyrosObservation",
            dependencies: [
                "SkyrosStack",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        // The change log and the feed that brings other processes' commits (listener, cursor, scheduling).
        .target(
            name: "SkyrosSync",
            dependencies: [
                "SkyrosStack",
                .product(name: "Crypto", package: "swift-crypto"),  // SHA-256 for the hint keys' tags
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        // The public façade: DataStack (start, read/write, run, shutdown), its configuration, and the wiring of
        // the layers below.
        .target(
            name: "Skyros",
            dependencies: [
                "SkyrosPostgres",
                "SkyrosMigrations",
                "SkyrosStore",
                "SkyrosStack",
                "SkyrosObservation",
                "SkyrosSync",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The test kit apps ship their tests with (a schema per test, in-memory stacks, a stack double, starters
        // that fail or wait, `eventually`, a log recorder). Above the façade; no testing framework: it works with
        // swift-testing and XCTest alike.
        .target(
            name: "SkyrosTesting",
            dependencies: [
                "Skyros",
                "SkyrosPostgres",
                "SkyrosMigrations",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "migrate",
            dependencies: [
                "SkyrosMigrations",
                "SkyrosPostgres",
                "SkyrosSync",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "skyros-demo",
            dependencies: [
                "Skyros",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The README's Quickstart as a program (the same text; QuickstartTests compare them and run it twice):
        // `swift run skyros-quickstart` in a checkout. Not a product.
        .executableTarget(
            name: "skyros-quickstart",
            dependencies: ["Skyros"],
            swiftSettings: swiftSettings
        ),
        // The job-queue example (Examples/JobQueue/README.md): worker processes claiming jobs with SKIP LOCKED in
        // interactive transactions, the same loop on raw libpq, and the benchmark comparing them. Built with the
        // package (its test spawns it); not a product.
        .executableTarget(
            name: "skyros-job-queue",
            dependencies: ["Skyros", "SkyrosPostgres", "SkyrosTesting"],
            path: "Examples/JobQueue",
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        // Used only by the multi-process tests; not products.
        .target(
            name: "SkyrosTestFixtures",
            dependencies: ["Skyros"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "skyros-test-node",
            dependencies: [
                "Skyros",
                "SkyrosPostgres",
                "SkyrosTestFixtures",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // What the test targets share beyond SkyrosTesting, which it re-exports (the server under test, its
        // restarts, child processes, the swift-testing form of `eventually`); not a product.
        .target(
            name: "SkyrosTestSupport",
            dependencies: ["SkyrosTesting", "SkyrosPostgres", .product(name: "Logging", package: "swift-log")],
            path: "Tests/SkyrosTestSupport",
            swiftSettings: swiftSettings
        ),
        // Entities, predicate helpers and observer helpers shared by the tests with and without a server.
        .target(
            name: "SkyrosTestEntities",
            dependencies: ["SkyrosStore", "SkyrosObservation"],
            path: "Tests/SkyrosTestEntities",
            swiftSettings: swiftSettings
        ),
        // Tests that need no server (no `DATABASE_URL`): state machines, codecs, SQL text, caches, the change
        // cursor, observers, in-memory stacks, the test kit. Folders mirror the layers (Store/, Stack/, Observation/,
        // Sync/, Testing/).
        .testTarget(
            name: "SkyrosUnitTests",
            dependencies: [
                "Skyros", "SkyrosStore", "SkyrosStack", "SkyrosObservation", "SkyrosSync", "SkyrosPostgres",
                "SkyrosTestEntities", "SkyrosTestFixtures", "SkyrosTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SkyrosPostgresTests",
            dependencies: [
                "SkyrosPostgres", "SkyrosTestSupport", .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SkyrosMigrationsTests",
            dependencies: [
                "SkyrosMigrations", "SkyrosPostgres", "SkyrosTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SkyrosTests",
            dependencies: [
                "Skyros", "SkyrosPostgres", "SkyrosTestEntities", "SkyrosTestFixtures", "SkyrosTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
