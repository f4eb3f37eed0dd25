/// A position in PostgreSQL's write-ahead log (a log sequence number, `pg_lsn`): a byte offset into the WAL.
///
/// Replication reports every position as an LSN: where a slot's changes become consistent, where a transaction
/// commits, how far a consumer has made changes durable. PostgreSQL writes one as two hexadecimal halves of the
/// 64-bit value, `16/B374D848`, which is what ``description`` gives and ``init(_:)`` reads.
///
/// ```swift
/// let lsn = LSN("16/B374D848")!
/// lsn.rawValue      // 0x16_B374_D848
/// "\(lsn)"          // "16/B374D848"
/// lsn > .invalid    // true
/// ```
///
/// ## Topics
/// - ``invalid``
/// - ``description``
package struct LSN: RawRepresentable, Hashable, Comparable, Sendable, LosslessStringConvertible {
    /// The byte position.
    package var rawValue: UInt64

    /// The position `rawValue`.
    package init(rawValue: UInt64) { self.rawValue = rawValue }

    /// The position `value`.
    package init(_ value: UInt64) { self.rawValue = value }

    /// `0/0`: no position. `START_REPLICATION … LOGICAL 0/0` starts where the slot's consumer last confirmed, and
    /// a standby status update that reports it as flushed leaves the slot as it is.
    package static let invalid = LSN(0)

    /// Parses PostgreSQL's form: 1 to 8 hexadecimal digits (either case), `/`, 1 to 8 hexadecimal digits, and
    /// nothing else, as `pg_lsn` accepts it. `nil` for any other text.
    package init?(_ description: String) {
        let bytes = Array(description.utf8)
        guard let slash = bytes.firstIndex(of: UInt8(ascii: "/")),
            let high = Self.hexadecimal(bytes[..<slash]),
            let low = Self.hexadecimal(bytes[(slash + 1)...])
        else { return nil }
        self.rawValue = high << 32 | low
    }

    /// The value of 1 to 8 hexadecimal digits, or `nil`.
    private static func hexadecimal(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard (1...8).contains(digits.count) else { return nil }
        var value: UInt64 = 0
        for digit in digits {
            let nibble: UInt8
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = digit - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt64(nibble)
        }
        return value
    }

    /// PostgreSQL's form, upper-case hexadecimal without leading zeros: `16/B374D848`, `0/0`.
    package var description: String {
        String(self.rawValue >> 32, radix: 16, uppercase: true) + "/"
            + String(self.rawValue & 0xFFFF_FFFF, radix: 16, uppercase: true)
    }

    /// Orders positions as the WAL does.
    package static func < (lhs: LSN, rhs: LSN) -> Bool { lhs.rawValue < rhs.rawValue }
}

extension PGType {
    /// `pg_lsn`, the type of WAL positions (`pg_current_wal_lsn()`, `pg_replication_slots.confirmed_flush_lsn`).
    package static let pgLSN = PGType(rawValue: 3220)
}

extension LSN: PGCodable {
    /// Sent as `pg_lsn`.
    package static var postgresType: PGType { .pgLSN }

    /// PostgreSQL's `X/X` form.
    package func postgresText() throws -> String? { self.description }

    /// Reads a `pg_lsn` column (or text holding one).
    /// - Throws: ``PGError`` of kind `.decoding` for another column type, or text that is not an LSN.
    package init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        guard type == .pgLSN || type == .text || type == .unknown else { throw typeMismatch(LSN.self, type) }
        guard let value = LSN(String(decoding: bytes, as: UTF8.self)) else { throw decodingError(LSN.self, type, bytes) }
        self = value
    }
}
