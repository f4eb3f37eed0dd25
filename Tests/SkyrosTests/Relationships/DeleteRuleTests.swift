import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTestEntities
import SkyrosTestSupport
import Testing

/// The in-memory store applies the foreign keys' rules as PostgreSQL does: the same rows and the same errors.
@Suite("Delete rules on both stores")
struct DeleteRuleTests {
    /// What a scenario left: every table's rows, and the error it threw (as PostgreSQL reports it).
    struct Outcome: Equatable, CustomStringConvertible {
        var publishers: [RelPublisher] = []
        var authors: [RelAuthor] = []
        var books: [RelBook] = []
        var reviews: [RelReview] = []
        var error: String?
        var cascaded: [String] = []

        var description: String {
            "publishers \(self.publishers.map(\.id)), authors \(self.authors.map { "\($0.id):\($0.publisher?.id ?? 0)" }), "
                + "books \(self.books.map(\.id)), reviews \(self.reviews.map(\.id)), error \(self.error ?? "none")"
        }
    }

    static func describe(_ error: any Error) -> String {
        guard let error = error as? PGError else { return "\(type(of: error)): \(error)" }
        return "\(error.kind) \(error.sqlState.map { "\($0)" } ?? "-") constraint=\(error.constraint ?? "-") table=\(error.table ?? "-") "
            + "message=\(error.message) detail=\(error.detail ?? "-")"
    }

    /// Seeds the sample, runs `changes`, and reads every table back.
    func outcome(_ kind: StoreKind, _ changes: ChangeSet) async throws -> Outcome {
        try await RelationshipHarness.with(kind) { harness in
            try await harness.seed(RelationshipSchema.sample())
            var outcome = Outcome()
            do {
                _ = try await harness.store.apply(changes)
            } catch {
                outcome.error = Self.describe(error)
            }
            outcome.publishers = try await harness.store.fetch(RelPublisher.self).map(\.value)
            outcome.authors = try await harness.store.fetch(RelAuthor.self).map(\.value)
            outcome.books = try await harness.store.fetch(RelBook.self).map(\.value)
            outcome.reviews = try await harness.store.fetch(RelReview.self).map(\.value)
            return outcome
        }
    }

    func same(_ changes: ChangeSet, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Outcome {
        let memory = try await self.outcome(.inMemory, changes)
        let postgres = try await self.outcome(.postgres, changes)
        #expect(memory == postgres, "in memory: \(memory)\npostgres: \(postgres)", sourceLocation: sourceLocation)
        return postgres
    }

    @Test("CASCADE: deleting an author deletes its books")
    func cascade() async throws {
        var changes = ChangeSet()
        changes.delete(RelAuthor.self, id: 1)   // books 10, 20, …, 100: none reviewed
        let outcome = try await self.same(changes)
        #expect(outcome.error == nil)
        #expect(!outcome.authors.contains { $0.id == 1 })
        #expect(outcome.books.count == 90 && !outcome.books.contains { $0.author.id == 1 })
    }

    @Test("A cascade that reaches a NO ACTION key fails with the constraint named and changes nothing")
    func cascadeBlocked() async throws {
        var changes = ChangeSet()
        changes.delete(RelAuthor.self, id: 2)   // books 1, 11, …: reviewed
        let outcome = try await self.same(changes)
        #expect(outcome.error?.contains("constraint=rel_reviews_select_fkey table=rel_reviews") == true, "\(outcome)")
        #expect(outcome.error?.contains("23503") == true)
        #expect(outcome.authors.count == 10 && outcome.books.count == 100)
    }

    @Test("SET NULL: deleting a publisher clears its authors' reference")
    func setNull() async throws {
        var changes = ChangeSet()
        changes.delete(where: #Predicate<RelPublisher> { $0.id == 2 })
        let outcome = try await self.same(changes)
        #expect(outcome.error == nil)
        #expect(outcome.authors.filter { $0.publisher == nil }.count == RelationshipSchema.sample().authors.filter { $0.publisher == nil || $0.publisher?.id == 2 }.count)
    }

    @Test("NO ACTION: deleting a reviewed book fails; a whole change set is undone")
    func noAction() async throws {
        var changes = ChangeSet()
        changes.delete(RelAuthor.self, id: 1)
        changes.delete(RelBook.self, id: 3)
        let outcome = try await self.same(changes)
        #expect(outcome.error?.contains("still referenced from table \"rel_reviews\"") == true, "\(outcome)")
        #expect(outcome.authors.count == 10 && outcome.books.count == 100)
    }

    @Test("A reference to a missing row is refused on insert and on update")
    func missingTarget() async throws {
        var insert = ChangeSet()
        insert.insert(RelBook(id: 1000, title: "orphan", author: 99))
        let inserted = try await self.same(insert)
        #expect(inserted.error?.contains("Key (author_id)=(99) is not present in table \"rel_authors\"") == true, "\(inserted)")

        var update = ChangeSet()
        update.update(RelBook(id: 5, title: "book 5", author: 42), changedColumns: ["author_id"])
        let updated = try await self.same(update)
        #expect(updated.error?.contains("rel_books_author_id_fkey") == true, "\(updated)")

        var upsert = ChangeSet()
        upsert.upsert(RelBook(id: 6, title: "book 6", author: 77))
        let upserted = try await self.same(upsert)
        #expect(upserted.error?.contains("Key (author_id)=(77) is not present") == true, "\(upserted)")

        var valid = ChangeSet()
        valid.update(RelBook(id: 5, title: "book 5", author: 7), changedColumns: ["author_id"])
        let moved = try await self.same(valid)
        #expect(moved.error == nil && moved.books.first { $0.id == 5 }?.author.id == 7)
    }

    @Test("The in-memory store reports the rows its rules changed")
    func cascadedReported() async throws {
        let store = InMemoryStore()
        let sample = RelationshipSchema.sample()
        var seed = ChangeSet()
        seed.bulkInsert(sample.publishers)
        seed.bulkInsert(sample.authors)
        seed.bulkInsert(sample.books)
        _ = try await store.apply(seed)
        var changes = ChangeSet()
        changes.delete(RelAuthor.self, id: 1)
        changes.delete(RelPublisher.self, id: 3)
        let result = try await store.apply(changes)
        #expect(result.cascaded.filter { $0.kind == .deleted }.map(\.table) == Array(repeating: "rel_books", count: 10))
        let nulled = sample.authors.filter { $0.id != 1 && $0.publisher?.id == 3 }
        #expect(result.cascaded.filter { $0.kind == .updated }.count == nulled.count)
        #expect(result.operations.map(\.count) == [1, 1])
    }

    @Test("findOrCreate of a row referring to a missing row fails alike")
    func findOrCreateMissingTarget() async throws {
        var errors: [String] = []
        for kind in StoreKind.allCases {
            try await RelationshipHarness.with(kind) { harness in
                try await harness.seed(RelationshipSchema.sample())
                do {
                    _ = try await harness.store.findOrCreate(RelBook(id: 900, title: "x", author: 55))
                    errors.append("none")
                } catch {
                    errors.append(Self.describe(error))
                }
                // An existing row is found whatever it refers to.
                #expect(try await harness.store.findOrCreate(RelBook(id: 1, title: "x", author: 55)).created == false)
            }
        }
        #expect(errors.count == 2 && errors[0] == errors[1], "\(errors)")
        #expect(errors.first?.contains("rel_books_author_id_fkey") == true)
    }
}
