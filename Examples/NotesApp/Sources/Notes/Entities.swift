import Foundation
import Skyros

/// A folder of notes: a row of `folders`. Its name is unique.
public struct Folder: Entity, Equatable {
    public var id: UUID
    public var name: String

    public static let tableName = "folders"
    public static let columns: [EntityColumn<Folder>] = [EntityColumn(\.id, "id"), EntityColumn(\.name, "name")]
    public static let defaultSort = [SortDescriptor(\Folder.name)]

    public init(id: UUID = UUID(), name: String) {
        self.id = id
        self.name = name
    }
}

/// A note in a folder: a row of `notes`, guarded by its row version.
public struct Note: Entity, Equatable {
    public var id: UUID
    public var folderID: UUID
    public var title: String
    public var body: String

    /// The row codec matches Codable keys to column names.
    enum CodingKeys: String, CodingKey {
        case id, title, body
        case folderID = "folder_id"
    }

    public static let tableName = "notes"
    public static let columns: [EntityColumn<Note>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.folderID, "folder_id"), EntityColumn(\.title, "title"),
        EntityColumn(\.body, "body"),
    ]
    public static let versionColumn: String? = "row_version"
    public static let defaultSort = [SortDescriptor(\Note.title)]   // then the id, always

    public init(id: UUID = UUID(), folderID: UUID, title: String, body: String = "") {
        self.id = id
        self.folderID = folderID
        self.title = title
        self.body = body
    }
}

/// The stack the app starts with, whatever the store: production sets `store` to its database, tests move it to
/// a schema of their own or to memory (SkyrosTesting's `withTestStack(_:on:)`).
public enum NotesStack {
    /// The configuration on `store`: both entities, and the migrations applied at start, shipped in this
    /// module's bundle (`resources: [.copy("migrations")]`), so that they are found wherever the app or its
    /// tests run.
    public static func configuration(
        store: DataStackConfiguration.StoreLocation = .inMemory
    ) -> DataStackConfiguration {
        DataStackConfiguration(store: store, migrations: .bundle(.module), entities: [Folder.self, Note.self])
    }
}
