import Foundation

/// A time as the replication protocol and `pgoutput` carry it: microseconds since 2000-01-01 00:00:00 UTC
/// (PostgreSQL's epoch), a signed 64-bit count.
///
/// Kept as the integer the server sent, so that no precision is lost; ``date`` converts it.
///
/// ```swift
/// let sent = PGTimestamp(rawValue: 0)
/// sent.date == Date(timeIntervalSince1970: 946_684_800)   // true
/// ```
package struct PGTimestamp: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Microseconds since 2000-01-01 00:00:00 UTC.
    package var rawValue: Int64

    /// The time `rawValue` microseconds after 2000-01-01 00:00:00 UTC.
    package init(rawValue: Int64) { self.rawValue = rawValue }

    /// `date`, to the nearest microsecond.
    package init(_ date: Date) {
        let microseconds = (date.timeIntervalSinceReferenceDate * 1_000_000).rounded()
        guard let value = Int64(exactly: microseconds) else {
            self.rawValue = microseconds < 0 ? .min : .max
            return
        }
        let (sum, overflow) = value.addingReportingOverflow(Self.referenceDateOffset)
        self.rawValue = overflow ? .max : sum
    }

    /// Now, by the system's clock (what a standby status update reports as the client's time).
    package static var now: PGTimestamp { PGTimestamp(Date()) }

    /// Microseconds from PostgreSQL's epoch to Foundation's reference date (2001-01-01): 2000 had 366 days.
    private static let referenceDateOffset: Int64 = 366 * 86_400 * 1_000_000

    /// The same time as a `Date` (whose `Double` keeps microseconds for centuries around 2001).
    package var date: Date {
        Date(timeIntervalSinceReferenceDate: Double(self.rawValue &- Self.referenceDateOffset) / 1_000_000)
    }

    /// The time as `Date` prints it.
    package var description: String { self.date.description }

    /// Orders times.
    package static func < (lhs: PGTimestamp, rhs: PGTimestamp) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// What a ``PGReplicationStream`` delivers: one message of the server's side of the replication protocol
/// (`CopyData` in COPY BOTH mode), in the order the server sent them.
///
/// ```swift
/// for try await message in stream.messages {
///     switch message {
///     case .data(let data): try apply(data.payload)   // one pgoutput message
///     case .keepalive(let keepalive): noteIdle(keepalive.walEnd)
///     }
/// }
/// ```
package enum PGReplicationMessage: Sendable, Hashable {
    /// `XLogData` (`w`): WAL data, for a logical slot one message of its output plugin.
    case data(PGXLogData)
    /// `Primary keepalive message` (`k`): the server's WAL position; sent when it has nothing else to send, and
    /// when it wants a status update (the stream then sends one at once).
    case keepalive(PGPrimaryKeepalive)

    /// How many bytes this message counts for against ``PGReplicationStream/Options/bufferLimit``: its payload,
    /// plus a fixed cost per message, so that a run of small messages counts too.
    var bufferedSize: Int {
        switch self {
        case .data(let data): return data.payload.count + 64
        case .keepalive: return 64
        }
    }

    /// Parses one `CopyData` frame the server sent during `START_REPLICATION`.
    /// - Throws: ``PGError`` of kind `.protocolViolation` for a frame that is not a well-formed `w` or `k`
    ///   message.
    package init(frame: [UInt8]) throws(PGError) {
        let parsed = frame.withUnsafeBytes { bytes in Result { () throws(PGError) in try Self(frame: bytes) } }
        self = try parsed.get()
    }

    /// Parses one `CopyData` frame in libpq's buffer (copying out only the payload).
    init(frame: UnsafeRawBufferPointer) throws(PGError) {
        guard let kind = frame.first else { throw Self.malformed("an empty message") }
        func uint64(at offset: Int) -> UInt64 { frame.loadUnaligned(fromByteOffset: offset, as: UInt64.self).bigEndian }
        switch kind {
        case UInt8(ascii: "w"):
            guard frame.count >= 25 else { throw Self.malformed("an XLogData message of \(frame.count) bytes") }
            self = .data(
                PGXLogData(
                    walStart: LSN(uint64(at: 1)), walEnd: LSN(uint64(at: 9)),
                    sendTime: PGTimestamp(rawValue: Int64(bitPattern: uint64(at: 17))),
                    payload: Array(UnsafeRawBufferPointer(rebasing: frame[25...]))))
        case UInt8(ascii: "k"):
            guard frame.count == 18, frame[17] <= 1 else {
                throw Self.malformed("a keepalive message of \(frame.count) bytes")
            }
            self = .keepalive(
                PGPrimaryKeepalive(
                    walEnd: LSN(uint64(at: 1)), sendTime: PGTimestamp(rawValue: Int64(bitPattern: uint64(at: 9))),
                    replyRequested: frame[17] == 1))
        default:
            throw Self.malformed("a message of unknown type \(kind)")
        }
    }

    private static func malformed(_ what: String) -> PGError {
        PGError(kind: .protocolViolation, message: "the server sent \(what) during replication")
    }
}

