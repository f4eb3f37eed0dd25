import Foundation
import Logging
import SkyrosPostgres
import SkyrosStore

/// A scratch pad of entity changes over a parent: the stack's root (for `DataStack/mainContext` and
/// background contexts) or another context (for child contexts, nestable).
///
/// Reads see the context's own unsaved changes over its parent's view (read-your-writes all the way down to
/// the changes queued for commit). ``save()`` moves the changes into the parent atomically; for a context
/// whose parent is the root, saving makes them visible to every reader in the process at once and queues
/// their commit. ``saveToStore()`` pushes through every parent and waits for the PostgreSQL commit.
///
/// ```swift
/// let context = stack.newBackgroundContext()
/// try context.insert(Author(id: UUID(), name: "Ada"))
/// if var book = try await context.first(FetchDescriptor<Book>(predicate: #Predicate { $0.title == "Notes" })) {
///     book.year = 1843
///     try await context.update(book)            // writes only "year", with the version read
/// }
/// try await context.saveToStore()              // one transaction; throws its error
/// ```
///
/// Contexts are thread-safe (`Sendable`): each operation is atomic. Use ``perform(_:)`` to group work.
///
/// ## Topics
/// - ``fetch(_:)-(FetchDescriptor<T>)``
/// - ``fetch(_:)-(T.Type)``
/// - ``first(_:)``
/// - ``fetchPage(_:after:)``
/// - ``count(_:)``
/// - ``aggregate(_:_:)``
/// - ``aggregate(_:groupBy:_:)->[(K,(V))]``
/// - ``aggregate(_:groupBy:_:)->[((K1,K2),(V))]``
/// - ``fetch(_:as:propertiesToFetch:)``
/// - ``object(_:id:)``
/// - ``insert(_:)``
/// - ``update(_:)``
/// - ``delete(_:)``
/// - ``delete(_:id:)``
/// - ``delete(where:)``
/// - ``update(where:set:)``
/// - ``update(_:ifVersion:)``
/// - ``version(of:id:)``
/// - ``upsert(_:)``
/// - ``upsert(_:onConflict:)``
/// - ``bulkInsert(_:)``
/// - ``findOrCreate(_:)``
/// - ``save()``
/// - ``saveToStore()``
/// - ``reset()``
/// - ``hasChanges``
/// - ``newChildContext()``
/// - ``perform(_:)``
public final class DataContext: Sendable {
    package enum Parent: Sendable {
        case root
        case context(DataContext)
    }

    let core: StackCore
    let parent: Parent
    /// The main context does not remember what it reads (the cache does).
    let isMain: Bool
    let tracker = Locked(ChangeTracker())
    /// Names this context in the bases of rows its children read from its changes.
    let id = DataContext.nextID.withLock { next in
        defer { next += 1 }
        return next
    }
    private static let nextID = Locked<UInt64>(1)

    package init(core: StackCore, parent: Parent, isMain: Bool = false) {
        self.core = core
        self.parent = parent
        self.isMain = isMain
    }

    // MARK: Reads

    /// The rows matching a descriptor (predicate, sort, limit, offset), with this context's unsaved changes
    /// and the stack's queued changes applied. Relationships the descriptor names for prefetching are fetched too
    /// (one query each; on the main context they enter the cache): ``fetchWithRelationships(_:)`` returns them.
    ///
    /// ```swift
    /// let recent = try await context.fetch(FetchDescriptor<Book>(sortBy: [SortDescriptor(\.year, order: .reverse)], fetchLimit: 10))
    /// ```
    /// - Throws: `QueryError` for an untranslatable predicate, `PGError`, ``DataStackError``.
    public func fetch<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> [T] {
        if !descriptor.prefetchPaths.isEmpty { return try await self.fetchWithRelationships(descriptor).rows }
        return try await self.layeredFetch(descriptor).map(\.value)
    }

    /// Every row of `T` in its default order.
    public func fetch<T: Entity>(_ type: T.Type) async throws -> [T] {
        try await self.fetch(FetchDescriptor<T>())
    }

