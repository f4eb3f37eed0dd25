import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// PostgreSQL: an update writes only the columns that changed, so a concurrent write to another column (that
/// does not bump the version column) survives.
@Suite("Stack update columns")
struct OnlyChangedColumnsTests {
    @Test("Only changed columns are written")
    func onlyChangedColumns() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await stack.write(durability: .committed) { try $0.insert(StackCounter(id: "a", name: "first", note: "n1")) }
            let context = stack.newBackgroundContext()
            var row = try #require(try await context.object(StackCounter.self, id: "a"))
            // Another client changes `note` without touching the version column.
            try await StackTestServer.execute(stack, "UPDATE stack_counters SET note = 'outside' WHERE id = 'a'")
            row.name = "second"
            try await context.update(row)
            try await context.saveToStore()
            let stored = try #require(try await stack.store.object(StackCounter.self, id: "a"))
            #expect(stored.value == StackCounter(id: "a", name: "second", note: "outside"))
            #expect(stored.version == 2)
        }
    }

    /// An update carries its row's encodings to the commit (the queue binds them instead of encoding again);
    /// updates merged in one context, or merged into a parent, still write exactly what differs from the row
    /// as read, and an update back to that row writes nothing.
    @Test("Merged updates write what differs from the row read")
    func mergedUpdates() async throws {
        try await StackTestServer.withStack(.postgres) { stack in
            try await stack.write(durability: .committed) {
                try $0.insert(StackCounter(id: "a", name: "first", note: "n1"))
                try $0.insert(StackCounter(id: "b", name: "first", note: "n1"))
            }
            // Two updates of one row in one context: both columns, against the row as read.
            try await stack.write(durability: .committed) { context in
                var row = try #require(try await context.object(StackCounter.self, id: "a"))
                row.name = "second"
                try await context.update(row)
                row.note = "n2"
                try await context.update(row)
            }
            let a = try #require(try await stack.store.object(StackCounter.self, id: "a"))
            #expect(a.value == StackCounter(id: "a", name: "second", note: "n2"))
            #expect(a.version == 2)

            // Changed, then changed back: nothing is written (the version stays).
            try await stack.write(durability: .committed) { context in
                var row = try #require(try await context.object(StackCounter.self, id: "b"))
                row.name = "changed"
                try await context.update(row)
                row.name = "first"
                try await context.update(row)
            }
            #expect(try await stack.store.object(StackCounter.self, id: "b")?.version == 1)

            // A child context's update merged into its parent's update of the same row, against the row the
            // parent read: the child sets `note` back and changes `name`, so only `name` is written, and an
            // outside change to `note` made after the read survives.
            let parent = stack.newBackgroundContext()
            var row = try #require(try await parent.object(StackCounter.self, id: "b"))
            row.note = "parent"
            try await parent.update(row)
            let child = parent.newChildContext()
            row.note = "n1"
            row.name = "child"
            try await child.update(row)
            try child.save()
            try await StackTestServer.execute(stack, "UPDATE stack_counters SET note = 'outside' WHERE id = 'b'")
            try await parent.saveToStore()
            let b = try #require(try await stack.store.object(StackCounter.self, id: "b"))
            #expect(b.value == StackCounter(id: "b", name: "child", note: "outside"))
        }
    }
}
