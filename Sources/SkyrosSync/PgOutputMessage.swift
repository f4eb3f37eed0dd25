import SkyrosPostgres

/// One message of PostgreSQL's built-in logical decoding output plugin, `pgoutput`, protocol version 1: the
/// payload of each `XLogData` a ``PGReplicationStream`` delivers.
///
/// Decoding is a pure function of the bytes: no server, no state (``PgOutputRelationCache`` keeps the relations
/// that later messages refer to). Integers are big-endian; strings are NUL-terminated UTF-8 (the connection's
/// client encoding); times are microseconds since 2000-01-01 (``PGTimestamp``). A message that is truncated, has
/// bytes left over, or holds a value the protocol does not allow throws ``PgOutputError``; no input traps.
///
/// A transaction arrives as Begin, then for each changed table a Relation (before its first change on this
/// connection, and again after the table's definition changed) and its Insert, Update, Delete or Truncate
/// messages, transactional logical decoding Messages where they were emitted, and Commit. Transactions arrive
/// in commit order, each whole.
///
/// ```swift
/// var relations = PgOutputRelationCache()
/// for try await case .data(let data) in stream.messages {
///     let message = try PgOutputMessage(data.payload)
///     if case .row(let change)? = try relations.apply(message) { evict(change.table, change.key) }
///     if case .commit(let commit) = message { stream.confirm(flushedThrough: commit.endLSN) }
/// }
/// ```
///
/// ## Topics
/// - ``init(_:)``
/// - ``Value``
/// - ``PgOutputError``
/// - ``PgOutputRelationCache``
package enum PgOutputMessage: Sendable, Hashable {
    /// `B`: a transaction starts.
    case begin(Begin)
    /// `C`: the transaction commits.
    case commit(Commit)
    /// `O`: the transaction came from another node through replication origin `name`.
    case origin(Origin)
    /// `R`: a table's definition, sent before its first change (and after it changed).
    case relation(Relation)
    /// `Y`: a data type's name, sent before the first change with a column of a type outside `pg_catalog`.
    case type(TypeDefinition)
    /// `I`: a row was inserted.
    case insert(Insert)
    /// `U`: a row was updated.
    case update(Update)
    /// `D`: a row was deleted.
    case delete(Delete)
    /// `T`: tables were truncated.
    case truncate(Truncate)
    /// `M`: a logical decoding message (`pg_logical_emit_message`), streamed with `messages 'true'`.
    case message(LogicalMessage)

    /// A Begin message.
    package struct Begin: Sendable, Hashable {
        /// The LSN of the transaction's commit record.
        package var finalLSN: LSN
        /// When the transaction committed.
        package var commitTime: PGTimestamp
        /// The transaction's id.
        package var xid: UInt32

        /// A Begin with these fields.
        package init(finalLSN: LSN, commitTime: PGTimestamp, xid: UInt32) {
            self.finalLSN = finalLSN
            self.commitTime = commitTime
            self.xid = xid
        }
    }

    /// A Commit message.
    package struct Commit: Sendable, Hashable {
        /// Flags; none are defined (0).
        package var flags: UInt8
        /// The LSN of the commit record.
        package var commitLSN: LSN
        /// The end of the commit record: the position to confirm once the transaction is durable (a restart
        /// from it streams only later transactions).
        package var endLSN: LSN
        /// When the transaction committed.
        package var commitTime: PGTimestamp

        /// A Commit with these fields.
        package init(flags: UInt8 = 0, commitLSN: LSN, endLSN: LSN, commitTime: PGTimestamp) {
            self.flags = flags
            self.commitLSN = commitLSN
            self.endLSN = endLSN
            self.commitTime = commitTime
        }
    }

    /// An Origin message.
    package struct Origin: Sendable, Hashable {
        /// The LSN of the commit on the origin server.
        package var commitLSN: LSN
        /// The origin's name.
        package var name: String

        /// An Origin with these fields.
        package init(commitLSN: LSN, name: String) {
            self.commitLSN = commitLSN
            self.name = name
        }
    }

    /// A table's replica identity (`pg_class.relreplident`): which columns identify an updated or deleted row.
    package enum ReplicaIdentity: UInt8, Sendable, Hashable {
        /// `d`: the primary key.
        case `default` = 0x64
        /// `n`: nothing (updates and deletes cannot be published).
        case nothing = 0x6E
        /// `f`: every column.
        case full = 0x66
        /// `i`: the columns of a chosen unique index.
        case index = 0x69
    }

    /// A Relation message: a table as the changes that follow refer to it.
    package struct Relation: Sendable, Hashable {
        /// The table's OID, by which changes refer to it.
        package var oid: UInt32
        /// The table's schema as sent: empty for `pg_catalog`.
        package var namespace: String
        /// The table's name.
        package var name: String
        /// Which columns identify a row.
        package var replicaIdentity: ReplicaIdentity
        /// The published columns, in order (generated columns are never sent).
        package var columns: [Column]

        /// A Relation with these fields.
        package init(oid: UInt32, namespace: String, name: String, replicaIdentity: ReplicaIdentity, columns: [Column]) {
            self.oid = oid
            self.namespace = namespace
            self.name = name
            self.replicaIdentity = replicaIdentity
            self.columns = columns
        }

        /// The table's schema, `pg_catalog` when ``namespace`` is empty.
        package var schema: String { self.namespace.isEmpty ? "pg_catalog" : self.namespace }

        /// A column of a Relation message.
        package struct Column: Sendable, Hashable {
            /// Flags: bit 1 (``isKey``) marks a column of the replica identity.
            package var flags: UInt8
            /// The column's name.
            package var name: String
            /// Its data type's OID.
            package var typeOID: UInt32
            /// Its type modifier (`atttypmod`; -1 for none).
            package var typeModifier: Int32

            /// A column with these fields.
            package init(flags: UInt8, name: String, typeOID: UInt32, typeModifier: Int32) {
                self.flags = flags
                self.name = name
                self.typeOID = typeOID
                self.typeModifier = typeModifier
            }

            /// Whether the column is part of the replica identity (the row's key; every column for `FULL`).
            package var isKey: Bool { self.flags & 1 != 0 }
        }
    }

    /// A Type message.
    package struct TypeDefinition: Sendable, Hashable {
        /// The type's OID.
        package var oid: UInt32
        /// Its schema as sent: empty for `pg_catalog`.
        package var namespace: String
        /// Its name.
        package var name: String

        /// A Type with these fields.
        package init(oid: UInt32, namespace: String, name: String) {
            self.oid = oid
            self.namespace = namespace
            self.name = name
        }
    }

    /// A column's value in a tuple.
    package enum Value: Sendable, Hashable {
        /// `n`: NULL (and, in a key tuple, a column that is not part of the key).
        case null
        /// `u`: an unchanged TOASTed value, which the server does not send (an update that left it as it was).
        case unchangedToast
        /// `t`: the value in text form, in the client encoding.
        case text([UInt8])
        /// `b`: the value in binary form (only with the `binary` option).
        case binary([UInt8])

        /// The text value as a string; `nil` for anything else, or text that is not UTF-8.
        package var text: String? {
            guard case .text(let bytes) = self else { return nil }
            return String(validating: bytes, as: UTF8.self)
        }
    }

    /// Which old row an Update or Delete carries.
    package enum OldTuple: Sendable, Hashable {
        /// `K`: the old replica identity's columns (the others are NULL): sent when an update changed the key, and
        /// for every delete of a table whose identity is its primary key or an index.
        case key([Value])
        /// `O`: the whole old row (`REPLICA IDENTITY FULL`).
        case old([Value])

        /// The tuple's values.
        package var values: [Value] {
            switch self {
            case .key(let values), .old(let values): return values
            }
        }
    }

    /// An Insert message.
    package struct Insert: Sendable, Hashable {
        /// The table, as its Relation message announced it.
        package var relationOID: UInt32
        /// The new row.
        package var newTuple: [Value]

        /// An Insert with these fields.
        package init(relationOID: UInt32, newTuple: [Value]) {
            self.relationOID = relationOID
            self.newTuple = newTuple
        }
    }

    /// An Update message.
    package struct Update: Sendable, Hashable {
        /// The table, as its Relation message announced it.
        package var relationOID: UInt32
        /// The old key or row, when the server sent one (the key changed, or `REPLICA IDENTITY FULL`).
        package var oldTuple: OldTuple?
        /// The new row (``Value/unchangedToast`` for TOASTed values the update left as they were).
        package var newTuple: [Value]

        /// An Update with these fields.
        package init(relationOID: UInt32, oldTuple: OldTuple?, newTuple: [Value]) {
            self.relationOID = relationOID
            self.oldTuple = oldTuple
            self.newTuple = newTuple
        }
    }

    /// A Delete message.
    package struct Delete: Sendable, Hashable {
        /// The table, as its Relation message announced it.
        package var relationOID: UInt32
        /// The deleted row's key, or the whole row (`REPLICA IDENTITY FULL`).
        package var oldTuple: OldTuple

        /// A Delete with these fields.
        package init(relationOID: UInt32, oldTuple: OldTuple) {
            self.relationOID = relationOID
            self.oldTuple = oldTuple
        }
    }

    /// A Truncate message.
    package struct Truncate: Sendable, Hashable {
        /// Option bits: 1 `CASCADE`, 2 `RESTART IDENTITY`.
        package var options: UInt8
        /// The truncated tables (with `CASCADE`, those it reached too), as their Relation messages announced them.
        package var relationOIDs: [UInt32]

        /// A Truncate with these fields.
        package init(options: UInt8, relationOIDs: [UInt32]) {
            self.options = options
            self.relationOIDs = relationOIDs
        }

        /// Whether `TRUNCATE … CASCADE` ran.
        package var cascade: Bool { self.options & 1 != 0 }
        /// Whether `TRUNCATE … RESTART IDENTITY` ran.
        package var restartIdentity: Bool { self.options & 2 != 0 }
    }

    /// A logical decoding Message (`pg_logical_emit_message`).
    package struct LogicalMessage: Sendable, Hashable {
        /// Flags: bit 1 (``isTransactional``) for a message emitted as part of its transaction.
        package var flags: UInt8
        /// The message's LSN.
        package var lsn: LSN
        /// The prefix it was emitted with.
        package var prefix: String
        /// Its content, as emitted (any bytes).
        package var content: [UInt8]

        /// A Message with these fields.
        package init(flags: UInt8, lsn: LSN, prefix: String, content: [UInt8]) {
            self.flags = flags
            self.lsn = lsn
            self.prefix = prefix
            self.content = content
        }

        /// Whether the message is part of its transaction (between Begin and Commit, and only if it commits);
        /// otherwise it was streamed on its own as soon as it was decoded.
        package var isTransactional: Bool { self.flags & 1 != 0 }
    }

    /// Decodes one `pgoutput` protocol version 1 message.
    ///
    /// ```swift
    /// let message = try PgOutputMessage(data.payload)
    /// ```
    /// - Parameter bytes: the whole payload of one `XLogData`.
    /// - Throws: ``PgOutputError`` for a truncated or malformed message, or bytes left after it.
    package init(_ bytes: [UInt8]) throws(PgOutputError) {
        var reader = PgOutputReader(bytes)
        let type = try reader.byte()
        reader.messageType = type
        switch type {
        case UInt8(ascii: "B"):
            self = .begin(Begin(finalLSN: try reader.lsn(), commitTime: try reader.timestamp(), xid: try reader.uint32()))
        case UInt8(ascii: "C"):
            self = .commit(
                Commit(flags: try reader.byte(), commitLSN: try reader.lsn(), endLSN: try reader.lsn(), commitTime: try reader.timestamp()))
        case UInt8(ascii: "O"):
            self = .origin(Origin(commitLSN: try reader.lsn(), name: try reader.string()))
        case UInt8(ascii: "R"):
            self = .relation(try reader.relation())
        case UInt8(ascii: "Y"):
            self = .type(TypeDefinition(oid: try reader.uint32(), namespace: try reader.string(), name: try reader.string()))
        case UInt8(ascii: "I"):
            let oid = try reader.uint32()
            try reader.expect(marker: UInt8(ascii: "N"))
            self = .insert(Insert(relationOID: oid, newTuple: try reader.tuple()))
        case UInt8(ascii: "U"):
            let oid = try reader.uint32()
            var oldTuple: OldTuple?
            switch try reader.peekByte() {
            case UInt8(ascii: "K"):
                reader.skipByte()
                oldTuple = .key(try reader.tuple())
            case UInt8(ascii: "O"):
                reader.skipByte()
                oldTuple = .old(try reader.tuple())
            default:
                break
            }
            try reader.expect(marker: UInt8(ascii: "N"))
            self = .update(Update(relationOID: oid, oldTuple: oldTuple, newTuple: try reader.tuple()))
        case UInt8(ascii: "D"):
            let oid = try reader.uint32()
            let oldTuple: OldTuple
            switch try reader.byte() {
            case UInt8(ascii: "K"): oldTuple = .key(try reader.tuple())
            case UInt8(ascii: "O"): oldTuple = .old(try reader.tuple())
            case let marker: throw reader.error(.unexpectedMarker(marker), at: reader.offset - 1)
            }
            self = .delete(Delete(relationOID: oid, oldTuple: oldTuple))
        case UInt8(ascii: "T"):
            let count = try reader.count32()
            let options = try reader.byte()
            // Each OID takes 4 bytes: a count the message cannot hold fails before anything is reserved.
            guard count <= reader.remaining / 4 else { throw reader.error(.truncated, at: reader.bytes.count) }
            var oids: [UInt32] = []
            oids.reserveCapacity(count)
            for _ in 0..<count { oids.append(try reader.uint32()) }
            self = .truncate(Truncate(options: options, relationOIDs: oids))
        case UInt8(ascii: "M"):
            let flags = try reader.byte()
            let lsn = try reader.lsn()
            let prefix = try reader.string()
            let length = try reader.count32()
            self = .message(LogicalMessage(flags: flags, lsn: lsn, prefix: prefix, content: try reader.bytes(length)))
        default:
            throw reader.error(.unknownMessageType(type), at: 0)
        }
        try reader.finish()
    }
}

