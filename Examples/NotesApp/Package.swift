// swift-tools-version:6.1
// An app's own tests on SkyrosTesting alone: the `Notes` library (two entities, migrations, a service written
// against `DataStackProtocol`) and its swift-testing suite, every test on PostgreSQL (a schema of its own) and on
// the in-memory stack. No server framework, so that CI builds it quickly: `./smoke` from this directory.
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its directory (whatever the clone is called).
let skyros = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
    .lastPathComponent

let swiftSettings: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "NotesApp",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "../..")
    ],
    targets: [
        // The app: entities, migrations (a resource, so tests and the app find them wherever they run) and
        // `NotesService`.
        .target(
            name: "Notes",
            dependencies: [.product(name: "Skyros", package: skyros)],
            resources: [.copy("migrations")],
            swiftSettings: swiftSettings
        ),
        // The app's tests: only the app and the test kit.
        .testTarget(
            name: "NotesTests",
            dependencies: [
                "Notes",
                .product(name: "Skyros", package: skyros),
                .product(name: "SkyrosTesting", package: skyros),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
