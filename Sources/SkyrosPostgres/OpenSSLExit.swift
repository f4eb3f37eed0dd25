import Foundation

/// Keeps OpenSSL (libpq's TLS library) from freeing its global state in an `atexit` handler.
///
/// By default OpenSSL registers `OPENSSL_cleanup` with `atexit`. A connection's thread that ends while the
/// process exits — a program returning from `main` just after closing its connections, whose threads are still
/// finishing — then runs OpenSSL's thread-exit cleanup on a lock that handler already freed, and the process
/// dies with SIGSEGV in `CRYPTO_THREAD_read_lock` instead of exiting with its status (seen in `migrate`
/// under ThreadSanitizer). Before the first connection OpenSSL is initialised with `OPENSSL_INIT_NO_ATEXIT`
/// (OpenSSL 1.1.1b and later), so no handler is registered: the memory goes back to the system with the process.
/// The function is looked up at run time, since libpq may be built without OpenSSL; then nothing happens.
enum OpenSSLExit {
    /// `OPENSSL_INIT_NO_ATEXIT` from `openssl/crypto.h`.
    private static let noAtExit: UInt64 = 0x0008_0000

    /// Whether OpenSSL was found and initialised without its exit handler (computed once, before the first
    /// connection opens).
    static let prepared: Bool = {
        guard let process = dlopen(nil, RTLD_NOW) else { return false }
        defer { dlclose(process) }
        guard let symbol = dlsym(process, "OPENSSL_init_crypto") else { return false }
        typealias Initialize = @convention(c) (UInt64, OpaquePointer?) -> Int32
        return unsafeBitCast(symbol, to: Initialize.self)(Self.noAtExit, nil) == 1
    }()
}