/// Why a `pgoutput` message could not be decoded, or a change not resolved against its relation.
///
/// ```swift
/// do { _ = try PgOutputMessage(payload) }
/// catch { logger.debug("bad pgoutput message", metadata: ["error": "\(error)"]) }
/// ```
package struct PgOutputError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong.
    package enum Reason: Sendable, Hashable {
        /// The message ends before a field it must hold.
        case truncated
        /// Bytes follow the message's last field.
        case trailingBytes
        /// The first byte names no protocol version 1 message.
        case unknownMessageType(UInt8)
        /// A tuple marker (`N`, `K`, `O`) was expected; this byte came.
        case unexpectedMarker(UInt8)
        /// A tuple column's kind is not `n`, `u`, `t` or `b`.
        case unknownColumnKind(UInt8)
        /// A relation's replica identity is not `d`, `n`, `f` or `i`.
        case unknownReplicaIdentity(UInt8)
        /// A count or length is negative.
        case negativeLength(Int)
        /// A string holds bytes that are not UTF-8.
        case invalidUTF8
        /// A change refers to a relation no Relation message announced.
        case unknownRelation(UInt32)
        /// A tuple's column count differs from its relation's.
        case columnCountMismatch(relation: Int, tuple: Int)
        /// A key column's value is not available as text (unchanged TOAST, binary, or not UTF-8).
        case keyUnavailable(column: String)
    }

    /// What was wrong.
    package var reason: Reason
    /// The message's type byte (`I`, `U`, …), when it was read.
    package var messageType: UInt8?
    /// Where in the message it went wrong (bytes from its start).
    package var offset: Int

    /// An error for `reason` at `offset` of a message of type `messageType`.
    package init(_ reason: Reason, messageType: UInt8?, offset: Int) {
        self.reason = reason
        self.messageType = messageType
        self.offset = offset
    }

    /// The reason, the message type and the offset; never the message's values.
    package var description: String {
        let type = self.messageType.map { " in a '\(Character(Unicode.Scalar($0)))' message" } ?? ""
        return "pgoutput: \(self.reason)\(type) at byte \(self.offset)"
    }
}