    /// The first row matching the descriptor (its limit is set to 1), or `nil`.
    public func first<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> T? {
        var descriptor = descriptor
        descriptor.fetchLimit = 1
        return try await self.fetch(descriptor).first
    }

    /// The number of rows matching the descriptor, with unsaved and queued changes counted.
    public func count<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> Int {
        try self.checkValid()
        if self.hasChanges(inAnyOf: descriptor.readTables) { return try await self.fetch(descriptor).count }
        switch self.parent {
        case .root: return try await self.core.count(descriptor)
        case .context(let parent): return try await parent.count(descriptor)
        }
    }

    /// Whether this context has unsaved changes of rows of `table`.
    func hasChanges(inTable table: String) -> Bool {
        self.tracker.withLock { $0.countByTable[table] } > 0
    }

    /// Whether this context has unsaved changes of rows of any of `tables`.
    func hasChanges(inAnyOf tables: [String]) -> Bool {
        self.tracker.withLock { tracker in tables.contains { tracker.countByTable[$0] > 0 } }
    }

    /// The row with a primary key, or `nil`. On the main context a cached row is served from memory.
    public func object<T: Entity>(_ type: T.Type, id: T.ID) async throws -> T? {
        try await self.lookup(type, id: id)?.value as? T
    }

    /// Whether the row has changes not yet committed: this context's (or a parent's) unsaved ones, or a queued
    /// write's. While it does, a reader sees the values the app wrote; the columns the database sets
    /// (`DatabaseGenerated`: `now()` defaults, trigger-set columns, computed columns) hold the app's values
    /// until the commit settles, then the stored ones.
    ///
    /// ```swift
    /// try await stack.write { try $0.insert(ticket) }                 // queued
    /// let pending = try stack.mainContext.hasPendingChanges(Ticket.self, id: ticket.id)   // true until it commits
    /// ```
    public func hasPendingChanges<T: Entity>(_ type: T.Type, id: T.ID) throws -> Bool {
        try self.checkValid()
        let key = try RowKey(type, id: id)
        if self.tracker.withLock({ $0.row(key) }) != nil { return true }
        switch self.parent {
        case .root: return self.core.isPending(key)
        case .context(let parent): return try parent.hasPendingChanges(type, id: id)
        }
    }

    // MARK: Writes

    /// Inserts a row (committed on save; a duplicate primary key fails the commit with `.uniqueViolation`) and
    /// returns it as recorded.
    ///
    /// The row is checked against its table's columns first (see `ColumnValueError`) and normalised to what
    /// the table stores (dates rounded to microseconds, numbers to their scale). When its entity's key is
    /// `DatabaseGenerated.identity` and its id is `0`, it gets the next id of the column's sequence, at once
    /// (from a block fetched ahead):
    ///
    /// ```swift
    /// let ticket = try context.insert(Ticket(id: 0, title: "Printer", createdAt: .now, updatedAt: .now, titleLength: 0))
    /// print(ticket.id)   // 101
    /// ```
    ///
    /// The columns the database sets (`DatabaseGenerated`) hold the values given here until the commit; then
    /// readers see the stored ones.
    /// - Returns: the row as recorded: normalised, with its allocated id.
    /// - Throws: `ColumnValueError` for a value its column cannot hold; ``DataStackError`` `.noIdentityAvailable`
    ///   when no allocated id is left. Nothing is recorded.
    @discardableResult
    public func insert<T: Entity>(_ value: T) throws -> T {
        try self.checkValid()
        let change = try self.admitted(self.core.assigningIdentity(value)) { .inserted($0) }
        try self.record(change)
        return change.value as? T ?? value
    }

    /// Waits until `count` ids of `T` (an entity with an `DatabaseGenerated/identity` key) are allocated, so
    /// that as many inserts find one at once: for a write that inserts more rows than a block holds.
    ///
    /// ```swift
    /// try await context.reserveIdentities(Ticket.self, count: rows.count)
    /// for row in rows { try context.insert(Ticket(id: 0, title: row.title, …)) }
    /// ```
    /// - Throws: the store's error when a block cannot be fetched.
    public func reserveIdentities<T: Entity>(_ type: T.Type, count: Int) async throws {
        try self.checkValid()
        let plan = try EntityPlan<T>.shared
        guard plan.identityIndex != nil else { return }
        try await self.core.identities.reserve(plan, count: count)
    }

