import Foundation
import Notes
import Skyros
import SkyrosTesting
import Synchronization
import Testing

extension NotesAppTests {
    /// Folders, on each store.
    @Suite struct FolderTests {
        @Test(arguments: TestRun.stores)
        func aNewFolderIsStored(on store: TestStore) async throws {
            try await withService(on: store) { service, stack in
                let inbox = try #require(await service.createFolder(named: "Inbox").value)
                let stored = try await stack.read { try await $0.object(Folder.self, id: inbox.id) }
                #expect(stored == inbox)
            }
        }

        @Test(arguments: TestRun.stores)
        func aFolderNameIsTrimmed(on store: TestStore) async throws {
            try await withService(on: store) { service, _ in
                #expect(await service.createFolder(named: "  Work ").value?.name == "Work")
            }
        }

        @Test(arguments: TestRun.stores)
        func aFolderNeedsAName(on store: TestStore) async throws {
            try await withService(on: store) { service, stack in
                #expect(await service.createFolder(named: "   ") == .invalid("a folder needs a name"))
                let folders = try await stack.read { try await $0.count(FetchDescriptor<Folder>()) }
                #expect(folders == 0)
            }
        }

        @Test(arguments: TestRun.stores)
        func aFolderNameIsUnique(on store: TestStore) async throws {
            try await withService(on: store) { service, stack in
                #expect(await service.createFolder(named: "Inbox").value != nil)
                #expect(await service.createFolder(named: "Inbox") == .conflict("a folder named Inbox exists"))
                let folders = try await stack.read { try await $0.count(FetchDescriptor<Folder>()) }
                #expect(folders == 1)
            }
        }

        /// Every test has a schema of its own: these five folders are the only ones this test sees, whatever
        /// the tests running beside it write.
        @Test(arguments: TestRun.stores)
        func aTestSeesOnlyItsOwnRows(on store: TestStore) async throws {
            try await withService(on: store) { service, stack in
                for name in ["a", "b", "c", "d", "e"] { #expect(await service.createFolder(named: name).value != nil) }
                let names = try await stack.read { try await $0.fetch(FetchDescriptor<Folder>()) }.map(\.name)
                #expect(names == ["a", "b", "c", "d", "e"])
            }
        }

        /// An observer of the folders sees one created through the service (waited for with a deadline).
        @Test(arguments: TestRun.stores)
        func anObserverSeesANewFolder(on store: TestStore) async throws {
            try await withService(on: store) { service, stack in
                let seen = Flag()
                let observer = Task {
                    for try await result in stack.observe(FetchDescriptor<Folder>())
                    where result.values.map(\.name) == ["Shared"] {
                        seen.set()
                        return
                    }
                }
                #expect(await service.createFolder(named: "Shared").value != nil)
                #expect(await eventually(within: .seconds(10)) { seen.isSet })
                observer.cancel()
                _ = await observer.result   // ended before the kit shuts the stack down
            }
        }

        @Test(arguments: TestRun.stores)
        func twoServicesOnOneStackShareTheirFolders(on store: TestStore) async throws {
            try await withService(on: store) { service, stack in
                let other = NotesService(stack: stack)
                #expect(await other.start() == .ready)
                let inbox = try #require(await service.createFolder(named: "Inbox").value)
                #expect(await other.createFolder(named: "Inbox") == .conflict("a folder named Inbox exists"))
                #expect(await other.notes(in: inbox.id) == .ok([]))
            }
        }
    }
}

/// A flag one task sets and another polls.
final class Flag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { self.value.withLock { $0 } }
    func set() { self.value.withLock { $0 = true } }
}
