import CLibPQ
import Foundation
import Tracing

extension PGConnection {
    /// Sends many statements in libpq pipeline mode: one round trip, one sync, results in order.
    ///
    /// The statements run in one implicit transaction unless they contain their own `BEGIN`/`COMMIT`: if one
    /// fails, PostgreSQL aborts the rest up to the sync, nothing commits, and the thrown error's
    /// ``PGError/statementIndex`` names the failing statement. When they all succeed but the commit at the
    /// sync fails (a deferred constraint), the error has no statement index. A statement that cannot be sent (a
    /// value that does not encode, a NUL character in its text or a parameter, more than 65535 parameters) fails
    /// the pipeline with ``PGError/Kind/encoding`` and its index before anything is sent; should sending
    /// still fail part way, the statements already sent never commit: the pipeline fails as if that statement had
    /// failed on the server (a transaction left open is left failed, for its owner to roll back). Statements with
    /// parameters use this
    /// connection's prepared statements; a new one is prepared inside the same pipeline, once however often it
    /// repeats (unless prepared statements are disabled or the cache is full: then it is sent unnamed). A cached
    /// statement removed behind the connection's back (`DEALLOCATE ALL`, `DISCARD ALL`) is prepared again: when
    /// it is the pipeline's first statement (outside a transaction) the pipeline runs once more, otherwise it
    /// fails this once with SQLSTATE 26000.
    ///
    /// ```swift
    /// let inserts = (0..<10_000).map { i -> PGQuery in "INSERT INTO t (n) VALUES (\(i))" }
    /// try await connection.pipeline(inserts)
    /// ```
    /// - Returns: one ``PGRows`` per statement.
    @discardableResult
    public func pipeline(_ queries: [PGQuery]) async throws -> [PGRows] {
        // Checked before pipeline mode is entered: a statement found unsendable half way would leave the ones
        // before it sent.
        for (i, query) in queries.enumerated() {
            if let reason = LibPQ.unsendableReason(query) {
                throw PGError(kind: .encoding, message: reason, statementIndex: i)
            }
        }
        return try await self.pipelineWithoutChecking(queries)
    }

    /// ``pipeline(_:)`` without checking first that every statement can be sent: for tests of what happens when
    /// sending fails part way (the statements sent before are rolled back).
    package func pipelineWithoutChecking(_ queries: [PGQuery]) async throws -> [PGRows] {
        if queries.isEmpty { return [] }
        self.logger.debug("pipeline", metadata: ["skyros.pipeline.count": "\(queries.count)"])
        return try await self.timed("PIPELINE") {
            try await self.spanTarget.trace(
                sql: Self.distinctStatements(queries), operation: Self.batchOperationName(queries), batch: queries.count
            ) { try await self.pipelineRetryingStale(queries) }
        }
    }

    /// A pipeline's statements for `db.query.text`, each text once in order of first use (a group commit repeats
    /// a few statements many times).
    static func distinctStatements(_ queries: [PGQuery]) -> String {
        var seen: Set<String> = []
        return queries.compactMap { seen.insert($0.sql).inserted ? $0.sql : nil }.joined(separator: ";\n")
    }

    /// OpenTelemetry's name for a batch: `BATCH INSERT` when every statement is an insert, else `BATCH`.
    static func batchOperationName(_ queries: [PGQuery]) -> String {
        let first = StatementSpanTarget.operationName(of: queries[0].sql)
        return queries.dropFirst().allSatisfy { StatementSpanTarget.operationName(of: $0.sql) == first } ? "BATCH \(first)" : "BATCH"
    }

    private func pipelineRetryingStale(_ queries: [PGQuery]) async throws -> [PGRows] {
        let inTransaction = self.isInTransaction
        do {
            return try await self.pipelineOnce(queries)
        } catch let error as PGError
            where error.sqlState == .invalidSQLStatementName && error.statementIndex == 0 && !inTransaction
            && !self.isInTransaction
        {
            // The first statement was a cached one that is gone (`DISCARD ALL`): nothing of the pipeline ran,
            // and the statements it used are forgotten, so it runs once more (preparing them again).
            return try await self.pipelineOnce(queries)
        }
    }

