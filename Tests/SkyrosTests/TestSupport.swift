import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

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

extension NodeProcess {
    /// Starts `skyros-test-node <arguments>`.
    static func spawn(_ arguments: [String]) throws -> NodeProcess {
        try self.spawn(TestNode.executablePath, arguments)
    }
}

/// Runs `body` and returns the error it throws (records an issue when it does not throw).
func thrownError(_ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async -> (any Error)? {
    do {
        try await body()
        Issue.record("expected an error", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}