/// Reads a `pgoutput` message's fields in order; every read checks that the bytes are there.
private struct PgOutputReader {
    let bytes: [UInt8]
    var offset = 0
    var messageType: UInt8?

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remaining: Int { self.bytes.count - self.offset }

    func error(_ reason: PgOutputError.Reason, at offset: Int) -> PgOutputError {
        PgOutputError(reason, messageType: self.messageType, offset: offset)
    }

    /// Throws ``PgOutputError/Reason/truncated`` unless `count` more bytes are there.
    func need(_ count: Int) throws(PgOutputError) {
        guard count <= self.remaining else { throw self.error(.truncated, at: self.bytes.count) }
    }

    mutating func byte() throws(PgOutputError) -> UInt8 {
        try self.need(1)
        defer { self.offset += 1 }
        return self.bytes[self.offset]
    }

    func peekByte() throws(PgOutputError) -> UInt8 {
        try self.need(1)
        return self.bytes[self.offset]
    }

    mutating func skipByte() { self.offset += 1 }

    mutating func expect(marker: UInt8) throws(PgOutputError) {
        let found = try self.byte()
        guard found == marker else { throw self.error(.unexpectedMarker(found), at: self.offset - 1) }
    }

    /// A big-endian unsigned integer of `size` bytes.
    private mutating func unsigned(_ size: Int) throws(PgOutputError) -> UInt64 {
        try self.need(size)
        var value: UInt64 = 0
        for index in self.offset..<(self.offset + size) { value = value << 8 | UInt64(self.bytes[index]) }
        self.offset += size
        return value
    }

