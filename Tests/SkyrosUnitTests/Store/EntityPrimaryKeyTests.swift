import SkyrosStore
import Testing

/// A row whose key is the column `key` while another column of the key's type is named `id`.
private struct Renumbered: Entity {
    var id: Int64
    var legacyID: Int64
    static let tableName = "renumbered"
    static let columns: [EntityColumn<Renumbered>] = [EntityColumn(\.legacyID, "id"), EntityColumn(\.id, "key")]
}

/// The primary key is the column the entity maps `\.id` to, whatever other columns are named.
@Suite struct EntityPrimaryKeyTests {
    @Test func theKeyIsTheIDPropertysColumnNotAColumnNamedID() throws {
        #expect(try EntityQueryMetadata.of(Renumbered.self).primaryKey.map(\.name) == ["key"])
    }
}
