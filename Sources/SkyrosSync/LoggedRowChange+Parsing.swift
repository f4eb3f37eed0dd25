import Foundation
import SkyrosStore
import SkyrosStack

extension LoggedRowChange {
    /// Decodes a change list — a JSON array of `{"t": …, "o": …, "i": …, "k": …, "v": …}` objects in any key
    /// order and spacing: as ``json(_:)`` writes it, and as PostgreSQL prints a `jsonb` back.
    ///
    /// Every hint another stack receives and every log read decodes one, on the path from another process's
    /// commit to an observer's event; this reads the bytes once, where `JSONDecoder` on Linux builds a whole
    /// value tree first. Falls back to `JSONDecoder` for anything outside that shape.
    static func decodeList(_ text: some StringProtocol) throws -> [LoggedRowChange] {
        if let parsed = self.readList(text) { return parsed }
        return try JSONDecoder().decode([LoggedRowChange].self, from: Data(text.utf8))
    }

    /// The single-pass reader behind ``decodeList(_:)``: `nil` for anything outside the change-list shape
    /// (unknown keys, nested values, malformed text).
    static func readList(_ text: some StringProtocol) -> [LoggedRowChange]? {
        var parser = ChangeListParser(Array(text.utf8))
        return parser.parse()
    }
}

/// A single-pass reader of the change-list JSON (see ``LoggedRowChange/readList(_:)``).
private struct ChangeListParser {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func parse() -> [LoggedRowChange]? {
        guard self.take(UInt8(ascii: "[")) else { return nil }
        var changes: [LoggedRowChange] = []
        if self.take(UInt8(ascii: "]")) { return self.atEnd ? changes : nil }
        repeat {
            guard let change = self.object() else { return nil }
            changes.append(change)
        } while self.take(UInt8(ascii: ","))
        guard self.take(UInt8(ascii: "]")), self.atEnd else { return nil }
        return changes
    }

    private var atEnd: Bool {
        mutating get {
            self.skipSpace()
            return self.index == self.bytes.count
        }
    }

    private mutating func object() -> LoggedRowChange? {
        guard self.take(UInt8(ascii: "{")) else { return nil }
        var table: String?
        var type: UInt32?
        var id: String?
        var kind: String?
        var version: Int64?
        var base: Int64?
        var layout: String?
        var row: [[String?]]?
        if !self.take(UInt8(ascii: "}")) {
            repeat {
                guard let key = self.string(), self.take(UInt8(ascii: ":")) else { return nil }
                switch key {
                case "t": table = self.string()
                case "i": id = self.string()
                case "k": kind = self.string()
                case "o": type = self.integer().flatMap { UInt32(exactly: $0) }
                case "v":
                    if !self.takeNull() {
                        guard let value = self.integer() else { return nil }
                        version = value
                    }
                case "b":
                    guard let value = self.integer() else { return nil }
                    base = value
                case "h": layout = self.string()
                case "r":
                    guard let cells = self.rowCells() else { return nil }
                    row = cells
                default: return nil
                }
            } while self.take(UInt8(ascii: ","))
            guard self.take(UInt8(ascii: "}")) else { return nil }
        }
        guard let table, let type, let id, let kind else { return nil }
        return LoggedRowChange(table: table, type: type, id: id, kind: kind, version: version, base: base, layout: layout, row: row)
    }

    /// An announced row: an array of `[string-or-null, …]` arrays.
    private mutating func rowCells() -> [[String?]]? {
        guard self.take(UInt8(ascii: "[")) else { return nil }
        var cells: [[String?]] = []
        if self.take(UInt8(ascii: "]")) { return cells }
        repeat {
            guard self.take(UInt8(ascii: "[")) else { return nil }
            var cell: [String?] = []
            if !self.take(UInt8(ascii: "]")) {
                repeat {
                    if self.takeNull() {
                        cell.append(nil)
                    } else {
                        guard let text = self.string() else { return nil }
                        cell.append(text)
                    }
                } while self.take(UInt8(ascii: ","))
                guard self.take(UInt8(ascii: "]")) else { return nil }
            }
            cells.append(cell)
        } while self.take(UInt8(ascii: ","))
        guard self.take(UInt8(ascii: "]")) else { return nil }
        return cells
    }

    private mutating func skipSpace() {
        while self.index < self.bytes.count {
            switch self.bytes[self.index] {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\t"), UInt8(ascii: "\r"): self.index += 1
            default: return
            }
        }
    }

    /// Consumes `byte` (after any whitespace) when it comes next.
    private mutating func take(_ byte: UInt8) -> Bool {
        self.skipSpace()
        guard self.index < self.bytes.count, self.bytes[self.index] == byte else { return false }
        self.index += 1
        return true
    }

    private mutating func takeNull() -> Bool {
        self.skipSpace()
        guard self.bytes[self.index...].starts(with: "null".utf8) else { return false }
        self.index += 4
        return true
    }

    private mutating func integer() -> Int64? {
        self.skipSpace()
        let start = self.index
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "-") { self.index += 1 }
        while self.index < self.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.bytes[self.index]) {
            self.index += 1
        }
        return Int64(String(decoding: self.bytes[start..<self.index], as: UTF8.self))
    }

    /// A JSON string literal, escapes decoded.
    private mutating func string() -> String? {
        guard self.take(UInt8(ascii: "\"")) else { return nil }
        var out: [UInt8] = []
        while self.index < self.bytes.count {
            let byte = self.bytes[self.index]
            self.index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard self.index < self.bytes.count else { return nil }
                let escape = self.bytes[self.index]
                self.index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    guard var scalar = self.hex4() else { return nil }
                    if (0xD800..<0xDC00).contains(scalar) {
                        // A surrogate pair: the low half must follow as another \u escape.
                        guard self.bytes[self.index...].starts(with: "\\u".utf8) else { return nil }
                        self.index += 2
                        guard let low = self.hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let character = Unicode.Scalar(scalar) else { return nil }
                    out.append(contentsOf: String(character).utf8)
                default: return nil
                }
            default:
                out.append(byte)
            }
        }
        return nil
    }

    private mutating func hex4() -> UInt32? {
        guard self.index + 4 <= self.bytes.count,
            let value = UInt32(String(decoding: self.bytes[self.index..<self.index + 4], as: UTF8.self), radix: 16)
        else { return nil }
        self.index += 4
        return value
    }
}