    private func pipelineOnce(_ queries: [PGQuery]) async throws -> [PGRows] {
        let session = try self.openSession()
        let steps = session.pipelineSteps(for: queries)
        var prepared: [Int] = []
        defer {
            for index in prepared {
                if case .prepare(let name) = steps[index] { session.registerPrepared(queries[index], name: name) }
            }
        }
        do {
            return try await self.withSession { session in
                session.deallocateStaleStatements()
                return try Self.runPipeline(queries, steps: steps, on: session, prepared: &prepared)
            }
        } catch let error as PGError where error.sqlState == .featureNotSupported {
            // A cached statement whose table changed since it was prepared ("cached plan must not change result
            // type"): forget it, so the next pipeline prepares it again (this one's transaction is aborted).
            if let index = error.statementIndex, case .prepared = steps[index] { session.forgetPrepared(queries[index].sql) }
            throw error
        } catch let error as PGError where error.sqlState == .invalidSQLStatementName {
            // A cached statement is gone (`DEALLOCATE ALL`, `DISCARD ALL`), and likely every other one with it:
            // forget all those this pipeline used (the ones still allocated are deallocated before the next
            // statement), so the next pipeline prepares them again instead of failing on each in turn.
            if let index = error.statementIndex, case .prepared = steps[index] {
                for (i, step) in steps.enumerated() {
                    guard case .prepared = step else { continue }
                    session.forgetPrepared(queries[i].sql, allocated: i != index)
                }
            }
            throw error
        }
    }

    /// Fails on the server, so the statements of a pipeline that could not be sent whole commit nothing.
    static let abortStatement =
        "DO $$BEGIN RAISE EXCEPTION 'skyros: a pipeline statement could not be sent; the pipeline is rolled back'; END$$"

    private static func runPipeline(
        _ queries: [PGQuery], steps: [PipelineStep], on session: PGSession, prepared: inout [Int]
    ) throws -> [PGRows] {
        let connection = session.handle
        guard PQenterPipelineMode(connection) == 1 else {
            throw LibPQ.error(result: nil, connection: connection)
        }
        PQsetnonblocking(connection, 1)
        var items: [Bool] = []
        items.reserveCapacity(queries.count)
        for step in steps {
            if case .prepare = step { items.append(true) }
            items.append(false)
        }
        var reader = PipelineReader(prepareItems: items)
        var syncSent = false
        /// How many items (statements and `Prepare`s) were handed to libpq.
        var itemsSent = 0
        // Runs after the drain below: the statements whose Prepare succeeded exist on the server.
        defer { prepared = reader.prepared }
        defer {
            if !syncSent, PQstatus(connection) == CONNECTION_OK {
                // Sending failed part way, on this side. A bare sync would commit the statements already sent
                // (their implicit transaction), so a statement that fails goes before it, as if the unsendable
                // one had failed on the server: the implicit transaction is rolled back at the sync, and a
                // transaction that is open (begun by these statements or before them) is left failed, to be
                // rolled back by its owner, never committed. (Not a ROLLBACK: it would end a transaction begun
                // before the pipeline, and the caller's next statements would then run outside it.) Skipped, and
                // not needed, when a statement already failed on the server.
                reader.stopAfter(items: itemsSent)
                if PQsendQueryParams(connection, Self.abortStatement, 0, nil, nil, nil, nil, 0) == 1,
                    PQpipelineSync(connection) == 1
                {
                    PQsetnonblocking(connection, 0)
                    PQflush(connection)
                } else {
                    // Not even that could be queued: end the session instead (the server rolls back what it
                    // received when the connection closes without a sync); the drain below sees it broken.
                    shutdown(PQsocket(connection), Int32(SHUT_RDWR))
                }
            }
            // Drain whatever is left so the connection returns to a clean state.
            if !reader.finished, PQstatus(connection) == CONNECTION_OK {
                PQsetnonblocking(connection, 0)
                while !reader.finished {
                    guard let result = PQgetResult(connection) else {
                        _ = reader.nullResult()
                        if PQstatus(connection) != CONNECTION_OK { break }
                        continue
                    }
                    reader.take(result, connection: connection)
                }
            }
            PQexitPipelineMode(connection)
            PQsetnonblocking(connection, 0)
        }

        func pump(untilFlushed: Bool) throws {
            while true {
                let flush = PQflush(connection)
                if flush < 0 { throw LibPQ.error(result: nil, connection: connection) }
                try drainReady()
                if flush == 0 { return }
                LibPQ.wait(connection, read: true, write: true)
                if PQconsumeInput(connection) == 0 {
                    throw LibPQ.error(result: nil, connection: connection)
                }
            }
        }
        /// Takes the results libpq has, until it needs more input. Before the sync is sent, libpq may also run
        /// out of statements to report on: after a failure it answers every statement queued so far as aborted
        /// at once, then returns NULL again and again without being busy (a NULL with no result before it).
        func drainReady() throws {
            while !reader.finished, PQisBusy(connection) == 0 {
                guard let result = PQgetResult(connection) else {
                    if reader.nullResult() { continue }
                    return
                }
                reader.take(result, connection: connection)
            }
        }

        for (index, query) in queries.enumerated() {
            let sent: Int32
            do {
                sent = try LibPQ.withParameters(query.binds) { count, types, values -> Int32 in
                    switch steps[index] {
                    case .unnamed:
                        return PQsendQueryParams(connection, query.sql, count, types, values, nil, nil, 0)
                    case .prepared(let name):
                        return PQsendQueryPrepared(connection, name, count, values, nil, nil, 0)
                    case .prepare(let name):
                        guard PQsendPrepare(connection, name, query.sql, count, types) == 1 else { return 0 }
                        itemsSent += 1
                        return PQsendQueryPrepared(connection, name, count, values, nil, nil, 0)
                    }
                }
            } catch var error as PGError {
                error.statementIndex = index
                throw error
            }
            guard sent == 1 else {
                var error = LibPQ.error(result: nil, connection: connection)
                error.statementIndex = index
                throw error
            }
            itemsSent += 1
            if index % 256 == 255 {
                if PQconsumeInput(connection) == 0 {
                    throw LibPQ.error(result: nil, connection: connection)
                }
                try pump(untilFlushed: false)
                // A statement failed: the server skips the rest up to the sync, so they are not sent.
                if PQpipelineStatus(connection) == PQ_PIPELINE_ABORTED { break }
            }
        }
        guard PQpipelineSync(connection) == 1 else {
            throw LibPQ.error(result: nil, connection: connection)
        }
        syncSent = true
        try pump(untilFlushed: true)
        while !reader.finished {
            try drainReady()
            if reader.finished { break }
            guard session.replyWait.awaitReply(connection) else {
                throw LibPQ.error(result: nil, connection: connection)
            }
        }
        if let failure = reader.failure { throw failure }
        return reader.results
    }
}