    /// Inserts many rows (one bulk insert — `COPY` for large batches — when committed).
    public func bulkInsert<T: Entity>(_ values: [T]) throws {
        try self.checkValid()
        let changes = try values.map { try self.admitted(self.core.assigningIdentity($0)) { .inserted($0) } }
        try self.tracker.withLock { tracker in
            // All or nothing: a row held as another entity type refuses the whole batch.
            for change in changes { if let mismatch = tracker.typeMismatch(change) { throw mismatch } }
            for change in changes { tracker.record(change) }
        }
    }

    /// Inserts the row or overwrites every column of the stored row with its primary key (`ON CONFLICT DO
    /// UPDATE` when committed: race-free across processes).
    public func upsert<T: Entity>(_ value: T) throws {
        try self.checkValid()
        try self.record(self.admitted(self.core.assigningIdentity(value)) { .upserted($0) })
    }

    /// Records a new state of an existing row. Only the columns that differ from the row as this context read
    /// it are written, guarded by the version read (optimistic locking); nothing at all when nothing changed.
    /// - Throws: `StoreError.notFound` when no such row is visible to this context; `ColumnValueError` for a
    ///   value its column cannot hold (nothing is recorded).
    public func update<T: Entity>(_ value: T) async throws {
        try self.checkValid()
        let (value, encodedValue) = try self.core.door.admit(value)
        let key = try RowKey(value)
        let probe = PendingRow(key: key, kind: EntityKind<T>(), id: value.id, state: .inserted(value))
        if let own = try self.tracker.withLock({ tracker -> PendingRow? in
            if let mismatch = tracker.typeMismatch(probe) { throw mismatch }
            return tracker.row(key)
        }) {
            switch own.state {
            case .deleted:
                throw StoreError.notFound(entity: String(describing: T.self), id: key.id.text ?? "NULL")
            case .updated(_, let original, let base):
                let (change, changed) = try self.update(
                    value, encoded: encodedValue, key: key, original: original as! T, base: base)
                self.tracker.withLock { changed ? $0.record(change) : $0.discard(key) }
            case .inserted, .upserted:
                try self.record(value, .updated(value, original: value, base: .none))
            }
            return
        }
        let read: (value: any Entity, base: BaseVersion)?
        if let snapshot = self.tracker.withLock({ $0.snapshot(key) }) {
            read = snapshot
        } else {
            read = try await self.parentLookup(T.self, id: value.id, key: key).map { ($0.value, $0.base) }
        }
        guard let read, let original = read.value as? T else {
            throw StoreError.notFound(entity: String(describing: T.self), id: key.id.text ?? "NULL")
        }
        let (change, changed) = try self.update(value, encoded: encodedValue, key: key, original: original, base: read.base)
        if changed { self.tracker.withLock { $0.record(change) } }
    }

