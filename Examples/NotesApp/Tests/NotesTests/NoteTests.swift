import Foundation
import Notes
import Skyros
import SkyrosTesting
import Testing

extension NotesAppTests {
    /// Notes: create, list, rename, on each store.
    @Suite struct NoteTests {
        @Test(arguments: TestRun.stores)
        func aNewNoteIsInItsFolder(on store: TestStore) async throws {
            try await withService(on: store) { service, _ in
                let inbox = try #require(await service.createFolder(named: "Inbox").value)
                let answer = await service.createNote(title: "Groceries", body: "milk", in: inbox.id)
                let note = try #require(answer.value, "\(answer)")
                #expect(note.folderID == inbox.id && note.body == "milk")
                #expect(await service.notes(in: inbox.id) == .ok([note]))
            }
        }

        @Test(arguments: TestRun.stores)
        func aNoteNeedsAFolderThatExists(on store: TestStore) async throws {
            try await withService(on: store) { service, stack in
                #expect(await service.createNote(title: "Lost", in: UUID()) == .notFound)
                let notes = try await stack.read { try await $0.count(FetchDescriptor<Note>()) }
                #expect(notes == 0)
            }
        }

        @Test(arguments: TestRun.stores)
        func aNoteNeedsATitle(on store: TestStore) async throws {
            try await withService(on: store) { service, _ in
                let inbox = try #require(await service.createFolder(named: "Inbox").value)
                #expect(await service.createNote(title: " ", in: inbox.id) == .invalid("a note needs a title"))
                #expect(await service.notes(in: inbox.id) == .ok([]))
            }
        }

        @Test(arguments: TestRun.stores)
        func notesAreListedByTitle(on store: TestStore) async throws {
            try await withService(on: store) { service, _ in
                let inbox = try #require(await service.createFolder(named: "Inbox").value)
                for title in ["pears", "apples", "oranges"] {
                    #expect(await service.createNote(title: title, in: inbox.id).value != nil)
                }
                #expect(await service.notes(in: inbox.id).value?.map(\.title) == ["apples", "oranges", "pears"])
            }
        }

        @Test(arguments: TestRun.stores)
        func aFolderListsOnlyItsOwnNotes(on store: TestStore) async throws {
            try await withService(on: store) { service, _ in
                let home = try #require(await service.createFolder(named: "Home").value)
                let work = try #require(await service.createFolder(named: "Work").value)
                #expect(await service.createNote(title: "laundry", in: home.id).value != nil)
                #expect(await service.createNote(title: "report", in: work.id).value != nil)
                #expect(await service.notes(in: home.id).value?.map(\.title) == ["laundry"])
                #expect(await service.notes(in: work.id).value?.map(\.title) == ["report"])
            }
        }

        @Test(arguments: TestRun.stores)
        func listingAMissingFolderIsNotFound(on store: TestStore) async throws {
            try await withService(on: store) { service, _ in
                #expect(await service.notes(in: UUID()) == .notFound)
            }
        }

        @Test(arguments: TestRun.stores)
        func aNoteIsRenamed(on store: TestStore) async throws {
            try await withService(on: store) { service, stack in
                let inbox = try #require(await service.createFolder(named: "Inbox").value)
                let note = try #require(await service.createNote(title: "draft", body: "text", in: inbox.id).value)
                let renamed = try #require(await service.renameNote(note.id, to: " final ").value)
                #expect(renamed == Note(id: note.id, folderID: inbox.id, title: "final", body: "text"))
                #expect(try await stack.readSnapshot { try await $0.fetch(FetchDescriptor<Note>()) } == [renamed])
            }
        }

        @Test(arguments: TestRun.stores)
        func renamingTwiceKeepsTheLastTitle(on store: TestStore) async throws {
            try await withService(on: store) { service, _ in
                let inbox = try #require(await service.createFolder(named: "Inbox").value)
                let note = try #require(await service.createNote(title: "one", in: inbox.id).value)
                #expect(await service.renameNote(note.id, to: "two").value?.title == "two")
                #expect(await service.renameNote(note.id, to: "three").value?.title == "three")
                #expect(await service.notes(in: inbox.id).value?.map(\.title) == ["three"])
            }
        }

        @Test(arguments: TestRun.stores)
        func renamingAMissingNoteIsNotFound(on store: TestStore) async throws {
            try await withService(on: store) { service, _ in
                #expect(await service.renameNote(UUID(), to: "anything") == .notFound)
            }
        }

        @Test(arguments: TestRun.stores)
        func aNoteCannotBeRenamedToNothing(on store: TestStore) async throws {
            try await withService(on: store) { service, _ in
                let inbox = try #require(await service.createFolder(named: "Inbox").value)
                let note = try #require(await service.createNote(title: "keep", in: inbox.id).value)
                #expect(await service.renameNote(note.id, to: "") == .invalid("a note needs a title"))
                #expect(await service.notes(in: inbox.id).value?.map(\.title) == ["keep"])
            }
        }

        /// Fifty notes written by concurrent requests: every one is listed.
        @Test(arguments: TestRun.stores)
        func concurrentRequestsAreAllStored(on store: TestStore) async throws {
            try await withService(on: store) { service, _ in
                let inbox = try #require(await service.createFolder(named: "Inbox").value)
                await withTaskGroup(of: Void.self) { group in
                    for index in 0..<50 {
                        group.addTask {
                            _ = await service.createNote(title: String(format: "note %02d", index), in: inbox.id)
                        }
                    }
                }
                let titles = await service.notes(in: inbox.id).value?.map(\.title)
                #expect(titles == (0..<50).map { String(format: "note %02d", $0) })
            }
        }
    }
}
