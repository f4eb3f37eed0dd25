import Foundation
import SkyrosPostgres
import SkyrosStore
@testable import SkyrosSync
import Testing

/// The relay's assembler, without a server: decoded pgoutput messages in, change-log entries out.
@Suite struct RelayAssemblerTests {
    typealias M = PgOutputMessage
    let writer = UUID()

    /// `tickets (id int8 key, title text)` in `schema`, announced as relation `oid`.
    func relation(_ oid: UInt32, schema: String = "app", name: String = "tickets") -> M {
        .relation(M.Relation(
            oid: oid, namespace: schema, name: name, replicaIdentity: .default,
            columns: [M.Relation.Column(flags: 1, name: "id", typeOID: 20, typeModifier: -1),
                      M.Relation.Column(flags: 0, name: "title", typeOID: 25, typeModifier: -1)]))
    }

    func row(_ id: String, _ title: String) -> [M.Value] { [.text(Array(id.utf8)), .text(Array(title.utf8))] }

    func begin(xid: UInt32 = 700) -> M { .begin(M.Begin(finalLSN: LSN(100), commitTime: PGTimestamp(rawValue: 1), xid: xid)) }

    func commit(_ end: UInt64) -> M {
        .commit(M.Commit(commitLSN: LSN(end - 8), endLSN: LSN(end), commitTime: PGTimestamp(rawValue: 5_000_000)))
    }

    func origin(rows: Int, announced: String = "") -> M {
        .message(M.LogicalMessage(
            flags: 1, lsn: LSN(90), prefix: RelayAssembler.messagePrefix,
            content: Array(RelayAssembler.originContent(origin: self.writer.uuidString.lowercased(), rows: rows, announced: announced).utf8)))
    }

    func apply(_ messages: [M], schema: String = "app") throws -> [RelayedTransaction] {
        var assembler = RelayAssembler(schema: schema)
        return try messages.compactMap { try assembler.apply($0) }
    }

    @Test func aTransactionBecomesOneEntryInTheTriggerSourcesFormat() throws {
        let relayed = try self.apply([
            self.relation(1), self.begin(),
            .insert(M.Insert(relationOID: 1, newTuple: self.row("1", "a"))),
            .update(M.Update(relationOID: 1, oldTuple: nil, newTuple: self.row("2", "b"))),
            // The key changed: the old key is deleted and the new one updated, as the triggers record it.
            .update(M.Update(relationOID: 1, oldTuple: .key([.text(Array("3".utf8)), .null]), newTuple: self.row("30", "c"))),
            .delete(M.Delete(relationOID: 1, oldTuple: .key([.text(Array("4".utf8)), .null]))),
            self.commit(200),
        ])
        let transaction = try #require(relayed.first)
        #expect(relayed.count == 1)
        #expect(transaction.endLSN == LSN(200))
        #expect(transaction.origin == ChangeCapture.foreignOrigin)
        #expect(transaction.changes.map { "\($0.table) \($0.key.id.text ?? "") \($0.k)" } == [
            "tickets 1 i", "tickets 2 u", "tickets 3 d", "tickets 30 u", "tickets 4 d",
        ])
        #expect(transaction.changes.allSatisfy { $0.key.id.type == .int8 })
        #expect(transaction.rowCount == 5)
    }

    /// The writer is named only when the rows decoded are exactly those it said it changed (a cascade or a
    /// trigger adding rows leaves the entry to every stack, the writer's too).
    @Test func theWriterIsNamedOnlyWhenItsRowCountMatches() throws {
        let own = try self.apply([
            self.relation(1), self.begin(), self.origin(rows: 1),
            .insert(M.Insert(relationOID: 1, newTuple: self.row("1", "a"))), self.commit(200),
        ])
        #expect(own.first?.origin == self.writer)
        let cascaded = try self.apply([
            self.relation(1), self.begin(), self.origin(rows: 1),
            .delete(M.Delete(relationOID: 1, oldTuple: .key([.text(Array("1".utf8)), .null]))),
            .delete(M.Delete(relationOID: 1, oldTuple: .key([.text(Array("2".utf8)), .null]))), self.commit(300),
        ])
        #expect(cascaded.first?.origin == ChangeCapture.foreignOrigin)
    }

    /// Announced rows get the writer's transaction id as their version (the entry's transaction is the relay's).
    @Test func announcedRowsCarryTheWritersTransactionAsTheirVersion() throws {
        let announced = #"[{"t":"tickets","o":20,"i":"2","k":"u","b":5,"h":"id,title","r":[["20","2"],["25","b"]]}]"#
        let relayed = try self.apply([
            self.relation(1), self.begin(xid: 4242), self.origin(rows: 1, announced: announced),
            .update(M.Update(relationOID: 1, oldTuple: nil, newTuple: self.row("2", "b"))), self.commit(200),
        ])
        let hinted = try LoggedRowChange.decodeList(try #require(relayed.first?.announced))
        #expect(hinted.first?.v == 4242)
        #expect(hinted.first?.announcedRow?.values.map(\.text) == ["2", "b"])
    }

    /// Other schemas' changes (a Relation may name any table) are left out; a transaction of only those, or of
    /// a message alone (logical messages are not filtered by publication), still ends, with no change, so that
    /// its position is confirmed.
    @Test func otherSchemasAndMessagesAloneGiveAnEmptyTransaction() throws {
        let relayed = try self.apply([
            self.relation(1, schema: "other"), self.begin(),
            .insert(M.Insert(relationOID: 1, newTuple: self.row("1", "a"))), self.commit(200),
            self.begin(), self.origin(rows: 3), self.commit(300),
            self.relation(2), self.begin(), .truncate(M.Truncate(options: 0, relationOIDs: [1, 2])), self.commit(400),
        ])
        #expect(relayed.map(\.endLSN) == [LSN(200), LSN(300), LSN(400)])
        #expect(relayed[0].changes.isEmpty && relayed[1].changes.isEmpty)
        #expect(relayed[2].changes.map(\.k) == ["t"] && relayed[2].changes.first?.table == "tickets")
        #expect(relayed[2].rowCount == -1)
    }

    /// The slot's name fits PostgreSQL's 63 bytes and its alphabet whatever the schema's and the database's
    /// names; it differs between schemas, and between databases of one cluster (slots are the cluster's).
    @Test func slotNamesFitPostgreSQLsLimitsForAnySchemaAndDatabase() {
        for schema in [String(repeating: "w", count: 63), "Ab \"c\" é$;--", "", "public"] {
            for database in ["postgres", String(repeating: "d", count: 63), "ça \"va\""] {
                let name = LogicalCapture.slotName(schema: schema, database: database)
                #expect(name.utf8.count <= 63, "\(name)")
                #expect(name.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }, "\(name)")
            }
        }
        #expect(LogicalCapture.slotName(schema: "app", database: "d") != LogicalCapture.slotName(schema: "App", database: "d"))
        #expect(LogicalCapture.slotName(schema: "public", database: "orders") != LogicalCapture.slotName(schema: "public", database: "billing"))
        // The separator keeps the parts apart: ("ab", "c") and ("a", "bc") differ.
        #expect(LogicalCapture.slotName(schema: "c", database: "ab") != LogicalCapture.slotName(schema: "bc", database: "a"))
    }
}