    /// Records a new state of an existing row, guarded by `version` instead of the version this context read:
    /// the row version a client sent back (an HTTP `If-Match` holding the `ETag` that ``version(of:id:)`` gave).
    /// Only the columns that differ from the row as this context reads it are written; the save fails with
    /// `StoreError.versionConflict` unless the stored row still has `version`, whatever the write's merge
    /// policy. A version that differs from the one this context read fails at once, even when nothing changed.
    ///
    /// ```swift
    /// try await stack.write(durability: .committed) { context in
    ///     guard var ticket = try await context.object(Ticket.self, id: id) else { throw NotFound() }
    ///     ticket.title = newTitle
    ///     try await context.update(ticket, ifVersion: etag)   // a stale ETag: StoreError.versionConflict
    /// }
    /// ```
    /// - Throws: `StoreError.versionConflict` when the version this context read is not `version`;
    ///   `StoreError.notFound` when no such row is visible; ``DataStackError`` `.rowHasUnsavedChanges` when this
    ///   context or a parent holds an unsaved change of the row (its version is not a stored one);
    ///   `ColumnValueError`.
    public func update<T: Entity>(_ value: T, ifVersion version: Int64) async throws {
        try self.checkValid()
        let (value, encodedValue) = try self.core.door.admit(value)
        let key = try RowKey(value)
        if self.tracker.withLock({ $0.row(key) }) != nil {
            throw DataStackError(
                code: .rowHasUnsavedChanges,
                message: "row \(key.id.text ?? "NULL") of table \(key.table) has an unsaved change in this context: save it before an update guarded by a stored version")
        }
        let read: (value: any Entity, base: BaseVersion)?
        if let snapshot = self.tracker.withLock({ $0.snapshot(key) }) {
            read = snapshot
        } else {
            read = try await self.parentLookup(T.self, id: value.id, key: key).map { ($0.value, $0.base) }
        }
        guard let read, let original = read.value as? T else {
            throw StoreError.notFound(entity: String(describing: T.self), id: key.id.text ?? "NULL")
        }
        if case .parentChange = read.base {
            throw DataStackError(
                code: .rowHasUnsavedChanges,
                message: "row \(key.id.text ?? "NULL") of table \(key.table) has an unsaved change in a parent context: save it before an update guarded by a stored version")
        }
        if case .known(let seen) = read.base, seen != version {
            throw StoreError.versionConflict(entity: String(describing: T.self), id: key.id.text ?? "NULL", expected: version, actual: seen)
        }
        var (change, changed) = try self.update(value, encoded: encodedValue, key: key, original: original, base: .known(version))
        change.pinsVersion = true
        if changed { self.tracker.withLock { $0.record(change) } }
    }

    /// The row's stored version as this context reads it: the entity's `Entity/versionColumn` (1 on insert, +1
    /// on every write) or PostgreSQL's `xmin` (in memory: a counter). Send it as an HTTP `ETag`, and guard the
    /// client's change with ``update(_:ifVersion:)``. `nil` when there is no such row, and while the row has
    /// changes not committed yet (this context's, a parent's or a queued write's): its version is known once
    /// they commit.
    ///
    /// ```swift
    /// let (ticket, etag) = try await stack.read { context in
    ///     (try await context.object(Ticket.self, id: id), try await context.version(of: Ticket.self, id: id))
    /// }
    /// ```
    public func version<T: Entity>(of type: T.Type, id: T.ID) async throws -> Int64? {
        guard let found = try await self.lookup(type, id: id) else { return nil }
        if case .known(let version) = found.base { return version }
        return nil
    }

    /// The change recording `value` as an update of `original`, and whether any column differs. The row's
    /// encodings travel with it: the commit queue binds them instead of encoding the row again.
    private func update<T: Entity>(
        _ value: T, encoded encodedValue: [PGValue], key: RowKey, original: T, base: BaseVersion
    ) throws -> (change: PendingRow, changed: Bool) {
        let encoder = try RowEncoder<T>()
        let encoded = (value: encodedValue, original: try encoder.encode(original))
        let change = PendingRow(
            key: key, kind: EntityKind<T>(), id: value.id, updated: value, original: original, base: base, encoded: encoded)
        return (change, !encoder.changedColumns(fromEncoded: encoded.original, toEncoded: encoded.value).isEmpty)
    }

    /// Deletes a row (nothing when it does not exist).
    public func delete<T: Entity>(_ value: T) async throws {
        try await self.delete(T.self, id: value.id)
    }

    /// Deletes the row with a primary key, guarded by the version this context read (nothing when it does
    /// not exist).
    public func delete<T: Entity>(_ type: T.Type, id: T.ID) async throws {
        try self.checkValid()
        let key = try RowKey(type, id: id)
        let change = PendingRow(key: key, kind: EntityKind<T>(), id: id, state: .deleted(base: .none, emit: true))
        if let own = self.tracker.withLock({ $0.row(key) }) {
            if case .deleted = own.state { return }
            try self.record(change)
            return
        }
        let base: BaseVersion
        if let snapshot = self.tracker.withLock({ $0.snapshot(key) }) {
            base = snapshot.base
        } else {
            guard let row = try await self.parentLookup(type, id: id, key: key) else { return }
            base = row.base
        }
        self.tracker.withLock {
            $0.record(PendingRow(key: key, kind: EntityKind<T>(), id: id, state: .deleted(base: base, emit: true)))
        }
    }

