import Foundation

/// A value protected by a lock: `withLock { value in … }`.
///
/// Skyros uses this instead of `Synchronization.Mutex` so that ThreadSanitizer sees the synchronisation: the
/// lock is a pthread mutex (through `NSLock`), which TSan intercepts, whereas the standard library's `Mutex`
/// is compiled without TSan instrumentation and made TSan report false races (and crash while reporting them).
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only read or written inside `withLock`, under `lock`.
    private var value: Value
    private let lock = NSLock()

    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value. Never `await` or block inside it.
    @inline(__always)
    package func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        self.lock.lock()
        defer { self.lock.unlock() }
        return try body(&self.value)
    }
}
