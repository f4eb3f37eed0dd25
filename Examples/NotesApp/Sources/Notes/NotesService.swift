import Foundation
import Skyros

/// What a request gets: the service's answer, whatever carries it (an HTTP layer maps `.unavailable` to 503,
/// `.notFound` to 404, `.invalid` to 400, `.conflict` to 409).
public enum Answer<Value: Sendable>: Sendable {
    case ok(Value)
    case notFound
    case invalid(String)
    case conflict(String)
    /// The store cannot serve now (starting, unreachable); try again shortly.
    case unavailable(String)
}

extension Answer: Equatable where Value: Equatable {}

extension Answer {
    /// The value of `.ok`, else `nil`.
    public var value: Value? {
        if case .ok(let value) = self { return value }
        return nil
    }
}

/// The notes service: folders and their notes, on any `DataStackProtocol` its `StackStarter` gives (production:
/// `.live(NotesStack.configuration(store: .postgres(…)))`).
///
/// It starts in ``start()``, which never throws: a store that cannot be reached at start (or answers no read
/// right after) makes it ``Status/storeUnavailable(_:)`` and every request answers `.unavailable` until a later
/// `start()` succeeds; a start that fails for good (a migration, a schema that does not match) makes it
/// ``Status/failed(_:)``.
public actor NotesService {
    /// Where the service is in its life.
    public enum Status: Sendable, Equatable {
        case notStarted
        case starting
        case ready
        /// The store could not be reached; `start()` may be called again.
        case storeUnavailable(String)
        /// The start failed for a reason time does not fix.
        case failed(String)
    }

    private let starter: StackStarter
    private var stack: (any DataStackProtocol)?
    /// The service's status; ``start()`` moves it.
    public private(set) var status: Status = .notStarted

    /// A service that starts its stack with `starter`.
    public init(starter: StackStarter) {
        self.starter = starter
    }

    /// A service on a stack started already (or a test's double): ``start()`` only checks that it answers.
    public init(stack: any DataStackProtocol) {
        self.starter = StackStarter { _ in stack }
        self.stack = stack
    }

    /// Starts the stack (once: a later call after an unreachable store starts it again, or probes the stack it
    /// has) and checks that it answers a read. Returns the new status.
    @discardableResult
    public func start() async -> Status {
        if self.status == .starting || self.status == .ready { return self.status }
        self.status = .starting
        let stack: any DataStackProtocol
        if let started = self.stack {
            stack = started
        } else {
            do {
                stack = try await self.starter.start()
            } catch {
                self.status = Self.startFailure(error)
                return self.status
            }
            self.stack = stack
        }
        do {
            _ = try await stack.read { try await $0.first(FetchDescriptor<Folder>()) }
            self.status = .ready
        } catch {
            self.status = Self.startFailure(error)
        }
        return self.status
    }

    /// Shuts the stack down (its queued writes commit first).
    public func shutdown() async {
        await self.stack?.shutdown()
        self.stack = nil
        self.status = .notStarted
    }

    /// Creates a folder; its name must be new.
    public func createFolder(named name: String) async -> Answer<Folder> {
        let name = name.trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty else { return .invalid("a folder needs a name") }
        return await self.serve { stack in
            try await stack.write(durability: .committed) { context -> Answer<Folder> in
                let same = FetchDescriptor<Folder>(predicate: #Predicate { $0.name == name })
                if try await context.first(same) != nil { return .conflict("a folder named \(name) exists") }
                return .ok(try context.insert(Folder(name: name)))
            }
        }
    }

    /// Creates a note in folder `folderID`.
    public func createNote(title: String, body: String = "", in folderID: UUID) async -> Answer<Note> {
        let title = title.trimmingCharacters(in: .whitespaces)
        guard !title.isEmpty else { return .invalid("a note needs a title") }
        return await self.serve { stack in
            try await stack.write(durability: .committed) { context -> Answer<Note> in
                guard try await context.object(Folder.self, id: folderID) != nil else { return .notFound }
                return .ok(try context.insert(Note(folderID: folderID, title: title, body: body)))
            }
        }
    }

    /// The notes of folder `folderID`, by title.
    public func notes(in folderID: UUID) async -> Answer<[Note]> {
        await self.serve { stack in
            try await stack.read { context -> Answer<[Note]> in
                guard try await context.object(Folder.self, id: folderID) != nil else { return .notFound }
                let inFolder = FetchDescriptor<Note>(predicate: #Predicate { $0.folderID == folderID })
                return .ok(try await context.fetch(inFolder))
            }
        }
    }

    /// Renames note `id`.
    public func renameNote(_ id: UUID, to title: String) async -> Answer<Note> {
        let title = title.trimmingCharacters(in: .whitespaces)
        guard !title.isEmpty else { return .invalid("a note needs a title") }
        return await self.serve { stack in
            try await stack.write(durability: .committed) { context -> Answer<Note> in
                guard var note = try await context.object(Note.self, id: id) else { return .notFound }
                note.title = title
                try await context.update(note)
                return .ok(note)
            }
        }
    }

    /// Runs `handler` on the stack when the service is ready, and maps the store's errors to answers.
    private func serve<Value>(
        _ handler: (any DataStackProtocol) async throws -> Answer<Value>
    ) async -> Answer<Value> {
        guard self.status == .ready, let stack = self.stack else { return .unavailable(self.unavailableReason) }
        do {
            return try await handler(stack)
        } catch StoreError.versionConflict {
            return .conflict("the note was changed by another writer; read it again")
        } catch let error as DataStackError where error.code == .storeUnreachable || error.code == .deadlineExceeded {
            return .unavailable("the database is unreachable; try again shortly")
        } catch let error as PGError where error.kind == .uniqueViolation {
            return .conflict("a row with this key exists")
        } catch let error as ColumnValueError {
            return .invalid(error.description)
        } catch {
            return .unavailable("the store failed: \(error)")
        }
    }

    private var unavailableReason: String {
        switch self.status {
        case .notStarted: "the service has not started"
        case .starting: "the service is starting"
        case .ready: "the service has no stack"
        case .storeUnavailable(let reason), .failed(let reason): reason
        }
    }

    /// Unreachable: try again later. Anything else at start (migration, schema mismatch): failed.
    private static func startFailure(_ error: any Error) -> Status {
        if let error = error as? DataStackError, error.code == .storeUnreachable {
            return .storeUnavailable("the database is unreachable: \(error.message)")
        }
        return .failed("the store could not start: \(error)")
    }
}
