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
        let u = self.uuid
        let low = [u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return low & Self.commitSequenceMask
    }

    private static let commitSequenceMask: UInt64 = (1 << 62) - 1

    /// The UUID of `high` and `low` (big-endian), with `version` and RFC 9562's variant set.
    private init(version: UInt8, high: UInt64, low: UInt64) {
        func byte(_ value: UInt64, _ index: Int) -> UInt8 { UInt8(truncatingIfNeeded: value >> (56 - 8 * index)) }
        self = UUID(uuid: (
            byte(high, 0), byte(high, 1), byte(high, 2), byte(high, 3), byte(high, 4), byte(high, 5),
            (byte(high, 6) & 0x0F) | (version << 4), byte(high, 7),
            (byte(low, 0) & 0x3F) | 0x80, byte(low, 1), byte(low, 2), byte(low, 3), byte(low, 4), byte(low, 5),
            byte(low, 6), byte(low, 7)))
    }
}
