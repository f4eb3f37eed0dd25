import Foundation
import SkyrosMacros
import SkyrosMigrations
import SkyrosTesting
import Testing

/// The schema of the macro-declared entities.
private let schema = try! SchemaMigration(
    version: 1, description: "macro entities",
    up: """
        CREATE TABLE authors (id uuid PRIMARY KEY, name text NOT NULL, email text);
        CREATE TABLE tickets (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            title text NOT NULL,
            author_id uuid REFERENCES authors (id),
            assignee text,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            title_length integer NOT NULL GENERATED ALWAYS AS (length(title)) STORED
        );
        CREATE FUNCTION touch_ticket() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN NEW.updated_at = clock_timestamp(); RETURN NEW; END $$;
        CREATE TRIGGER touch BEFORE INSERT OR UPDATE ON tickets FOR EACH ROW EXECUTE FUNCTION touch_ticket();
        CREATE TABLE books (
            id bigint PRIMARY KEY, title text NOT NULL, author_id uuid NOT NULL REFERENCES authors (id) ON DELETE CASCADE
        );
        CREATE TABLE reviews (
            id bigint PRIMARY KEY, text text NOT NULL,
            reviewed_book bigint NOT NULL REFERENCES books (id) ON DELETE CASCADE,
            reply_to_id bigint REFERENCES reviews (id) ON DELETE SET NULL
        );
        CREATE TABLE course_enrollment (
            course_id bigint NOT NULL, student_id uuid NOT NULL, grade text, PRIMARY KEY (course_id, student_id)
        );
        """)

/// Entities declared with `@Entity` in a real stack on PostgreSQL: validated against the live schema at start,
/// written and read back, database-set columns included.
@Suite struct MacroEntityStackTests {
    /// The database of `DATABASE_URL` (CI's `scripts/with-postgres` sets it).
    private func database() throws -> TestDatabase {
        try #require(try TestDatabase.fromEnvironment(), "set DATABASE_URL to a PostgreSQL database")
    }

    private func withStack(_ body: (DataStack) async throws -> Void) async throws {
        let configuration = DataStackConfiguration(
            store: .inMemory, migrations: .migrations([schema]),
            entities: [Author.self, Book.self, Review.self, Ticket.self, CourseEnrollment.self])
        try await self.database().withStack(configuration, prefix: "macros", body)
    }