    mutating func int16() throws(PgOutputError) -> Int16 { Int16(bitPattern: UInt16(try self.unsigned(2))) }
    mutating func uint32() throws(PgOutputError) -> UInt32 { UInt32(try self.unsigned(4)) }
    mutating func int32() throws(PgOutputError) -> Int32 { Int32(bitPattern: try self.uint32()) }
    mutating func lsn() throws(PgOutputError) -> LSN { LSN(try self.unsigned(8)) }
    mutating func timestamp() throws(PgOutputError) -> PGTimestamp {
        PGTimestamp(rawValue: Int64(bitPattern: try self.unsigned(8)))
    }

    /// An `Int16` count, which must not be negative.
    mutating func count16() throws(PgOutputError) -> Int {
        let start = self.offset
        let count = Int(try self.int16())
        guard count >= 0 else { throw self.error(.negativeLength(count), at: start) }
        return count
    }

    /// An `Int32` count or length, which must not be negative.
    mutating func count32() throws(PgOutputError) -> Int {
        let start = self.offset
        let count = Int(try self.int32())
        guard count >= 0 else { throw self.error(.negativeLength(count), at: start) }
        return count
    }

    mutating func bytes(_ count: Int) throws(PgOutputError) -> [UInt8] {
        try self.need(count)
        defer { self.offset += count }
        return Array(self.bytes[self.offset..<(self.offset + count)])
    }