/// How one statement of a pipeline is sent.
enum PipelineStep {
    /// Parsed for this execution only.
    case unnamed
    /// Executes a statement this connection prepared before.
    case prepared(String)
    /// Prepares the statement under this name, then executes it.
    case prepare(String)
}

/// Collects pipeline results: one result (or error) per item sent (a statement, or a statement's `Prepare`), a
/// NULL after each, then a sync.
private struct PipelineReader {
    /// Per item, in order: whether it is a `Prepare` (its result is not one of the statements' results).
    private(set) var prepareItems: [Bool]
    var item = 0
    var results: [PGRows] = []
    /// The indices of the statements whose `Prepare` succeeded.
    var prepared: [Int] = []
    var current: PGRows?
    var currentError: PGError?
    var failure: PGError?
    var finished = false
    /// A result was taken since the last NULL (each item ends with one NULL after its results).
    var tookResult = false

    init(prepareItems: [Bool]) {
        self.prepareItems = prepareItems
        self.results.reserveCapacity(prepareItems.count)
    }

    /// Only the first `count` items were sent (sending failed part way): what follows them (the failing
    /// statement sent instead) is no statement's result, and no `Prepare`'s.
    mutating func stopAfter(items count: Int) {
        if count < self.prepareItems.count { self.prepareItems = Array(self.prepareItems.prefix(count)) }
    }

    mutating func take(_ result: OpaquePointer, connection: OpaquePointer) {
        self.tookResult = true
        if PQresultStatus(result) == PGRES_PIPELINE_SYNC {
            PQclear(result)
            self.finished = true
            return
        }
        do {
            self.current = try LibPQ.consume(result, connection: connection)
        } catch var error as PGError {
            if self.failure == nil, error.kind != .pipelineAborted {
                // After every statement's result: the implicit transaction's commit failed (a deferred constraint).
                error.statementIndex = self.item < self.prepareItems.count ? self.results.count : nil
                self.failure = error
            }
            self.currentError = error
        } catch {}
    }

    /// The end of one statement's results (or of the implicit commit's error, after them all).
    /// - Returns: `false` for a NULL with no result before it, which ends no item: libpq has nothing to report
    ///   until more statements (or the sync) are sent, or the connection broke.
    mutating func nullResult() -> Bool {
        guard self.tookResult else { return false }
        self.tookResult = false
        if self.item >= self.prepareItems.count {
            // The implicit commit's error, after every statement (already the failure).
            self.current = nil
            self.currentError = nil
            return true
        }
        defer { self.item += 1 }
        if self.item < self.prepareItems.count, self.prepareItems[self.item] {
            // A statement's Prepare: its statement's result comes next (the index is that statement's).
            if self.current != nil, self.currentError == nil { self.prepared.append(self.results.count) }
            self.current = nil
            self.currentError = nil
            return true
        }
        self.results.append(
            self.current
                ?? PGRows(columns: [], commandTag: "", affectedRows: 0, storage: [], cells: [], rowCount: 0))
        self.current = nil
        self.currentError = nil
        return true
    }
}