    @Test func theStackStartsAndWritesAndReadsEveryKindOfColumn() async throws {
        try await self.withStack { stack in
            let ada = Author(id: UUID(), name: "Ada", email: nil)
            try await stack.write(durability: .committed) { try $0.insert(ada) }

            // An identity id at once; the database-set columns as stored once committed.
            var ticket = Ticket(title: "Printer", authorID: ada.id, assigneeName: "Grace")
            ticket.isSelected = true
            let inserted = try await stack.write(durability: .committed) { try $0.insert(ticket) }
            #expect(inserted.id > 0)
            let stored = try #require(try await stack.read { try await $0.object(Ticket.self, id: inserted.id) })
            #expect(stored.title == "Printer" && stored.authorID == ada.id && stored.assigneeName == "Grace")
            #expect(stored.titleLength == 7)
            #expect(stored.createdAt > Date.now.addingTimeInterval(-600) && stored.createdAt != .distantPast)
            #expect(stored.updatedAt >= stored.createdAt)
            #expect(stored.isSelected == false)  // transient: not stored, decoded to its initial value

            // An update: the trigger moves updated_at, the generated column follows the title.
            var renamed = stored
            renamed.title = "Large printer"
            try await stack.write(durability: .committed) { try await $0.update(renamed) }
            let updated = try #require(try await stack.read { try await $0.object(Ticket.self, id: inserted.id) })
            #expect(updated.title == "Large printer" && updated.titleLength == 13)
            #expect(updated.updatedAt > stored.updatedAt && updated.createdAt == stored.createdAt)

            // The README's Author: its default sort, and a fetch by predicate.
            try await stack.write(durability: .committed) {
                try $0.insert(Author(id: UUID(), name: "Charles", email: "charles@example.com"))
            }
            let authors = try await stack.read { try await $0.fetch(FetchDescriptor<Author>()) }
            #expect(authors.map(\.name) == ["Ada", "Charles"])
            let charles = try await stack.read {
                try await $0.fetch(FetchDescriptor<Author>(predicate: #Predicate { $0.email != nil }))
            }
            #expect(charles.map(\.name) == ["Charles"])
        }
    }

    /// `@Related` relationships: start checks the to-one against the table's foreign key (`ON DELETE CASCADE`),
    /// a prefetch loads them both ways, and the cascade deletes an author's books.
    @Test func macroDeclaredRelationshipsStartPrefetchAndCascade() async throws {
        try await self.withStack { stack in
            let ada = Author(id: UUID(), name: "Ada", email: nil)
            let charles = Author(id: UUID(), name: "Charles", email: nil)
            try await stack.write(durability: .committed) { context in
                try context.insert(ada)
                try context.insert(charles)
                try context.insert(Book(id: 1, title: "Notes", author: Reference(to: ada)))
                try context.insert(Book(id: 2, title: "Engines", author: Reference(to: charles)))
                try context.insert(Book(id: 3, title: "Sketch", author: Reference(ada.id)))
            }

            let books = try await stack.read {
                try await $0.fetchWithRelationships(
                    FetchDescriptor<Book>(sortBy: [SortDescriptor(\Book.id)], relationshipKeyPathsForPrefetching: [\.author]))
            }
            #expect(books.map(\.title) == ["Notes", "Engines", "Sketch"])
            #expect(try books.map { try books.related(\.author, of: $0)?.name } == ["Ada", "Charles", "Ada"])

            let authors = try await stack.mainContext.fetchWithRelationships(
                FetchDescriptor<Author>(relationshipKeyPathsForPrefetching: [\.books]))
            #expect(authors.map(\.name) == ["Ada", "Charles"])
            #expect(try authors.map { try authors.related(\.books, of: $0).map(\.title) } == [["Notes", "Sketch"], ["Engines"]])

            // ON DELETE CASCADE, as declared by @Related and checked at start.
            try await stack.write(durability: .committed) { try await $0.delete(Author.self, id: ada.id) }
            let left = try await stack.read { try await $0.fetch(FetchDescriptor<Book>(sortBy: [SortDescriptor(\Book.id)])) }
            #expect(left.map(\.title) == ["Engines"])
        }
    }

    /// A nullable reference to the entity's own table, `ON DELETE SET NULL`, and the to-many over it.
    @Test func aSetNullReferenceToItsOwnTableAndItsToMany() async throws {
        try await self.withStack { stack in
            let ada = Author(id: UUID(), name: "Ada", email: nil)
            try await stack.write(durability: .committed) { context in
                try context.insert(ada)
                try context.insert(Book(id: 1, title: "Notes", author: Reference(to: ada)))
                try context.insert(Review(id: 1, text: "Clear", book: Reference(1), replyTo: nil))
                try context.insert(Review(id: 2, text: "Agreed", book: Reference(1), replyTo: Reference(1)))
                try context.insert(Review(id: 3, text: "Too short", book: Reference(1), replyTo: Reference(1)))
            }
            let reviews = try await stack.read {
                try await $0.fetchWithRelationships(
                    FetchDescriptor<Review>(
                        predicate: #Predicate { $0.id == 1 }, relationshipKeyPathsForPrefetching: [\.replies, \.book]))
            }
            let first = try #require(reviews.first)
            #expect(try reviews.related(\.replies, of: first).map(\.text) == ["Agreed", "Too short"])
            #expect(try reviews.related(\.book, of: first)?.title == "Notes")

            // ON DELETE SET NULL: the replies stay, without their reference.
            try await stack.write(durability: .committed) { try await $0.delete(Review.self, id: 1) }
            let left = try await stack.read { try await $0.fetch(FetchDescriptor<Review>(sortBy: [SortDescriptor(\Review.id)])) }
            #expect(left.map(\.id) == [2, 3] && left.allSatisfy { $0.replyTo == nil })
        }
    }

    /// The delete rule `@Related` declares is checked against the database's foreign key at start.
    @Test func aDeleteRuleTheForeignKeyDoesNotHaveIsRefusedAtStart() async throws {
        let noAction = try SchemaMigration(
            version: 1, description: "books without cascade",
            up: """
                CREATE TABLE authors (id uuid PRIMARY KEY, name text NOT NULL, email text);
                CREATE TABLE books (id bigint PRIMARY KEY, title text NOT NULL, author_id uuid NOT NULL REFERENCES authors (id));
                """)
        let configuration = DataStackConfiguration(
            store: .inMemory, migrations: .migrations([noAction]), entities: [Author.self, Book.self])
        let database = try self.database()
        do {
            try await database.withStack(configuration, prefix: "macros") { _ in }
            Issue.record("the stack started on a foreign key without ON DELETE CASCADE")
        } catch {
            #expect("\(error)".contains("books.author_id → authors.id"), "\(error)")
            #expect("\(error)".contains("ON DELETE CASCADE"), "\(error)")
        }
    }

    @Test func aCompositeKeyIsWrittenAndReadByItsKey() async throws {
        try await self.withStack { stack in
            let student = UUID()
            try await stack.write(durability: .committed) {
                try $0.insert(CourseEnrollment(courseID: 7, studentID: student, grade: nil))
            }
            try await stack.write(durability: .committed) { context in
                var enrollment = try #require(try await context.object(CourseEnrollment.self, id: CompositeKey(7, student)))
                enrollment.grade = "A"
                try await context.update(enrollment)
            }
            let read = try await stack.read { try await $0.object(CourseEnrollment.self, id: CompositeKey(7, student)) }
            #expect(read?.grade == "A")
        }
    }

    /// Names that need quoting, derived by the macro, go through the store as any other.
    @Test func hostileNamesAreWrittenAndRead() async throws {
        let table = try SchemaMigration(
            version: 1, description: "hostile names",
            up: #"CREATE TABLE "order" (id integer PRIMARY KEY, "say ""hi""" text NOT NULL, "back\slash" text NOT NULL, "$1" integer NOT NULL);"#)
        let configuration = DataStackConfiguration(
            store: .inMemory, migrations: .migrations([table]), entities: [HostileNames.self])
        try await self.database().withStack(configuration, prefix: "macros") { stack in
            let row = HostileNames(id: 1, quote: "q", path: "p", n: 2)
            try await stack.write(durability: .committed) { try $0.insert(row) }
            let read = try await stack.read { try await $0.fetch(FetchDescriptor<HostileNames>(predicate: #Predicate { $0.n == 2 })) }
            #expect(read.map(\.quote) == ["q"] && read.map(\.path) == ["p"])
        }
    }

    /// A mismatch the macro cannot see (a column the table lacks) is still refused at start, naming it.
    @Test func aSchemaMismatchIsRefusedAtStart() async throws {
        let withoutEmail = try SchemaMigration(
            version: 1, description: "authors without email", up: "CREATE TABLE authors (id uuid PRIMARY KEY, name text NOT NULL);")
        let configuration = DataStackConfiguration(
            store: .inMemory, migrations: .migrations([withoutEmail]), entities: [Author.self])
        let database = try self.database()
        do {
            try await database.withStack(configuration, prefix: "macros") { _ in }
            Issue.record("the stack started on a table without the column \"email\"")
        } catch {
            #expect("\(error)".contains("email"), "\(error)")
        }
    }
}

/// The macro's `Author` and the README's hand-written one describe the same table.
@Suite struct MacroEntityDeclarationTests {
    @Test func theMacroAuthorIsTheHandWrittenOne() {
        #expect(Author.tableName == HandWrittenAuthor.tableName)
        #expect(Author.columns.map(\.name) == HandWrittenAuthor.columns.map(\.name))
        #expect(Author.columns.map { "\($0.valueType)" } == HandWrittenAuthor.columns.map { "\($0.valueType)" })
        #expect(Author.columns.map(\.generated) == HandWrittenAuthor.columns.map(\.generated))
        #expect(Author.defaultSort.count == 1)
    }

    /// The macro's `Book` and `Author` have the hand-written ones' relationships: same kinds, same foreign keys.
    @Test func theMacroRelationshipsAreTheHandWrittenOnes() throws {
        #expect(Book.tableName == HandWrittenBook.tableName)
        #expect(Book.columns.map(\.name) == HandWrittenBook.columns.map(\.name))
        #expect(Book.columns.map(\.name) == ["id", "title", "author_id"])
        let bookKinds = Book.relationships.map { $0.kind == .toOne ? "to-one" : "to-many" }
        let handWrittenBookKinds = HandWrittenBook.relationships.map { $0.kind == .toOne ? "to-one" : "to-many" }
        #expect(bookKinds == handWrittenBookKinds && bookKinds == ["to-one"])
        let bookKeys: [ForeignKey] = try Book.relationships.map { try $0.foreignKey() }
        let handWrittenBookKeys: [ForeignKey] = try HandWrittenBook.relationships.map { try $0.foreignKey() }
        #expect(bookKeys == handWrittenBookKeys)
        #expect(bookKeys.map { "\($0) \($0.deleteRule)" } == ["books.author_id → authors.id CASCADE"])

        let authorKinds = Author.relationships.map { $0.kind == .toOne ? "to-one" : "to-many" }
        #expect(authorKinds == ["to-many"])
        let authorKeys: [ForeignKey] = try Author.relationships.map { try $0.foreignKey() }
        let handWrittenAuthorKeys: [ForeignKey] = try HandWrittenAuthor.relationships.map { try $0.foreignKey() }
        #expect(authorKeys == handWrittenAuthorKeys && authorKeys == bookKeys)
        let authorKeyPaths: [AnyKeyPath] = Author.relationships.map { $0.keyPath }
        #expect(authorKeyPaths == [\Author.books])
        // An entity with no @Related keeps the default (its references are to-ones with NO ACTION).
        #expect(Ticket.relationships.isEmpty)
    }

    /// A reference is encoded as its id under the column's name.
    @Test func aReferenceIsCodedAsItsIDUnderItsColumn() throws {
        let author = UUID()
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(Book(id: 1, title: "Notes", author: Reference(author))))
        #expect((json as? [String: Any])?["author_id"] as? String == author.uuidString)
    }

    @Test func generatedColumnsAndNamesAreDerived() {
        #expect(Ticket.tableName == "tickets")
        #expect(
            Ticket.columns.map(\.name)
                == ["id", "title", "author_id", "assignee", "created_at", "updated_at", "title_length"])
        #expect(
            Ticket.columns.map(\.generated)
                == [.identity, nil, nil, nil, .onInsert, .onInsertAndUpdate, .computed])
        #expect(CourseEnrollment.tableName == "course_enrollment")
        #expect(CourseEnrollment.primaryKey.keyPaths == [\CourseEnrollment.courseID, \CourseEnrollment.studentID])
    }

    @Test func hostileNamesKeepTheirValue() {
        #expect(HostileNames.tableName == "order")
        #expect(HostileNames.columns.map(\.name) == ["id", "say \"hi\"", "back\\slash", "$1"])
    }

    @Test func codableUsesTheColumnNamesAndLeavesTransientPropertiesOut() throws {
        var ticket = Ticket(title: "Printer", assigneeName: "Grace")
        ticket.isSelected = true
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(ticket)) as? [String: Any]
        #expect(Set(json?.keys ?? [:].keys) == ["id", "title", "assignee", "created_at", "updated_at", "title_length"])
    }
}