    /// A NUL-terminated UTF-8 string.
    mutating func string() throws(PgOutputError) -> String {
        guard let end = self.bytes[self.offset...].firstIndex(of: 0) else {
            throw self.error(.truncated, at: self.bytes.count)
        }
        guard let string = String(validating: self.bytes[self.offset..<end], as: UTF8.self) else {
            throw self.error(.invalidUTF8, at: self.offset)
        }
        self.offset = end + 1
        return string
    }

    /// TupleData: an `Int16` column count, then each column's kind and, for `t` and `b`, its bytes.
    mutating func tuple() throws(PgOutputError) -> [PgOutputMessage.Value] {
        let count = try self.count16()
        // Each column takes at least its kind byte.
        try self.need(count)
        var values: [PgOutputMessage.Value] = []
        values.reserveCapacity(count)
        for _ in 0..<count {
            let kind = try self.byte()
            switch kind {
            case UInt8(ascii: "n"): values.append(.null)
            case UInt8(ascii: "u"): values.append(.unchangedToast)
            case UInt8(ascii: "t"): values.append(.text(try self.bytes(try self.count32())))
            case UInt8(ascii: "b"): values.append(.binary(try self.bytes(try self.count32())))
            default: throw self.error(.unknownColumnKind(kind), at: self.offset - 1)
            }
        }
        return values
    }

