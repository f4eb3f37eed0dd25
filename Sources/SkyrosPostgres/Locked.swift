#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value protected by a lock: `withLock { value in … }`.
///
/// The lock is a pthread mutex, which ThreadSanitizer intercepts (the standard library's `Mutex` is compiled
/// without TSan instrumentation and made TSan report false races). On Linux it is an adaptive mutex: a
/// contended lock spins briefly before the thread sleeps, because every critical section here is a few
/// dictionary operations and a futex sleep/wake pair costs far more than waiting them out.
///
/// A reference (copies share the value and the lock). The mutex lives in the same allocation as the value:
/// a queued write creates a few of these, and a separately allocated mutex was one more `malloc` each.
package struct Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: the value is only read or written inside `withLock`, under the mutex.
    private let storage: Storage

    package init(_ value: Value) {
        self.storage = Storage.make(value)
    }

    /// Runs `body` with exclusive access to the value. Never `await` or block inside it.
    @inline(__always)
    package func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try self.storage.withUnsafeMutablePointers { value, mutex in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }

    /// The value (header) and its mutex (the one tail element) in one allocation.
    private final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
        static func make(_ value: Value) -> Storage {
            let buffer = Storage.create(minimumCapacity: 1) { _ in value }
            buffer.withUnsafeMutablePointerToElements { mutex in
                var attributes = pthread_mutexattr_t()
                pthread_mutexattr_init(&attributes)
                #if canImport(Glibc)
                pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
                #endif
                pthread_mutex_init(mutex, &attributes)
                pthread_mutexattr_destroy(&attributes)
            }
            return unsafeDowncast(buffer, to: Storage.self)
        }

        deinit {
            // The header (the value) is destroyed by ManagedBuffer; the mutex is this class's to destroy.
            _ = self.withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
        }
    }
}
