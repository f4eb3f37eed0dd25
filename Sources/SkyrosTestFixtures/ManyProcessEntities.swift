// Entities shared by the multi-process tests and the `skyros-test-node` processes they start (tests cannot
// import an executable target). Not a product.
import Skyros

/// The many-processes tests' row (table `mp_items`).
public struct MPItem: Entity, Equatable {
    public var id: Int64
    public var owner: Int
    public var value: Int
    public var title: String

    public init(id: Int64, owner: Int, value: Int, title: String) {
        self.id = id
        self.owner = owner
        self.value = value
        self.title = title
    }

    public static let tableName = "mp_items"
    public static let columns: [EntityColumn<MPItem>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.owner, "owner"), EntityColumn(\.value, "value"), EntityColumn(\.title, "title"),
    ]
}

/// A node that finished writing (table `mp_done`).
public struct MPDone: Entity, Equatable {
    public var id: Int

    public init(id: Int) { self.id = id }

    public static let tableName = "mp_done"
    public static let columns: [EntityColumn<MPDone>] = [EntityColumn(\.id, "id")]
}
