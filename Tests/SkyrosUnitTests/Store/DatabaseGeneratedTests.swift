import Foundation
@testable import SkyrosPostgres
@testable import SkyrosStore
import Testing

private struct Generated: Entity, Equatable {
    var id: Int64
    var title: String
    var created: Date
    var length: Int

    static let tableName = "generated_rows"
    static let columns: [EntityColumn<Generated>] = [
        EntityColumn(\.id, "id", generated: .identity(blockSize: 7)), EntityColumn(\.title, "title"),
        EntityColumn(\.created, "created", generated: .onInsert), EntityColumn(\.length, "length", generated: .computed),
    ]
}

private struct LetIdentity: Entity {
    let id: Int64
    var title: String

    static let tableName = "let_identity"
    static let columns: [EntityColumn<LetIdentity>] = [EntityColumn(\.id, "id", generated: .identity), EntityColumn(\.title, "title")]
}

private struct IdentityNotKey: Entity {
    var id: Int64
    var serial: Int64

    static let tableName = "identity_not_key"
    static let columns: [EntityColumn<IdentityNotKey>] = [EntityColumn(\.id, "id"), EntityColumn(\.serial, "serial", generated: .identity)]
}

private struct GeneratedKey: Entity {
    var id: UUID

    static let tableName = "generated_key"
    static let columns: [EntityColumn<GeneratedKey>] = [EntityColumn(\.id, "id", generated: .onInsert)]
}

/// How an entity's database-owned columns are planned, without a server.
@Suite("Database-generated columns: planning")
struct DatabaseGeneratedTests {
    @Test("Read-back columns are left out of INSERT and returned; an identity key inserts with OVERRIDING SYSTEM VALUE")
    func insertStatement() throws {
        let plan = try EntityPlan<Generated>.shared
        #expect(plan.readBackIndices == [2, 3])
        #expect(plan.identityIndex == 0)
        #expect(plan.identityBlockSize == 7)
        let values = try RowEncoder(plan: plan).encode(Generated(id: 5, title: "t", created: .distantPast, length: 0))
        let query = PostgresWriteContext.insertStatement(plan, schema: "s", rows: [values])
        #expect(query.sql == #"INSERT INTO "s"."generated_rows" ("id", "title") OVERRIDING SYSTEM VALUE VALUES ($1, $2)"#)
        #expect(query.binds.count == 2)
        #expect(plan.returningReadBack == #", "created", "length""#)
    }

    @Test("An update never writes a read-back column and returns them")
    func updateStatement() throws {
        let plan = try EntityPlan<Generated>.shared
        #expect(try EntityChange<Generated>.columnIndices(["title", "created", "length"], plan: plan) == [1])
        let sql = plan.updateSQL(schema: nil, columns: [1], guardedByVersion: true, mustAffectRow: true)
        #expect(sql.contains(#"RETURNING xmin::text::int8 AS v, "created", "length""#))
        #expect(sql.hasPrefix("WITH skyros_write AS (UPDATE"))
    }

    @Test("An id of 0 asks for an allocated id; it is set through the key path")
    func identityAssignment() throws {
        let plan = try EntityPlan<Generated>.shared
        let row = Generated(id: 0, title: "t", created: .distantPast, length: 0)
        #expect(plan.needsIdentity(row))
        let assigned = try plan.settingIdentity(42, of: row)
        #expect(assigned.id == 42)
        #expect(!plan.needsIdentity(assigned))
    }

    @Test("Mapping errors: an identity key that is a let, an identity that is not the key, a generated key")
    func mappingErrors() {
        #expect(throws: EntityMappingError.self) { try EntityPlan<LetIdentity>.shared }
        #expect(throws: EntityMappingError.self) { try EntityPlan<IdentityNotKey>.shared }
        #expect(throws: EntityMappingError.self) { try EntityPlan<GeneratedKey>.shared }
    }

    @Test("The in-memory store evaluates now(), gen_random_uuid() and constants")
    func inMemoryDefaults() throws {
        let now = ColumnDefault.now.evaluate()
        #expect(now.type == .timestamptz)
        #expect(try UUID(uuidString: #require(ColumnDefault.randomUUID.evaluate().text)) != nil)
        #expect(try ColumnDefault.constant(7).evaluate() == PGValue(7))
    }
}
