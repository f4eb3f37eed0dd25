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
    var pid: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let rc = posix_spawn(&pid, path, nil, nil, argv, environ)
    guard rc == 0 else { throw PostgresError(kind: .invalidConfiguration, message: "posix_spawn \(path) failed: \(rc)") }
    return await exitStatus(of: pid)
}
