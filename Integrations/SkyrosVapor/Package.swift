// swift-tools-version:6.1
// SkyrosVapor: runs a Skyros DataStack inside a Vapor application (`app.skyros`, `req.skyros`, a lifecycle
// handler that starts the stack at boot and drains its commit queue at shutdown). Its own package, so that
// Vapor and SwiftNIO never reach the users of Skyros alone.
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its directory (whatever the clone is called).
let skyros = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    .lastPathComponent

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "SkyrosVapor",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "SkyrosVapor", targets: ["SkyrosVapor"])
    ],
    dependencies: [
        .package(path: "../.."),
        .package(url: "https://github.com/vapor/vapor.git", from: "4.122.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
    ],
    targets: [
        .target(
            name: "SkyrosVapor",
            dependencies: [
                .product(name: "Skyros", package: skyros),
                .product(name: "Vapor", package: "vapor"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        )
        // Its tests are in Examples/VaporTickets (SkyrosVaporTests), so that CI builds Vapor once.
    ]
)
