import Foundation

/// Where the `skyros-test-node` helper executable is: next to the running test bundle (so the scratch path
/// and sanitizer of this build are used), else under `<package root>/.build/debug`.
enum TestNode {
    static var executablePath: String {
        let besideBundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("skyros-test-node").path
        if FileManager.default.isExecutableFile(atPath: besideBundle) { return besideBundle }
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { root.deleteLastPathComponent() }
        return root.appendingPathComponent(".build/debug/skyros-test-node").path
    }
}
