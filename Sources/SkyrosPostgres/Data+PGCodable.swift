import Foundation

private let hexDigits = Array("0123456789abcdef".utf8)

extension Data: PGArrayElement {
    public static var postgresType: PGType { .bytea }
    public static var postgresArrayType: PGType { .byteaArray }
    public func postgresText() throws -> String? {
        var out = [UInt8]()
        out.reserveCapacity(2 + self.count * 2)
        out.append(UInt8(ascii: "\\"))
        out.append(UInt8(ascii: "x"))
        for byte in self {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        guard type == .bytea || type == .unknown else { throw typeMismatch(Data.self, type) }
        guard bytes.count >= 2, bytes[bytes.startIndex] == UInt8(ascii: "\\"),
            bytes[bytes.startIndex + 1] == UInt8(ascii: "x"), bytes.count % 2 == 0
        else { throw decodingError(Data.self, type, bytes) }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var data = Data(capacity: (bytes.count - 2) / 2)
        var index = bytes.startIndex + 2
        while index < bytes.endIndex {
            guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else {
                throw decodingError(Data.self, type, bytes)
            }
            data.append(high << 4 | low)
            index += 2
        }
        self = data
    }
}
