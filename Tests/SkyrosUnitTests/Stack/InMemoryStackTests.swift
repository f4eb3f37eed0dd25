import Foundation
import Skyros
import SkyrosTestFixtures
import Testing

/// The stack on the in-memory store: what code under test gets instead of PostgreSQL.
@Suite struct InMemoryStackTests {
    @Test("Code can depend on DataStackProtocol and get the in-memory stack in tests")
    func protocolSubstitution() async throws {
        struct NoteService<Stack: DataStackProtocol> {
            let stack: Stack
            func add(_ value: MPItem) async throws { try await self.stack.write { try $0.insert(value) } }
            func titles() async throws -> [String] { try await self.stack.read { try await $0.fetch(FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\.id)])).map(\.title) } }
        }
        let service = NoteService(stack: try await DataStack.start(DataStackConfiguration(store: .inMemory)))
        try await service.add(MPItem(id: 1, owner: 0, value: 1, title: "note 1"))
        try await service.add(MPItem(id: 2, owner: 0, value: 2, title: "note 2"))
        #expect(try await service.titles() == ["note 1", "note 2"])
        await service.stack.shutdown()
    }

    @Test func onTheInMemoryStoreASnapshotReadReadsTheStore() async throws {
        let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory))
        try await stack.write(durability: .committed) { context in
            for id in 1...3 { try context.insert(MPItem(id: Int64(id), owner: 0, value: 10 - id, title: "r\(id)")) }
        }
        let (count, first) = try await stack.readSnapshot { reader in
            (try await reader.count(FetchDescriptor<MPItem>()),
             try await reader.first(FetchDescriptor<MPItem>(sortBy: [SortDescriptor(\MPItem.value)])))
        }
        #expect(count == 3)
        #expect(first?.id == 3)
        await stack.shutdown()
    }
}