    /// A Relation message's body.
    mutating func relation() throws(PgOutputError) -> PgOutputMessage.Relation {
        let oid = try self.uint32()
        let namespace = try self.string()
        let name = try self.string()
        let identityByte = try self.byte()
        guard let identity = PgOutputMessage.ReplicaIdentity(rawValue: identityByte) else {
            throw self.error(.unknownReplicaIdentity(identityByte), at: self.offset - 1)
        }
        let count = try self.count16()
        // Each column takes at least 10 bytes (flags, an empty name's NUL, two Int32s).
        try self.need(count * 10)
        var columns: [PgOutputMessage.Relation.Column] = []
        columns.reserveCapacity(count)
        for _ in 0..<count {
            columns.append(
                PgOutputMessage.Relation.Column(
                    flags: try self.byte(), name: try self.string(), typeOID: try self.uint32(), typeModifier: try self.int32()))
        }
        return PgOutputMessage.Relation(oid: oid, namespace: namespace, name: name, replicaIdentity: identity, columns: columns)
    }

    /// Throws ``PgOutputError/Reason/trailingBytes`` unless the whole message was read.
    func finish() throws(PgOutputError) {
        guard self.remaining == 0 else { throw self.error(.trailingBytes, at: self.offset) }
    }
}

/// A table a change applies to.
package struct PgOutputTable: Sendable, Hashable, CustomStringConvertible {
    /// Its schema (`pg_catalog` for a Relation message's empty namespace).
    package var schema: String
    /// Its name.
    package var name: String

    /// The table `schema`.`name`.
    package init(schema: String, name: String) {
        self.schema = schema
        self.name = name
    }

    /// `"schema"."name"`, quoted as SQL identifiers.
    package var description: String { quoteIdentifier(self.schema) + "." + quoteIdentifier(self.name) }
}

/// A row change resolved against its relation: which table, and which row by its key.
package struct PgOutputRowChange: Sendable, Hashable {
    /// What happened to the row.
    package enum Operation: Sendable, Hashable {
        /// An Insert message.
        case insert
        /// An Update message.
        case update
        /// A Delete message.
        case delete
    }

    /// What happened to the row.
    package var operation: Operation
    /// The row's table.
    package var table: PgOutputTable
    /// The names of the key columns (the replica identity's, in column order; every column for `FULL`; none
    /// for a table without one, whose inserts are the only changes it can publish).
    package var keyColumns: [String]
    /// The row's key, one text value per key column (`nil` for NULL, possible only with `FULL`): for an update
    /// or delete the old row's, when the server sent the old key or row, otherwise the new row's.
    package var key: [String?]
    /// For an update that changed the key: the new row's key.
    package var newKey: [String?]?

    /// A change with these fields.
    package init(operation: Operation, table: PgOutputTable, keyColumns: [String], key: [String?], newKey: [String?]? = nil) {
        self.operation = operation
        self.table = table
        self.keyColumns = keyColumns
        self.key = key
        self.newKey = newKey
    }
}

/// What a ``PgOutputRelationCache`` makes of a message that changes data.
package enum PgOutputChange: Sendable, Hashable {
    /// A row was inserted, updated or deleted.
    case row(PgOutputRowChange)
    /// Tables were truncated.
    case truncate([PgOutputTable])
}

