// swift-tools-version:6.1
// SkyrosMacros: the `@Entity` macro, which derives an entity's table name, column list and `CodingKeys` from the
// struct's stored properties. Its own package, so that swift-syntax (a long clean build) reaches only the apps
// that use the macro, never the users of Skyros alone.
import CompilerPluginSupport
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
    name: "SkyrosMacros",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "SkyrosMacros", targets: ["SkyrosMacros"])
    ],
    dependencies: [
        .package(path: "../.."),
        .package(url: "https://github.com/swiftlang/swift-syntax.git", from: "603.0.1"),
    ],
    targets: [
        // The compiler plug-in: the expansions, run by the compiler at build time (never linked into an app).
        .macro(
            name: "SkyrosMacrosPlugin",
            dependencies: [
                .product(name: "SwiftSyntax", package: "swift-syntax"),
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
                .product(name: "SwiftDiagnostics", package: "swift-syntax"),
                .product(name: "SwiftSyntaxBuilder", package: "swift-syntax"),
            ],
            swiftSettings: swiftSettings
        ),
        // The macros' declarations, with Skyros re-exported: `import SkyrosMacros` is all an entity file needs.
        .target(
            name: "SkyrosMacros",
            dependencies: [
                "SkyrosMacrosPlugin",
                .product(name: "Skyros", package: skyros),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SkyrosMacrosTests",
            dependencies: [
                "SkyrosMacros",
                "SkyrosMacrosPlugin",
                .product(name: "SkyrosTesting", package: skyros),
                .product(name: "SkyrosMigrations", package: skyros),
                .product(name: "SwiftSyntaxMacrosTestSupport", package: "swift-syntax"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
