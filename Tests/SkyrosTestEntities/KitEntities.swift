import Foundation
import SkyrosStore

/// The entity of the test kit's suites (SkyrosTesting), with and without a server.
package struct KitTask: Entity, Equatable {
    package var id: Int
    package var title: String
    package var done: Bool

    package init(id: Int, title: String, done: Bool) {
        self.id = id
        self.title = title
        self.done = done
    }

    package static let tableName = "kit_tasks"
    package static let columns: [EntityColumn<KitTask>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.title, "title"), EntityColumn(\.done, "done"),
    ]
    package static let defaultSort = [SortDescriptor(\KitTask.id)]

    /// The migration that creates its table.
    package static let migrationSQL = """
        -- migrate:up
        CREATE TABLE kit_tasks (id bigint PRIMARY KEY, title text NOT NULL, done boolean NOT NULL);
        """
}
