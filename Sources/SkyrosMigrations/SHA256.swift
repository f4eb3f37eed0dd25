/// SHA-256 (FIPS 180-4), written in Swift so the migrator needs no crypto dependency.
///
/// Used for migration checksums and for the advisory-lock key. Not constant-time and not meant for secrets.
///
/// ```swift
/// let hex = SHA256.hash(Array("abc".utf8)).hexString
/// // ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
/// ```
package struct SHA256: Sendable {
    /// A 32-byte SHA-256 digest.
    package struct Digest: Sendable, Hashable, CustomStringConvertible {
        /// The 32 bytes of the digest.
        package let bytes: [UInt8]

        /// The digest as 64 lowercase hexadecimal characters.
        package var hexString: String {
            let digits: [Character] = Array("0123456789abcdef")
            var text = ""
            text.reserveCapacity(64)
            for byte in self.bytes {
                text.append(digits[Int(byte >> 4)])
                text.append(digits[Int(byte & 0x0f)])
            }
            return text
        }

        package var description: String { self.hexString }
    }

    private static let k: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    private var state: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]
    private var buffer: [UInt8] = []
    /// Bytes already compressed (whole 64-byte blocks).
    private var length: UInt64 = 0

    /// A hasher with no input yet.
    package init() {
        self.buffer.reserveCapacity(64)
    }

    /// Hashes `bytes` in one call.
    package static func hash<Bytes: Sequence>(_ bytes: Bytes) -> Digest where Bytes.Element == UInt8 {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// Hashes the UTF-8 bytes of `text`.
    package static func hash(_ text: String) -> Digest { self.hash(text.utf8) }

    /// Adds bytes to the message.
    package mutating func update<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 { self.append(bytes) }

    // Concrete overloads, specialised here: a generic call that is not specialised (from another module)
    // iterates through witness tables byte by byte, several times slower for a hint's tag.

    /// Adds bytes to the message.
    package mutating func update(_ bytes: [UInt8]) { self.append(bytes) }
    /// Adds bytes to the message.
    package mutating func update(_ bytes: ArraySlice<UInt8>) { self.append(bytes) }
    /// Adds a string's UTF-8 bytes to the message.
    package mutating func update(_ bytes: String.UTF8View) { self.append(bytes) }
    /// Adds a substring's UTF-8 bytes to the message.
    package mutating func update(_ bytes: Substring.UTF8View) { self.append(bytes) }

    @inline(__always)
    private mutating func append<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        for byte in bytes {
            self.buffer.append(byte)
            if self.buffer.count == 64 {
                self.compress()
                self.buffer.removeAll(keepingCapacity: true)
            }
        }
    }

    /// Pads the message and returns its digest.
    package mutating func finalize() -> Digest {
        let messageBits = (self.length &+ UInt64(self.buffer.count)) &* 8
        self.buffer.append(0x80)
        if self.buffer.count > 56 {
            while self.buffer.count < 64 { self.buffer.append(0) }
            self.compress()
            self.buffer.removeAll(keepingCapacity: true)
        }
        while self.buffer.count < 56 { self.buffer.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) {
            self.buffer.append(UInt8(truncatingIfNeeded: messageBits >> UInt64(shift)))
        }
        self.compress()
        self.buffer.removeAll()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for word in self.state {
            bytes.append(UInt8(truncatingIfNeeded: word >> 24))
            bytes.append(UInt8(truncatingIfNeeded: word >> 16))
            bytes.append(UInt8(truncatingIfNeeded: word >> 8))
            bytes.append(UInt8(truncatingIfNeeded: word))
        }
        return Digest(bytes: bytes)
    }

    /// Processes the 64-byte block in `buffer`.
    private mutating func compress() {
        self.length &+= 64
        var w = [UInt32](repeating: 0, count: 64)
        for i in 0..<16 {
            w[i] = UInt32(self.buffer[i * 4]) << 24 | UInt32(self.buffer[i * 4 + 1]) << 16
                | UInt32(self.buffer[i * 4 + 2]) << 8 | UInt32(self.buffer[i * 4 + 3])
        }
        for i in 16..<64 {
            let s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
            let s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
            w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
        }
        var a = self.state[0], b = self.state[1], c = self.state[2], d = self.state[3]
        var e = self.state[4], f = self.state[5], g = self.state[6], h = self.state[7]
        for i in 0..<64 {
            let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
            let choice = (e & f) ^ (~e & g)
            let t1 = h &+ s1 &+ choice &+ Self.k[i] &+ w[i]
            let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
            let majority = (a & b) ^ (a & c) ^ (b & c)
            let t2 = s0 &+ majority
            h = g
            g = f
            f = e
            e = d &+ t1
            d = c
            c = b
            b = a
            a = t1 &+ t2
        }
        self.state[0] &+= a
        self.state[1] &+= b
        self.state[2] &+= c
        self.state[3] &+= d
        self.state[4] &+= e
        self.state[5] &+= f
        self.state[6] &+= g
        self.state[7] &+= h
    }
}

@inline(__always)
private func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
