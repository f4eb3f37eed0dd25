import Foundation
import SkyrosPostgres

#if canImport(Glibc)
import Glibc
#endif

/// Waits for child `pid` to exit, on a thread of its own (`waitpid` blocks): its exit status, or 128 + the signal
/// number when a signal killed it. Foundation's `Process` termination monitoring never fired in the test process
/// here (neither `waitUntilExit()` nor `terminationHandler`), hence `posix_spawn` + this.
public func exitStatus(of pid: pid_t) async -> Int32 {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            // WIFEXITED/WEXITSTATUS are macros: decode by hand.
            let exited = status & 0x7F == 0
            continuation.resume(returning: exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F))
        }
    }
}

/// Runs `path <arguments>` (stdout and stderr inherited) and awaits its exit status.
public func runProcess(_ path: String, _ arguments: [String]) async throws -> Int32 {
    await exitStatus(of: try spawnWithFreshSignals(path, arguments, actions: nil))
}

/// `posix_spawn` with the child's signals as a fresh process has them: none blocked, none ignored.
///
/// A thread of the test process (a Swift concurrency or Dispatch worker) blocks most signals, and a spawned
/// child inherits its thread's mask through `exec`: without this, `SIGTERM` stayed blocked in everything the
/// tests started — PgBouncer started by `scripts/pg-fixture` ignored the fixture's `kill` and outlived the tests.
private func spawnWithFreshSignals(
    _ path: String, _ arguments: [String], actions: UnsafePointer<posix_spawn_file_actions_t>?
) throws -> pid_t {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in [SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM, SIGCHLD, SIGUSR1, SIGUSR2] { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, path, actions, &attributes, argv, environ)
    guard rc == 0 else { throw PGError(kind: .invalidConfiguration, message: "posix_spawn \(path) failed: \(rc)") }
    return pid
}

/// A child process (`skyros-test-node`, `scripts/pg-fixture`), its stdout and stderr captured in files.
///
/// Spawned with `posix_spawn` and reaped with `waitpid` on a thread of its own: Foundation's `Process`
/// termination monitoring never fires in the test process here.
public struct NodeProcess: Sendable {
    public let pid: pid_t
    public let outputURL: URL

    /// Starts `path <arguments>` with its stdout and stderr in temporary files.
    public static func spawn(_ path: String, _ arguments: [String]) throws -> NodeProcess {
        try self.spawn(path, arguments, standardInput: nil)
    }

    /// Starts `path <arguments>` like ``spawn(_:_:)``, its stdin a socket the returned ``NodeInput`` writes
    /// to, for a child that takes commands line by line.
    public static func spawnWithInput(_ path: String, _ arguments: [String]) throws -> (process: NodeProcess, input: NodeInput) {
        // A socket pair rather than a pipe: a write after the child died fails with EPIPE instead of raising
        // SIGPIPE in the test process (`send` with MSG_NOSIGNAL). Close-on-exec, so no other child inherits
        // the test's end and keeps the child's stdin open.
        var descriptors: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &descriptors) == 0 else {
            throw PGError(kind: .invalidConfiguration, message: "socketpair failed: \(errno)")
        }
        let input = NodeInput(descriptor: descriptors[0])
        defer { close(descriptors[1]) }
        return (try self.spawn(path, arguments, standardInput: descriptors[1]), input)
    }

    private static func spawn(_ path: String, _ arguments: [String], standardInput: Int32?) throws -> NodeProcess {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("skyros-node-\(UUID().uuidString).out")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on the child's copy.
        if let standardInput { posix_spawn_file_actions_adddup2(&actions, standardInput, 0) }
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, output.path + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        return NodeProcess(pid: try spawnWithFreshSignals(path, arguments, actions: &actions), outputURL: output)
    }

    /// Its stdout so far.
    public var output: String { (try? String(contentsOf: self.outputURL, encoding: .utf8)) ?? "" }

    /// Its stderr so far (a crash message, an uncaught error).
    public var errorOutput: String { (try? String(contentsOf: self.errorURL, encoding: .utf8)) ?? "" }

    /// Stdout and stderr, for a failure message.
    public var report: String { "stdout:\n\(self.output)stderr:\n\(self.errorOutput)" }

    private var errorURL: URL { URL(fileURLWithPath: self.outputURL.path + ".err") }

    /// The lines written so far.
    public var lines: [String] { self.output.split(separator: "\n").map(String.init) }

    public func signal(_ number: Int32) { _ = kill(self.pid, number) }

    /// Waits for the exit: the exit status, or 128 + signal number when killed.
    public func exitStatus() async -> Int32 { await SkyrosTestSupport.exitStatus(of: self.pid) }

    public func removeOutput() {
        try? FileManager.default.removeItem(at: self.outputURL)
        try? FileManager.default.removeItem(at: self.errorURL)
    }
}

/// The test's end of a child's stdin (see ``NodeProcess/spawnWithInput(_:_:)``); closed when released.
public final class NodeInput: Sendable {
    private let descriptor: Int32

    init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(self.descriptor) }

    /// Writes `line` and a newline; throws when the child is gone.
    public func send(_ line: String) throws {
        let bytes = Array((line + "\n").utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(self.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw PGError(kind: .invalidConfiguration, message: "write to the child's stdin failed: \(errno)") }
            sent += count
        }
    }

    /// Ends the child's stdin (it reads end of file).
    public func finish() { _ = shutdown(self.descriptor, Int32(SHUT_WR)) }
}