/// The relations a `pgoutput` stream announced (OID → Relation message), and the resolution of row changes to
/// their table and key: a value, advanced one message at a time.
///
/// A Relation message replaces what the cache held for its OID (a table's definition changed, or a new
/// connection announces it again); the cache lives as long as the replication connection, since the server
/// announces each relation once per connection.
///
/// ```swift
/// var relations = PgOutputRelationCache()
/// if case .row(let change)? = try relations.apply(try PgOutputMessage(payload)) {
///     print(change.table, change.key)   // "public"."orders" ["42"]
/// }
/// ```
package struct PgOutputRelationCache: Sendable, Hashable {
    /// The relations announced so far, by OID.
    package private(set) var relations: [UInt32: PgOutputMessage.Relation] = [:]

    /// An empty cache (a new replication connection).
    package init() {}

    /// Takes in one message: a Relation is kept; an Insert, Update or Delete is resolved to its table and key;
    /// a Truncate to its tables. Other messages change nothing and give `nil`.
    ///
    /// - Parameter message: the next message of the stream.
    /// - Returns: the change, for messages that change data.
    /// - Throws: ``PgOutputError`` (with no message type or offset) when a change names a relation not
    ///   announced, its tuple's column count is not its relation's, or a key column's value is not available
    ///   as text.
    package mutating func apply(_ message: PgOutputMessage) throws(PgOutputError) -> PgOutputChange? {
        switch message {
        case .relation(let relation):
            self.relations[relation.oid] = relation
            return nil
        case .insert(let insert):
            let relation = try self.relation(insert.relationOID)
            return .row(
                PgOutputRowChange(
                    operation: .insert, table: Self.table(relation), keyColumns: Self.keyNames(relation),
                    key: try Self.key(of: insert.newTuple, in: relation)))
        case .update(let update):
            let relation = try self.relation(update.relationOID)
            let newKey = try Self.key(of: update.newTuple, in: relation, unchangedFrom: update.oldTuple?.values)
            guard let old = update.oldTuple else {
                return .row(
                    PgOutputRowChange(
                        operation: .update, table: Self.table(relation), keyColumns: Self.keyNames(relation), key: newKey))
            }
            let oldKey = try Self.key(of: old.values, in: relation)
            return .row(
                PgOutputRowChange(
                    operation: .update, table: Self.table(relation), keyColumns: Self.keyNames(relation), key: oldKey,
                    newKey: newKey == oldKey ? nil : newKey))
        case .delete(let delete):
            let relation = try self.relation(delete.relationOID)
            return .row(
                PgOutputRowChange(
                    operation: .delete, table: Self.table(relation), keyColumns: Self.keyNames(relation),
                    key: try Self.key(of: delete.oldTuple.values, in: relation)))
        case .truncate(let truncate):
            var tables: [PgOutputTable] = []
            for oid in truncate.relationOIDs { tables.append(Self.table(try self.relation(oid))) }
            return .truncate(tables)
        case .begin, .commit, .origin, .type, .message:
            return nil
        }
    }

    private func relation(_ oid: UInt32) throws(PgOutputError) -> PgOutputMessage.Relation {
        guard let relation = self.relations[oid] else {
            throw PgOutputError(.unknownRelation(oid), messageType: nil, offset: 0)
        }
        return relation
    }

    private static func table(_ relation: PgOutputMessage.Relation) -> PgOutputTable {
        PgOutputTable(schema: relation.schema, name: relation.name)
    }

    private static func keyNames(_ relation: PgOutputMessage.Relation) -> [String] {
        relation.columns.filter(\.isKey).map(\.name)
    }

    /// The key columns' values of `tuple` as text. With `unchangedFrom`, a key column the update left as it was
    /// (an unchanged TOASTed value) takes its value from that old tuple.
    private static func key(
        of tuple: [PgOutputMessage.Value], in relation: PgOutputMessage.Relation,
        unchangedFrom old: [PgOutputMessage.Value]? = nil
    ) throws(PgOutputError) -> [String?] {
        guard tuple.count == relation.columns.count, old.map({ $0.count == tuple.count }) ?? true else {
            throw PgOutputError(
                .columnCountMismatch(relation: relation.columns.count, tuple: tuple.count), messageType: nil, offset: 0)
        }
        var key: [String?] = []
        for (index, column) in relation.columns.enumerated() where column.isKey {
            var value = tuple[index]
            if value == .unchangedToast, let old { value = old[index] }
            switch value {
            case .null:
                key.append(nil)
            case .text:
                guard let text = value.text else { throw PgOutputError(.keyUnavailable(column: column.name), messageType: nil, offset: 0) }
                key.append(text)
            case .unchangedToast, .binary:
                throw PgOutputError(.keyUnavailable(column: column.name), messageType: nil, offset: 0)
            }
        }
        return key
    }
}