    /// Deletes every row matching `predicate` (`nil`: every row of the table) and returns how many this
    /// context sees. When committed, the `DELETE … WHERE` also removes matching rows it had not seen.
    @discardableResult
    public func delete<T: Entity>(where predicate: Predicate<T>?) async throws -> Int {
        let matching = try await self.layeredFetch(FetchDescriptor<T>(predicate: predicate))
        let kind = EntityKind<T>()
        let changes = try matching.map { row in
            PendingRow(key: try RowKey(row.value), kind: kind, id: row.value.id, state: .deleted(base: .none, emit: false))
        }
        let operation = PendingSetWrite(table: T.tableName, updates: false, emit: { $0.delete(where: predicate) })
        self.tracker.withLock { tracker in
            tracker.record(setWrite: operation)
            for change in changes { tracker.record(change, moveToEnd: true) }
        }
        return matching.count
    }

    /// Sets columns of every row matching `predicate` (`nil`: every row of the table) in one statement when the
    /// context is saved, at its place among the context's changes: each column to a constant or to an expression
    /// over the row's columns that the database evaluates against the row as it stands then (`views + 1`). No
    /// version is read or compared, so concurrent increments from any number of processes neither conflict nor
    /// lose one another. Core Data's `NSBatchUpdateRequest` and EF Core's `ExecuteUpdate`, made atomic with the
    /// context's other changes.
    ///
    /// ```swift
    /// try await stack.write { context in
    ///     try context.update(where: #Predicate<Post> { $0.id == postID }, set: [.set(\.views, to: \.views + 1)])
    /// }
    /// ```
    ///
    /// Like a batch update, it is not applied to rows in memory before it commits: reads in this context (and,
    /// while it is queued, in the main context) show the rows as they were, and an update of one of those rows
    /// recorded after it in the same context conflicts at commit (its version was read before). Once it
    /// commits, the main context drops its cached rows of the table, and observers of the table in every
    /// stack and process run their fetch again.
    /// - Throws: `StoreError.unknownColumn` for a key path that is not one of the entity's columns, the primary
    ///   key, or a column the database sets; `QueryError` for a predicate with no SQL translation. Nothing is
    ///   recorded.
    public func update<T: Entity>(where predicate: Predicate<T>?, set assignments: [ColumnAssignment<T>]) throws {
        try self.checkValid()
        // Checked now (and the predicate translated), so that an unusable update fails here, not at commit.
        try ColumnAssignment.check(assignments, where: predicate)
        let operation = PendingSetWrite(table: T.tableName, updates: true, emit: { $0.update(where: predicate, set: assignments) })
        self.tracker.withLock { $0.record(setWrite: operation) }
    }

    /// Returns the row with `value`'s primary key as this context sees it, or records `value` as an insert when
    /// there is none. The insert is one of this context's changes: it commits with them when the context is
    /// saved, all or nothing (in `write {}`, a body that throws afterwards leaves no row), and `created` means
    /// "this context will create it". When another writer creates the row first, the save fails with `PGError`
    /// `.uniqueViolation` naming the primary key's constraint and saves none of the context's changes; run the
    /// write again, and `findOrCreate` finds that row. `DataStack/findOrCreate(_:)` is the immediate form: it
    /// commits at once, race-free (`INSERT … ON CONFLICT DO NOTHING`), outside any context.
    ///
    /// ```swift
    /// try await stack.write(durability: .committed) { context in
    ///     let (tag, created) = try await context.findOrCreate(Tag(id: "swift", uses: 0))
    ///     if created { try context.insert(AuditEntry(tag: tag.id)) }   // both rows, or neither
    /// }
    /// ```
    ///
    /// A row this context, a parent or a queued write deletes is not found: `value` is recorded as an insert
    /// after that deletion, and reported created.
    /// - Throws: `ColumnValueError` for a value its columns cannot hold (nothing is recorded), `PGError`,
    ///   ``DataStackError``.
    @discardableResult
    public func findOrCreate<T: Entity>(_ value: T) async throws -> (value: T, created: Bool) {
        try self.checkValid()
        let key = try RowKey(value)
        if let existing = try await self.lookup(T.self, id: value.id, key: key)?.value as? T { return (existing, false) }
        let inserted = try self.insert(value)
        return (inserted, true)
    }

