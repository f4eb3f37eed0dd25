import Foundation
import Synchronization

extension UUID {
    /// A random (version 4) UUID from the system generator (`getrandom`). `UUID()` in swift-corelibs-foundation
    /// opens `/dev/urandom` on every call, which is too slow for one id per write.
    package static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        return UUID(version: 4, high: generator.next(), low: generator.next())
    }

    /// A commit id: a stack's random 64-bit prefix and its commit sequence number (an RFC 9562 version 8 UUID).
    /// A stack's ids sort, as PostgreSQL compares `uuid`s (byte by byte), in the order its writes were queued,
    /// so a group of consecutive writes is recorded as one range (see `PostgresStore.recordCommitted`); making
    /// one costs no system call.
    package init(commitPrefix prefix: UInt64, sequence: UInt64) {
        self.init(version: 8, high: prefix, low: sequence & Self.commitSequenceMask)
    }

    /// A random prefix for a stack's commit ids; two stacks share one with probability about 2⁻⁶⁰.
    package static func commitPrefix() -> UInt64 {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }

    /// The sequence number of a commit id (62 bits: the variant takes the top two).
    package var commitSequence: UInt64 {
        withUnsafeBytes(of: self.uuid) { raw in
            raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self).bigEndian & Self.commitSequenceMask
        }
    }

    private static let commitSequenceMask: UInt64 = (1 << 62) - 1

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
