// swift-tools-version:6.1
// An example HTTP service on Skyros and Vapor, through SkyrosVapor: its own package, so Vapor and SwiftNIO
// never reach Skyros's users. `swift run VaporTickets` from this directory (DATABASE_URL, PORT).
//
// The `ClashCheck` target proves that Skyros and SkyrosMigrations can be imported beside PostgresNIO, FluentKit and
// Crypto, each one's common names used unqualified (`./smoke` builds it).
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its directory (whatever the clone is called).
let skyros = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    .lastPathComponent

let swiftSettings: [SwiftSetting] = [.swiftLanguageMode(.v6)]

var dependencies: [Package.Dependency] = [
    .package(path: "../.."),
    .package(path: "../../Integrations/SkyrosVapor"),
    .package(url: "https://github.com/vapor/vapor.git", from: "4.122.3"),
]
var targets: [Target] = [
    // The routes, the error mapping and `configure`: a library, so the tests drive the same application.
    .target(
        name: "VaporTicketsApp",
        dependencies: [
            .product(name: "Skyros", package: skyros),
            .product(name: "SkyrosVapor", package: "SkyrosVapor"),
            .product(name: "Vapor", package: "vapor"),
        ],
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "VaporTickets",
        dependencies: ["VaporTicketsApp", .product(name: "Vapor", package: "vapor")],
        swiftSettings: swiftSettings
    ),
    // The SkyrosVapor integration's tests, server-free (an in-memory stack): here, so that CI builds Vapor once.
    .testTarget(
        name: "SkyrosVaporTests",
        dependencies: [
            .product(name: "Skyros", package: skyros),
            .product(name: "SkyrosVapor", package: "SkyrosVapor"),
            .product(name: "VaporTesting", package: "vapor"),
        ],
        swiftSettings: swiftSettings
    ),
    // Against a real PostgreSQL (DATABASE_URL; `./smoke` starts a throw-away one). Each test in its own schema.
    .testTarget(
        name: "VaporTicketsTests",
        dependencies: [
            "VaporTicketsApp",
            .product(name: "Skyros", package: skyros),
            .product(name: "SkyrosPostgres", package: skyros),
            .product(name: "VaporTesting", package: "vapor"),
        ],
        swiftSettings: swiftSettings
    ),
]
do {
    dependencies += [
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/vapor/fluent-kit.git", from: "1.57.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
    ]
    targets.append(
        .target(
            name: "ClashCheck",
            dependencies: [
                .product(name: "Skyros", package: skyros),
                .product(name: "SkyrosMigrations", package: skyros),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "FluentKit", package: "fluent-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "ClashCheck",
            swiftSettings: swiftSettings
        ))
}

let package = Package(
    name: "VaporTickets",
    platforms: [.macOS(.v15)],
    dependencies: dependencies,
    targets: targets
)