/// `XLogData`: a piece of WAL the server streams. For a logical slot each one holds one message of the output
/// plugin (with `pgoutput`, one of its protocol messages).
package struct PGXLogData: Sendable, Hashable {
    /// Where this data starts in the WAL. For a logical slot, the position of the change it decodes; for a
    /// `pgoutput` Commit message, the end of the transaction's commit record (the position to confirm once the
    /// transaction is durable).
    package var walStart: LSN
    /// The server's current end of WAL (for a logical slot, the same as ``walStart``).
    package var walEnd: LSN
    /// When the server sent it, by its clock.
    package var sendTime: PGTimestamp
    /// The data: for a logical slot, one output plugin message.
    package var payload: [UInt8]

    /// A message as the server sends it (tests build them by hand).
    package init(walStart: LSN, walEnd: LSN, sendTime: PGTimestamp, payload: [UInt8]) {
        self.walStart = walStart
        self.walEnd = walEnd
        self.sendTime = sendTime
        self.payload = payload
    }
}

/// `Primary keepalive message`: the server's position, with or without a request for an immediate status update.
package struct PGPrimaryKeepalive: Sendable, Hashable {
    /// The end of the WAL the server has sent: every change before it that the slot's consumer should see was
    /// delivered before this message.
    package var walEnd: LSN
    /// When the server sent it, by its clock.
    package var sendTime: PGTimestamp
    /// Whether the server asked for a status update at once (it disconnects a client that stays silent for
    /// `wal_sender_timeout`).
    package var replyRequested: Bool

    /// A keepalive as the server sends it.
    package init(walEnd: LSN, sendTime: PGTimestamp, replyRequested: Bool) {
        self.walEnd = walEnd
        self.sendTime = sendTime
        self.replyRequested = replyRequested
    }
}

/// `Standby status update` (`r`): what the client tells the server about its progress. For a logical slot the
/// server moves the slot's `confirmed_flush_lsn` to ``flushed`` and may then recycle the WAL before it, so
/// ``flushed`` must never pass what the consumer has made durable.
package struct PGStandbyStatusUpdate: Sendable, Hashable {
    /// The end of what the client received (shows as `write_lsn` in `pg_stat_replication`).
    package var written: LSN
    /// The end of what the client made durable: the slot's new `confirmed_flush_lsn` (``LSN/invalid`` leaves the
    /// slot as it is).
    package var flushed: LSN
    /// The end of what the client applied.
    package var applied: LSN
    /// The client's clock when it sent the update.
    package var clientTime: PGTimestamp
    /// Whether the server should answer at once with a keepalive.
    package var replyRequested: Bool

    /// An update with these positions.
    package init(written: LSN, flushed: LSN, applied: LSN, clientTime: PGTimestamp, replyRequested: Bool = false) {
        self.written = written
        self.flushed = flushed
        self.applied = applied
        self.clientTime = clientTime
        self.replyRequested = replyRequested
    }

    /// The message's 34 bytes: `r`, the three positions, the time (all big-endian), the reply flag.
    package var bytes: [UInt8] {
        var bytes: [UInt8] = [UInt8(ascii: "r")]
        bytes.reserveCapacity(34)
        for value in [self.written.rawValue, self.flushed.rawValue, self.applied.rawValue, UInt64(bitPattern: self.clientTime.rawValue)] {
            withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
        }
        bytes.append(self.replyRequested ? 1 : 0)
        return bytes
    }
}