    // MARK: Saving

    /// Whether the context has unsaved changes.
    public var hasChanges: Bool { self.tracker.withLock { $0.hasChanges } }

    /// Moves the unsaved changes into the parent, atomically. For the main context and background contexts
    /// the changes become visible to every reader at once and their commit is queued (in save order); commit
    /// failures are reported on `DataStack/errors`. Use ``saveToStore()`` to wait for the commit.
    /// - Throws: ``DataStackError`` (`.contextInvalidated`, `.stackShutDown`).
    public func save() throws {
        _ = try self.push()
    }

    /// Saves through every parent and waits until PostgreSQL committed; throws the commit's error (for
    /// example `StoreError.versionConflict` or a `PGError` `.uniqueViolation`), after which the change
    /// is reverted from the main context.
    public func saveToStore() async throws {
        var context = self
        while case .context(let parent) = context.parent {
            try context.save()
            context = parent
        }
        if let ticket = try context.push() {
            try await ticket.wait()
        } else {
            await self.core.flush()
        }
    }

    /// Discards the unsaved changes and what the context remembered of the rows it read.
    public func reset() {
        self.tracker.withLock { $0.reset() }
    }

    /// A new child context whose parent is this one.
    public func newChildContext() -> DataContext {
        DataContext(core: self.core, parent: .context(self))
    }

    /// Runs `body` with this context and returns its value (errors are rethrown).
    ///
    /// ```swift
    /// let count = try await context.perform { try await $0.count(FetchDescriptor<Book>()) }
    /// ```
    public func perform<R>(_ body: (DataContext) async throws -> R) async throws -> R {
        try self.checkValid()
        return try await body(self)
    }

    // MARK: Internals

    func checkValid() throws {
        if self.core.isInvalidated {
            throw DataStackError(
                code: .contextInvalidated,
                message: "this context was created before the store was destroyed and rebuilt; use a new context")
        }
    }

    /// Saves into the parent; returns the commit ticket when the parent is the root. `logger` receives the
    /// commit's own records (its failure) instead of the stack's logger.
    package func push(policy: MergePolicy? = nil, logger: Logger? = nil) throws -> CommitTicket? {
        try self.checkValid()
        switch self.parent {
        case .root:
            return try self.tracker.withLock { tracker in
                var copy = tracker
                tracker.savedBases = [:]   // `copy` alone holds them: noting the save does not copy them
                let generation = copy.generation
                let slots = copy.take()
                do {
                    let queued = try self.core.enqueue(slots, policy: policy, logger: logger)
                    if let queued { copy.noteSaved(slots, generation: generation, as: .pending(commit: queued.commit)) }
                    tracker = copy
                    return queued?.ticket
                } catch {
                    tracker.savedBases = copy.savedBases
                    throw error
                }
            }
        case .context(let parent):
            try self.tracker.withLock { tracker in
                var copy = tracker
                tracker.savedBases = [:]   // as above
                let generation = copy.generation
                let slots = copy.take()
                do {
                    // The changes now belong to the parent's current generation.
                    let merged = try parent.tracker.withLock { parentTracker -> ContextChange in
                        for case .row(let row) in slots {
                            if let mismatch = parentTracker.typeMismatch(row) { throw mismatch }
                        }
                        parentTracker.merge(slots, into: parent.id)
                        return ContextChange(context: parent.id, generation: parentTracker.generation)
                    }
                    copy.noteSaved(slots, generation: generation, as: .parentChange(merged))
                    tracker = copy
                } catch {
                    tracker.savedBases = copy.savedBases
                    throw error
                }
            }
            return nil
        }
    }

    private func change<T: Entity>(_ value: T, _ state: PendingRow.State) throws -> PendingRow {
        PendingRow(key: try RowKey(value), kind: EntityKind<T>(), id: value.id, state: state)
    }

