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

/// A child process (usually `skyros-test-node`), its stdout captured in a file.
///
/// Spawned with `posix_spawn` and reaped with `waitpid` on a thread of its own: Foundation's `Process`
/// termination monitoring never fires in the test process here.
struct NodeProcess: Sendable {
    let pid: pid_t
    let outputURL: URL

    /// Starts `skyros-test-node <arguments>`.
    static func spawn(_ arguments: [String]) throws -> NodeProcess {
        try self.spawn(TestNode.executablePath, arguments)
    }

    /// Starts `path <arguments>` with its stdout and stderr in temporary files.
    static func spawn(_ path: String, _ arguments: [String]) throws -> NodeProcess {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("skyros-node-\(UUID().uuidString).out")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, output.path + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard rc == 0 else {
            throw PostgresError(kind: .invalidConfiguration, message: "posix_spawn \(path) failed: \(rc)")
        }
        return NodeProcess(pid: pid, outputURL: output)
    }

    /// Its stdout so far.
    var output: String { (try? String(contentsOf: self.outputURL, encoding: .utf8)) ?? "" }

    /// Its stderr so far (a crash message, an uncaught error).
    var errorOutput: String { (try? String(contentsOf: self.errorURL, encoding: .utf8)) ?? "" }

    /// Stdout and stderr, for a failure message.
    var report: String { "stdout:\n\(self.output)stderr:\n\(self.errorOutput)" }

    private var errorURL: URL { URL(fileURLWithPath: self.outputURL.path + ".err") }

    /// The lines written so far.
    var lines: [String] { self.output.split(separator: "\n").map(String.init) }

    func signal(_ number: Int32) { _ = kill(self.pid, number) }

    /// Waits for the exit: the exit status, or 128 + signal number when killed.
    func exitStatus() async -> Int32 { await SkyrosTestSupport.exitStatus(of: self.pid) }

    func removeOutput() {
        try? FileManager.default.removeItem(at: self.outputURL)
        try? FileManager.default.removeItem(at: self.errorURL)
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
