import Foundation
import SkyrosPostgres
import SkyrosStore

/// One committed transaction as the relay writes it into the change log: its changed keys in the log's format,
/// who wrote it, and where it ends in the WAL.
package struct RelayedTransaction: Sendable, Hashable {
    /// The end of the transaction in the WAL: once its entry is durable, the slot may be confirmed up to it.
    package var endLSN: LSN
    /// The writer's commit time.
    package var committedAt: PGTimestamp
    /// The writing stack, when it named itself and the rows decoded are exactly the rows it changed (as the
    /// trigger source decides); otherwise ``ChangeCapture/foreignOrigin``.
    package var origin: UUID
    /// The changed keys, in the order the transaction made the changes.
    package var changes: [LoggedRowChange]
    /// The rows the writer announced for hints (see ``ChangeLog/originStatement(_:origin:includingRows:)``), as
    /// JSON, when it is the ``origin``.
    package var announced: String?

    /// The writer's transaction id (32 bits, as `pgoutput` sends it): the relay makes sure it is visible to new
    /// snapshots before it tells the other stacks (see ``ChangeRelay``).
    package var xid: UInt32 = 0

    /// Rows changed, as the hint's `/<rows>` counts them: `-1` when a table was truncated.
    package var rowCount: Int { self.changes.contains(where: \.isTruncate) ? -1 : self.changes.count }
}

/// Turns the decoded `pgoutput` stream of one replication connection into ``RelayedTransaction``s: a value,
/// advanced one message at a time, with no I/O (the relay's driver, ``ChangeRelay``, does that).
///
/// Only tables of ``schema`` are kept (the publication holds no others, but a Relation may name any). An update
/// that changed the key gives a deletion of the old key and an update of the new one, as the trigger source
/// records it. A transaction whose changes are all outside the schema gives an empty change list: its end is
/// still returned, so that the slot advances past it.
package struct RelayAssembler: Sendable {
    /// The schema whose tables are relayed.
    package let schema: String
    private var relations = PgOutputRelationCache()
    /// Each table's key type, from its Relation message.
    private var keyTypes: [PgOutputTable: UInt32] = [:]
    /// The transaction between a Begin and its Commit.
    private var open: Open?

    private struct Open {
        /// The writer's transaction id (32 bits: a row's `xmin`).
        var xid: UInt32 = 0
        var changes: [LoggedRowChange] = []
        var origin: (id: UUID, rows: Int, announced: String)?
    }

    /// The prefix of the transactional logical message a stack emits in its commit transactions to name
    /// itself (see ``ChangeLog/originStatement(_:origin:includingRows:)``).
    package static let messagePrefix = "skyros"

    package init(schema: String) { self.schema = schema }

    /// Whether a transaction is open (a Begin without its Commit yet).
    package var isInTransaction: Bool { self.open != nil }

    /// Takes the next message; returns the transaction its Commit ends.
    /// - Throws: ``PgOutputError`` when a change names a relation not announced or its key is unavailable.
    package mutating func apply(_ message: PgOutputMessage) throws(PgOutputError) -> RelayedTransaction? {
        switch message {
        case .begin(let begin):
            self.open = Open(xid: begin.xid)
            return nil
        case .relation(let relation):
            _ = try self.relations.apply(message)
            let keys = relation.columns.filter(\.isKey)
            // A composite key is named by its text as a row, `(a,b)` (see `CompositeKey`).
            self.keyTypes[PgOutputTable(schema: relation.schema, name: relation.name)] =
                keys.count > 1 ? PGType.record.rawValue : keys.first?.typeOID ?? PGType.text.rawValue
            return nil
        case .message(let logical):
            guard logical.isTransactional, logical.prefix == Self.messagePrefix, self.open != nil,
                let origin = Self.parseOrigin(logical.content)
            else { return nil }
            self.open?.origin = origin
            return nil
        case .insert, .update, .delete, .truncate:
            guard let change = try self.relations.apply(message) else { return nil }
            self.record(change)
            return nil
        case .commit(let commit):
            let open = self.open ?? Open()
            self.open = nil
            var origin = ChangeCapture.foreignOrigin
            var announced: String?
            if let named = open.origin, named.rows == open.changes.count, !open.changes.contains(where: \.isTruncate) {
                origin = named.id
                announced = named.announced.isEmpty ? nil : Self.versioned(named.announced, xid: open.xid)
            }
            return RelayedTransaction(
                endLSN: commit.endLSN, committedAt: commit.commitTime, origin: origin, changes: open.changes, announced: announced,
                xid: open.xid)
        case .origin, .type:
            return nil
        }
    }

    private mutating func record(_ change: PgOutputChange) {
        switch change {
        case .row(let row):
            guard row.table.schema == self.schema, let key = Self.key(row.key) else { return }
            let type = self.keyTypes[row.table] ?? PGType.text.rawValue
            let kind: String
            switch row.operation {
            case .insert: kind = "i"
            case .update: kind = row.newKey == nil ? "u" : "d"
            case .delete: kind = "d"
            }
            self.append(LoggedRowChange(table: row.table.name, type: type, id: key ?? "", kind: kind, version: nil))
            if let newKey = row.newKey, let new = Self.key(newKey) {
                self.append(LoggedRowChange(table: row.table.name, type: type, id: new ?? "", kind: "u", version: nil))
            }
        case .truncate(let tables):
            for table in tables where table.schema == self.schema {
                let type = self.keyTypes[table] ?? PGType.text.rawValue
                self.append(LoggedRowChange(table: table.name, type: type, id: "", kind: "t", version: nil))
            }
        }
    }

    /// The text naming a row by its key's values (in column order): the one value, or a composite key's row
    /// text; `nil` without a key.
    private static func key(_ values: [String?]) -> String?? {
        if values.count == 1 { return values[0] }
        if values.isEmpty { return nil }
        return RecordText.format(values)
    }

    /// Adds a change to the open transaction (a change outside Begin/Commit cannot happen in protocol 1; it is
    /// kept in a transaction of its own all the same).
    private mutating func append(_ change: LoggedRowChange) {
        if self.open == nil { self.open = Open() }
        self.open?.changes.append(change)
    }

    /// The writer's announced rows, each given the version the writer's transaction gave it when it carries
    /// none (`xmin`, for entities without a version column): a stack refreshing its cached copy from the hint
    /// must not take the relay's transaction id for it. `nil` when the JSON does not decode (the hint then goes
    /// without rows, and stacks evict instead of refreshing).
    static func versioned(_ announced: String, xid: UInt32) -> String? {
        guard let changes = try? LoggedRowChange.decodeList(announced) else { return nil }
        return LoggedRowChange.json(changes.map { $0.v == nil && $0.announcedRow != nil ? $0.withVersion(Int64(xid)) : $0 })
    }

    /// Parses `<origin uuid> <rows>\n<announced JSON or nothing>`.
    static func parseOrigin(_ content: [UInt8]) -> (id: UUID, rows: Int, announced: String)? {
        guard let text = String(validating: content, as: UTF8.self) else { return nil }
        let lines = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        let head = lines[0].split(separator: " ")
        guard head.count == 2, let id = UUID(uuidString: String(head[0])), let rows = Int(head[1]) else { return nil }
        return (id, rows, lines.count > 1 ? String(lines[1]) : "")
    }

    /// The content of the message a stack emits: see ``parseOrigin(_:)``.
    package static func originContent(origin: String, rows: Int, announced: String) -> String {
        "\(origin) \(rows)\n\(announced)"
    }
}