    /// The change recording `value`, checked and normalised at the door, with its encoding.
    private func admitted<T: Entity>(_ value: T, _ state: (T) -> PendingRow.State) throws -> PendingRow {
        let (value, encoded) = try self.core.door.admit(value)
        return PendingRow(key: try RowKey(value), kind: EntityKind<T>(), id: value.id, state: state(value), encoded: encoded)
    }

    private func record<T: Entity>(_ value: T, _ state: PendingRow.State) throws {
        try self.record(self.change(value, state))
    }

    /// Records a change of a row, unless this context holds a change of it as another entity type.
    private func record(_ change: PendingRow) throws {
        try self.tracker.withLock { tracker in
            if let mismatch = tracker.typeMismatch(change) { throw mismatch }
            tracker.record(change)
        }
    }

    /// The row with `id` as this context sees it (its own change, else its parent's view); `nil` also when the
    /// row is held as another entity type of the same table. `key`: the row's key when the caller made it.
    func lookup<T: Entity>(_ type: T.Type, id: T.ID, key: RowKey? = nil) async throws -> FoundRow? {
        try self.checkValid()
        let key = try key ?? RowKey(type, id: id)
        if let (own, generation) = self.tracker.withLock({ tracker in tracker.row(key).map { ($0, tracker.generation) } }) {
            // Only a child context keeps the base of a row it reads here (this context's own change).
            return FoundRow(own.value, as: T.self, base: .parentChange(ContextChange(context: self.id, generation: generation)))
        }
        return try await self.parentLookup(type, id: id, key: key)
    }

    private func parentLookup<T: Entity>(_ type: T.Type, id: T.ID, key: RowKey) async throws -> FoundRow? {
        let found: FoundRow?
        switch self.parent {
        case .root: found = try await self.core.lookup(type, id: id, key: key)
        case .context(let parent): found = try await parent.lookup(type, id: id, key: key)
        }
        if !self.isMain, let found {
            self.tracker.withLock { $0.remember(key, value: found.value, base: found.base) }
        }
        return found
    }

    func layeredFetch<T: Entity>(_ descriptor: FetchDescriptor<T>) async throws -> [(value: T, base: BaseVersion)] {
        try self.checkValid()
        let (changes, generation) = self.tracker.withLock { ($0.rows(ofTable: T.tableName), $0.generation) }
        // A predicate across references, while this context changed rows it reads: the parent's filter would
        // not see those changes, so every row is fetched and filtered here, with the referenced rows as read
        // through this context.
        let referenced = descriptor.predicateReferencedTypes
        let evaluatesHere = !referenced.isEmpty && self.hasChanges(inAnyOf: FetchDescriptor<T>.readTables(referencing: referenced))
        let widened = evaluatesHere ? descriptor.unfiltered : Overlay.widened(descriptor, by: changes.count)
        let parentRows: [(value: T, base: BaseVersion)]
        switch self.parent {
        case .root: parentRows = try await self.core.fetch(widened)
        case .context(let parent): parentRows = try await parent.layeredFetch(widened)
        }
        var targets: ResolvedTargets?
        if evaluatesHere {
            var resolved = ResolvedTargets()
            for type in referenced { try await self.addEveryRow(of: type, to: &resolved) }
            targets = resolved
        }
        if !self.isMain {
            let keyed = try parentRows.map { (try RowKey($0.value), $0) }
            self.tracker.withLock { tracker in
                for (key, row) in keyed where changes[key] == nil { tracker.remember(key, value: row.value, base: row.base) }
            }
        }
        return try Overlay.apply(descriptor, base: parentRows.map { ($0.value, $0.base) }, changes: changes,
            changeBase: { _ in .parentChange(ContextChange(context: self.id, generation: generation)) }, targets: targets)
    }

    /// Adds every row of `type` as this context sees it.
    private func addEveryRow<R: Entity>(of type: R.Type, to targets: inout ResolvedTargets) async throws {
        targets.add(try await self.layeredFetch(FetchDescriptor<R>()).map(\.value))
    }
}
