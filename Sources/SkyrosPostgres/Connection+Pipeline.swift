import CLibPQ
import Foundation

extension Connection {
    /// Sends many statements in libpq pipeline mode: one round trip, one sync, results in order.
    ///
    /// The statements run in one implicit transaction unless they contain their own `BEGIN`/`COMMIT`: if one
    /// fails, PostgreSQL aborts the rest up to the sync, nothing commits, and the thrown error's
    /// ``PostgresError/statementIndex`` names the failing statement.
    ///
    /// ```swift
    /// let inserts = (0..<10_000).map { i -> PostgresQuery in "INSERT INTO t (n) VALUES (\(i))" }
    /// try await connection.pipeline(inserts)
    /// ```
    /// - Returns: one ``PostgresRows`` per statement.
    @discardableResult
    public func pipeline(_ queries: [PostgresQuery]) async throws -> [PostgresRows] {
        if queries.isEmpty { return [] }
        for (i, query) in queries.enumerated() {
            if let encodingError = query.encodingError {
                throw PostgresError(kind: .encoding, message: encodingError, statementIndex: i)
            }
        }
        self.logger.debug("pipeline", metadata: ["skyros.pipeline.count": "\(queries.count)"])
        let secrets = self.redactionSecrets
        return try await self.withHandle { connection in
            try Self.runPipeline(queries, on: connection, secrets: secrets)
        }
    }

    private static func runPipeline(
        _ queries: [PostgresQuery], on connection: OpaquePointer, secrets: [String]
    ) throws -> [PostgresRows] {
        guard PQenterPipelineMode(connection) == 1 else {
            throw LibPQ.error(result: nil, connection: connection, secrets: secrets)
        }
        PQsetnonblocking(connection, 1)
        var reader = PipelineReader(expected: queries.count)
        var syncSent = false
        defer {
            if !syncSent, PQstatus(connection) == CONNECTION_OK {
                PQpipelineSync(connection)
                PQsetnonblocking(connection, 0)
                PQflush(connection)
            }
            // Drain whatever is left so the connection returns to a clean state.
            if !reader.finished, PQstatus(connection) == CONNECTION_OK {
                PQsetnonblocking(connection, 0)
                while !reader.finished {
                    guard let result = PQgetResult(connection) else {
                        reader.nullResult()
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
                if flush < 0 { throw LibPQ.error(result: nil, connection: connection, secrets: secrets) }
                try drainReady()
                if flush == 0 { return }
                LibPQ.wait(connection, read: true, write: true)
                if PQconsumeInput(connection) == 0 {
                    throw LibPQ.error(result: nil, connection: connection, secrets: secrets)
                }
            }
        }
        func drainReady() throws {
            while !reader.finished, PQisBusy(connection) == 0 {
                guard let result = PQgetResult(connection) else {
                    reader.nullResult()
                    continue
                }
                reader.take(result, connection: connection)
            }
        }

        for (index, query) in queries.enumerated() {
            let sent = try LibPQ.withParameters(query.binds) { count, types, values in
                PQsendQueryParams(connection, query.sql, count, types, values, nil, nil, 0)
            }
            guard sent == 1 else { throw LibPQ.error(result: nil, connection: connection, secrets: secrets) }
            if index % 256 == 255 {
                if PQconsumeInput(connection) == 0 {
                    throw LibPQ.error(result: nil, connection: connection, secrets: secrets)
                }
                try pump(untilFlushed: false)
            }
        }
        guard PQpipelineSync(connection) == 1 else {
            throw LibPQ.error(result: nil, connection: connection, secrets: secrets)
        }
        syncSent = true
        try pump(untilFlushed: true)
        while !reader.finished {
            try drainReady()
            if reader.finished { break }
            LibPQ.wait(connection, read: true, write: false)
            if PQconsumeInput(connection) == 0 {
                throw LibPQ.error(result: nil, connection: connection, secrets: secrets)
            }
        }
        if let failure = reader.failure { throw failure }
        return reader.results
    }
}

/// Collects pipeline results: one result (or error) per statement, a NULL between statements, then a sync.
private struct PipelineReader {
    let expected: Int
    var results: [PostgresRows] = []
    var current: PostgresRows?
    var currentError: PostgresError?
    var failure: PostgresError?
    var finished = false

    init(expected: Int) {
        self.expected = expected
        self.results.reserveCapacity(expected)
    }

    mutating func take(_ result: OpaquePointer, connection: OpaquePointer) {
        if PQresultStatus(result) == PGRES_PIPELINE_SYNC {
            PQclear(result)
            self.finished = true
            return
        }
        do {
            self.current = try LibPQ.consume(result, connection: connection)
        } catch var error as PostgresError {
            if self.failure == nil, error.kind != .pipelineAborted {
                error.statementIndex = self.results.count
                self.failure = error
            }
            self.currentError = error
        } catch {}
    }

    /// The end of one statement's results.
    mutating func nullResult() {
        if self.current == nil && self.currentError == nil {
            // Two NULLs in a row only happen when the connection broke.
            if self.results.count >= self.expected { return }
        }
        self.results.append(
            self.current
                ?? PostgresRows(columns: [], commandTag: "", affectedRows: 0, storage: [], cells: [], rowCount: 0))
        self.current = nil
        self.currentError = nil
    }
}
