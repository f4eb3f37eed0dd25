import Foundation
import SkyrosPostgres

/// One row of the change log: what one commit transaction (a whole group commit) wrote.
package struct ChangeLogEntry: Sendable, Hashable {
    /// The log position (a `bigserial`: unique, but not assigned in commit order).
    package let position: Int64
    /// The writing transaction's id (`xid8`), as text.
    package let xid: String
    /// The stack that committed it.
    package let origin: UUID
    /// The changed rows.
    package let changes: [LoggedRowChange]

    package init(position: Int64, xid: String, origin: UUID, changes: [LoggedRowChange]) {
        (self.position, self.xid, self.origin, self.changes) = (position, xid, origin, changes)
    }
}

/// A changed row as the log records it: table, primary key (type and text), kind, new version.
package struct LoggedRowChange: Codable, Sendable, Hashable {
    /// The table (unqualified).
    let t: String
    /// The primary key's type OID.
    let o: UInt32
    /// The primary key's text form.
    let i: String
    /// `i`nserted, `u`pdated, `d`eleted, or `t`: the whole table was truncated (the key is empty).
    package let k: String
    /// The new version (absent for deletions).
    package let v: Int64?
    /// An announced row (hints only, see ``AnnouncedRow``): the version the update replaced,
    package let b: Int64?
    /// the entity's column layout,
    let h: String?
    /// and every column as `[type OID, text or null]`.
    package let r: [[String?]]?

    package init(
        table: String, type: UInt32, id: String, kind: String, version: Int64?, base: Int64? = nil, layout: String? = nil,
        row: [[String?]]? = nil
    ) {
        (self.t, self.o, self.i, self.k, self.v) = (table, type, id, kind, version)
        (self.b, self.h, self.r) = (base, layout, row)
    }

    package init(_ change: RowChange) {
        self.t = change.table
        self.o = change.id.type.rawValue
        self.i = change.id.text ?? ""
        switch change.kind {
        case .inserted: self.k = "i"
        case .updated: self.k = "u"
        case .deleted: self.k = "d"
        }
        self.v = change.version
        self.b = change.row?.base
        self.h = change.row?.layout
        self.r = change.row?.values.map { [String($0.type.rawValue), $0.text] }
    }

    /// The table (unqualified).
    package var table: String { self.t }

    /// Whether this change is a `TRUNCATE` of ``table``: every row of it is gone.
    package var isTruncate: Bool { self.k == "t" }

    package var key: RowKey { RowKey(table: self.t, id: PGValue(type: PGType(rawValue: self.o), text: self.i)) }

    /// The announced row: the version it replaced, its layout, and its values typed as they were written.
    package var announcedRow: (base: Int64, layout: String, values: [PGValue])? {
        guard self.k == "u", let base = self.b, let layout = self.h, let row = self.r else { return nil }
        var values: [PGValue] = []
        values.reserveCapacity(row.count)
        for cell in row {
            guard cell.count == 2, let oid = cell[0].flatMap({ UInt32($0) }) else { return nil }
            values.append(PGValue(type: PGType(rawValue: oid), text: cell[1]))
        }
        return (base, layout, values)
    }

    /// The JSON array of `changes` as ``LoggedRowChange``s decode it (written by hand into UTF-8 bytes: it is on
    /// every queued write's path, where `JSONEncoder` and `String` appends cost more). `rows`: with the rows
    /// updates announce (``RowChange/row``), for a hint; the log itself records changes without them.
    package static func json(_ changes: [RowChange], rows: Bool = false) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(changes.count * 48 + 2)
        out.append(UInt8(ascii: "["))
        for (index, change) in changes.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            Self.appendKey(table: change.table, type: change.id.type.rawValue, id: change.id.text ?? "", to: &out)
            switch change.kind {
            case .inserted: Self.append(#","k":"i""#, to: &out)
            case .updated: Self.append(#","k":"u""#, to: &out)
            case .deleted: Self.append(#","k":"d""#, to: &out)
            }
            if let version = change.version {
                Self.append(#","v":"#, to: &out)
                Self.append(String(version), to: &out)
            }
            if rows, let row = change.row {
                Self.append(#","b":"#, to: &out)
                Self.append(String(row.base), to: &out)
                Self.append(#","h":"#, to: &out)
                Self.appendString(row.layout, to: &out)
                Self.append(#","r":["#, to: &out)
                for (index, value) in row.values.enumerated() {
                    Self.append(index == 0 ? "[\"" : ",[\"", to: &out)
                    Self.append(String(value.type.rawValue), to: &out)
                    Self.append("\",", to: &out)
                    if let text = value.text { Self.appendString(text, to: &out) } else { Self.append("null", to: &out) }
                    out.append(UInt8(ascii: "]"))
                }
                out.append(UInt8(ascii: "]"))
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// This change with `version` as its new version (how the relay gives an announced row the version its
    /// writer's transaction gave it).
    package func withVersion(_ version: Int64) -> LoggedRowChange {
        LoggedRowChange(table: self.t, type: self.o, id: self.i, kind: self.k, version: version, base: self.b, layout: self.h, row: self.r)
    }

    /// The JSON array of logged changes, with their announced rows when they carry them: how the
    /// logical-decoding relay writes the entries and hints it decoded.
    package static func json(_ changes: [LoggedRowChange]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(changes.count * 48 + 2)
        out.append(UInt8(ascii: "["))
        for (index, change) in changes.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            Self.appendKey(table: change.t, type: change.o, id: change.i, to: &out)
            Self.append(#","k":"#, to: &out)
            Self.appendString(change.k, to: &out)
            if let version = change.v {
                Self.append(#","v":"#, to: &out)
                Self.append(String(version), to: &out)
            }
            if let base = change.b, let layout = change.h, let row = change.r {
                Self.append(#","b":"#, to: &out)
                Self.append(String(base), to: &out)
                Self.append(#","h":"#, to: &out)
                Self.appendString(layout, to: &out)
                Self.append(#","r":["#, to: &out)
                for (index, cell) in row.enumerated() {
                    out.append(UInt8(ascii: index == 0 ? "[" : ","))
                    if index > 0 { out.append(UInt8(ascii: "[")) }
                    for (position, text) in cell.enumerated() {
                        if position > 0 { out.append(UInt8(ascii: ",")) }
                        if let text { Self.appendString(text, to: &out) } else { Self.append("null", to: &out) }
                    }
                    out.append(UInt8(ascii: "]"))
                }
                out.append(UInt8(ascii: "]"))
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// `{"t":<table>,"o":<type>,"i":<id>`: the start of a change's object, which names its row.
    private static func appendKey(table: String, type: UInt32, id: String, to out: inout [UInt8]) {
        Self.append(#"{"t":"#, to: &out)
        Self.appendString(table, to: &out)
        Self.append(#","o":"#, to: &out)
        Self.append(String(type), to: &out)
        Self.append(#","i":"#, to: &out)
        Self.appendString(id, to: &out)
    }

    private static func append(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { out.append(contentsOf: $0) }
    }

    /// Appends `text` as a JSON string literal (UTF-8 passes through; quotes, backslashes and control
    /// characters are escaped).
    private static func appendString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case UInt8(ascii: "\n"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case UInt8(ascii: "\r"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case UInt8(ascii: "\t"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0x0F)])
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
