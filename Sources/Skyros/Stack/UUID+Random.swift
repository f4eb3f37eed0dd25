import Foundation
import Synchronization

extension UUID {
    /// A random (version 4) UUID from the system generator (`getrandom`). `UUID()` in swift-corelibs-foundation
    /// opens `/dev/urandom` on every call, which showed up as 7% of the commit queue's CPU: one id per write.
    static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        return UUID(version: 4, high: generator.next(), low: generator.next())
    }

    /// A commit id: unique, not secret. A random 64-bit prefix drawn once per process and a counter (an RFC 9562
    /// version 8 UUID), so a queued write costs no system call for its id (a `getrandom` per write was 3% of
    /// the queue's CPU). Two processes share a prefix with probability about 2⁻⁵⁸.
    static func commitID() -> UUID {
        UUID(version: 8, high: CommitIDs.prefix, low: CommitIDs.counter.wrappingAdd(1, ordering: .relaxed).newValue)
    }

    private init(version: UInt8, high: UInt64, low: UInt64) {
        var bytes = (high.bigEndian, low.bigEndian)
        self = withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | (version << 4)
            raw[8] = (raw[8] & 0x3F) | 0x80   // RFC 9562 variant
            return UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                               raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
        }
    }
}

private enum CommitIDs {
    static let prefix: UInt64 = {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }()
    static let counter = Atomic<UInt64>(0)
}
