// swift-tools-version:6.1
// Benchmarks live in their own package so their dependencies never reach the library's users.
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its directory (whatever the clone is called).
let skyros = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("..").standardized
    .lastPathComponent

let package = Package(
    name: "SkyrosBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // Only for comparison: PostgresNIO on the same operations.
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
    ],
    targets: [
        .systemLibrary(name: "CLibPQRaw", pkgConfig: "libpq", providers: [.apt(["libpq-dev"]), .brew(["libpq"])]),
        // The baseline: the same libpq calls made directly from C, timed in C.
        .target(name: "RawLibPQ", dependencies: ["CLibPQRaw"], cSettings: [.unsafeFlags(["-I/usr/include/postgresql", "-O2"])]),
        .executableTarget(
            name: "skyros-bench",
            dependencies: [
                "RawLibPQ",
                .product(name: "SkyrosPostgres", package: skyros),
                .product(name: "Skyros", package: skyros),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
