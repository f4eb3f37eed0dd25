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
        .executable(name: "migrate", targets: ["migrate"]),
        .executable(name: "skyros-demo", targets: ["skyros-demo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
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
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SkyrosMigrations",
            dependencies: [
                "SkyrosPostgres",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Skyros",
            dependencies: [
                "SkyrosPostgres",
                "SkyrosMigrations",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "migrate",
            dependencies: [
                "SkyrosMigrations",
                "SkyrosPostgres",
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
        // What the test targets share (the server under test, child processes, deadline polls); not a product.
        .target(
            name: "SkyrosTestSupport",
            dependencies: ["SkyrosPostgres"],
            path: "Tests/SkyrosTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SkyrosPostgresTests",
            dependencies: ["SkyrosPostgres", "SkyrosTestSupport", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SkyrosMigrationsTests",
            dependencies: ["SkyrosMigrations", "SkyrosPostgres", "SkyrosTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SkyrosTests",
            dependencies: [
                "Skyros", "SkyrosPostgres", "SkyrosTestFixtures", "SkyrosTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
