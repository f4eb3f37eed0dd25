import Foundation
import Skyros
import SkyrosPostgres
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
}
