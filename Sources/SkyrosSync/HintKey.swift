internal import Crypto
import SkyrosStore
import SkyrosStack

/// The secret that authenticates the hints carrying their entry (see ``ChangeLog/Hint``).
///
/// Any role that can connect to the database can `pg_notify` on any channel: without this, such a role could
/// send a hint whose announced row a stack would put into its cache (cache poisoning), or one naming the next
/// position and transaction id so that the real entry is skipped (a stale cache). The writing transaction
/// computes the tag on the server, from two random 64-byte keys kept in the change log's state table (readable
/// only with the privileges that table grants, like the log itself): `SHA-256(outer ‖ SHA-256(inner ‖ message))`,
/// truncated to 128 bits. A stack reads the keys with every log read and acts on a hint's entry only when its
/// tag verifies; any other hint makes it read the log, which table privileges protect.
///
/// This is HMAC-SHA-256's construction but not HMAC itself: HMAC derives both pads from one key (they differ
/// by `0x6a` in every byte), whereas these two keys are drawn independently, so `HMAC<SHA256>` cannot compute
/// the tags that the server's SQL computes and existing state tables hold. The tag is built here from
/// swift-crypto's `SHA256`, byte for byte what the SQL computes.
struct HintKey: Sendable {
    /// The inner and the outer key, 64 bytes each (one SHA-256 block).
    private let inner: [UInt8]
    private let outer: [UInt8]

    /// The tag's length in bytes (32 hex digits in the hint).
    static let tagBytes = 16

    /// Reads the keys as the log's read returns them: the inner key's 64 bytes then the outer key's, in hex.
    init?(hex: some StringProtocol) {
        guard let bytes = Self.bytes(hex: hex.utf8), bytes.count == 128 else { return nil }
        (self.inner, self.outer) = (Array(bytes[0..<64]), Array(bytes[64..<128]))
    }

    /// The tag of the message made of `parts`, concatenated.
    func tag(_ parts: [Substring.UTF8View]) -> [UInt8] {
        var message = self.inner
        message.reserveCapacity(self.inner.count + parts.reduce(0) { $0 + $1.count })
        for part in parts { message.append(contentsOf: part) }
        var outer = SHA256()
        outer.update(data: self.outer)
        outer.update(data: Array(SHA256.hash(data: message)))
        return Array(outer.finalize().prefix(Self.tagBytes))
    }

    /// Whether `hex` is the tag of the message made of `parts` (compared in constant time).
    func verifies(_ hex: Substring, of parts: [Substring.UTF8View]) -> Bool {
        guard let given = Self.bytes(hex: hex.utf8), given.count == Self.tagBytes else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(self.tag(parts), given) { difference |= a ^ b }
        return difference == 0
    }

    private static func bytes(hex: some Collection<UInt8>) -> [UInt8]? {
        guard hex.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.count / 2)
        var high: UInt8?
        for digit in hex {
            let value: UInt8
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = digit - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }
}
