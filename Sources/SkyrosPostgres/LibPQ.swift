import CLibPQ
import Foundation

/// The one place where libpq results are inspected, converted and freed.
enum LibPQ {
    /// Reads an error field of a result, if present.
    static func field(_ result: OpaquePointer, _ code: Int32) -> String? {
        guard let value = PQresultErrorField(result, code) else { return nil }
        return String(cString: value)
    }

    /// Builds a ``PGError`` from a failed result (or a missing result) on `connection`.
    ///
    /// Messages are kept as the server and libpq wrote them: neither ever echoes the connection's password
    /// (libpq sends it only in the authentication exchange, and the server never sees it in clear with SCRAM),
    /// so no text is scrubbed, and a word that happens to equal the password stays readable.
    static func error(result: OpaquePointer?, connection: OpaquePointer?) -> PGError {
        if let result, let state = field(result, skyros_diag_sqlstate()) {
            let sqlState = SQLState(state)
            let message = field(result, skyros_diag_message_primary()) ?? "server error"
            return PGError(
                kind: PGError.kind(for: sqlState),
                sqlState: sqlState,
                severity: field(result, skyros_diag_severity_nonlocalized()) ?? field(result, skyros_diag_severity()),
                message: message,
                detail: field(result, skyros_diag_message_detail()),
                hint: field(result, skyros_diag_message_hint()),
                position: field(result, skyros_diag_statement_position()).flatMap { Int($0) },
                schema: field(result, skyros_diag_schema_name()),
                table: field(result, skyros_diag_table_name()),
                column: field(result, skyros_diag_column_name()),
                dataType: field(result, skyros_diag_datatype_name()),
                constraint: field(result, skyros_diag_constraint_name())
            )
        }
        var message = "unknown libpq error"
        if let result, let text = PQresultErrorMessage(result), text.pointee != 0 {
            message = String(cString: text)
        } else if let connection, let text = PQerrorMessage(connection), text.pointee != 0 {
            message = String(cString: text)
        }
        message = message.trimmingCharacters(in: .whitespacesAndNewlines)
        let broken = connection.map { PQstatus($0) == CONNECTION_BAD } ?? true
        return PGError(kind: broken ? .connectionLost : .protocolViolation, message: message)
    }

    /// Copies a result's rows into Swift memory.
    /// - Throws: ``PGError`` of kind `.resultTooLarge` when its values hold more than
    ///   ``PGRows/maximumStorageSize`` bytes.
    static func rows(_ result: OpaquePointer) throws -> PGRows {
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        var columns: [PGRows.Column] = []
        columns.reserveCapacity(columnCount)
        for c in 0..<columnCount {
            columns.append(
                PGRows.Column(
                    name: String(cString: PQfname(result, Int32(c))),
                    type: PGType(rawValue: PQftype(result, Int32(c)))
                ))
        }
        var total = 0
        for r in 0..<rowCount {
            for c in 0..<columnCount { total += Int(PQgetlength(result, Int32(r), Int32(c))) }
        }
        // Checked before anything is copied: every offset and length then fits the cells' `Int32`s.
        try PGRows.checkStorageSize(total)
        var storage = [UInt8]()
        storage.reserveCapacity(total)
        var cells = [Int32](repeating: 0, count: rowCount * columnCount * 2)
        var slot = 0
        for r in 0..<rowCount {
            for c in 0..<columnCount {
                if PQgetisnull(result, Int32(r), Int32(c)) != 0 {
                    cells[slot + 1] = -1
                } else {
                    let length = Int(PQgetlength(result, Int32(r), Int32(c)))
                    cells[slot] = Int32(storage.count)
                    cells[slot + 1] = Int32(length)
                    if length > 0, let value = PQgetvalue(result, Int32(r), Int32(c)) {
                        value.withMemoryRebound(to: UInt8.self, capacity: length) {
                            storage.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
                        }
                    }
                }
                slot += 2
            }
        }
        let tag = PQcmdStatus(result).map { String(cString: $0) } ?? ""
        let affected = PQcmdTuples(result).flatMap { Int(String(cString: $0)) } ?? rowCount
        return PGRows(
            columns: columns, commandTag: tag, affectedRows: affected, storage: storage, cells: cells,
            rowCount: rowCount)
    }

    /// Checks a result and converts it, freeing it in every case.
    static func consume(_ result: OpaquePointer?, connection: OpaquePointer?) throws -> PGRows {
        guard let result else { throw error(result: nil, connection: connection) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
            return try rows(result)
        case PGRES_PIPELINE_ABORTED:
            throw PGError(kind: .pipelineAborted, message: "statement skipped: an earlier statement in the pipeline failed")
        default:
            throw error(result: result, connection: connection)
        }
    }

    /// The most parameters one statement can have (the protocol counts them in 16 bits).
    static let maximumParameterCount = 65_535

    /// Why `query` cannot be sent, found without sending anything: an interpolated value that failed to encode,
    /// a NUL in its text or in a parameter (a C string would end there), or more parameters than the protocol
    /// carries. `nil` when ``withParameters(_:_:)`` and libpq's send functions will accept it.
    static func unsendableReason(_ query: PGQuery) -> String? {
        if let encodingError = query.encodingError { return encodingError }
        if containsNUL(query.sql) { return "statement text contains a NUL (0x00) character" }
        if query.binds.count > maximumParameterCount {
            return "\(query.binds.count) parameters: a statement can have at most \(maximumParameterCount)"
        }
        for (i, bind) in query.binds.enumerated() {
            if let text = bind.text, containsNUL(text) { return nulParameterMessage(i) }
        }
        return nil
    }

    private static func nulParameterMessage(_ index: Int) -> String {
        "parameter $\(index + 1) contains a NUL (0x00) character, which PostgreSQL text cannot store; use bytea"
    }

    /// Whether `text` contains a NUL byte (checked in bulk: a change-log entry is kilobytes).
    static func containsNUL(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return false }
            return memchr(base, 0, bytes.count) != nil
        }
    }

    /// Runs `body` with C parameter arrays for `binds` (text format, declared types).
    static func withParameters<R>(
        _ binds: [PGValue],
        _ body: (Int32, UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?) throws -> R
    ) throws -> R {
        if binds.isEmpty { return try body(0, nil, nil) }
        var buffer = [CChar]()
        var offsets = [Int]()
        var types = [Oid]()
        offsets.reserveCapacity(binds.count)
        types.reserveCapacity(binds.count)
        buffer.reserveCapacity(binds.reduce(0) { $0 + ($1.text?.utf8.count ?? 0) + 1 })
        for (i, bind) in binds.enumerated() {
            types.append(bind.type.rawValue)
            guard var text = bind.text else {
                offsets.append(-1)
                continue
            }
            offsets.append(buffer.count)
            // Copied in bulk: a change-log entry is kilobytes, and this runs on the connection's thread.
            let copied = text.withUTF8 { bytes -> Bool in
                guard let base = bytes.baseAddress else { return true }
                if memchr(base, 0, bytes.count) != nil { return false }
                base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    buffer.append(contentsOf: UnsafeBufferPointer(start: $0, count: bytes.count))
                }
                return true
            }
            guard copied else {
                throw PGError(kind: .encoding, message: nulParameterMessage(i))
            }
            buffer.append(0)
        }
        return try buffer.withUnsafeBufferPointer { base in
            let pointers: [UnsafePointer<CChar>?] = offsets.map { $0 < 0 ? nil : base.baseAddress! + $0 }
            return try pointers.withUnsafeBufferPointer { values in
                try types.withUnsafeBufferPointer { oids in
                    try body(Int32(binds.count), oids.baseAddress, values.baseAddress)
                }
            }
        }
    }

    /// Sets a new connection's session time zone to `zone` (``PGConfiguration/sessionTimeZone``) unless
    /// the server already reports it (or, for UTC, one of its aliases): one round trip only when needed.
    /// - Throws: ``PGError`` of kind `.invalidConfiguration` when the server refuses the zone, or the
    ///   error that broke the connection.
    static func setSessionTimeZone(_ zone: String?, on connection: OpaquePointer) throws {
        guard let zone else { return }
        if let reported = PQparameterStatus(connection, "TimeZone").map({ String(cString: $0) }),
            isSameTimeZone(reported, zone)
        {
            return
        }
        // `set_config` is `SET TimeZone` (the server reports the change, and PgBouncer tracks it) with the name
        // as a bound parameter.
        do {
            _ = try withParameters([PGValue(type: .text, text: zone)]) { count, types, values in
                try consume(
                    PQexecParams(connection, "SELECT pg_catalog.set_config('TimeZone', $1, false)", count, types, values, nil, nil, 0),
                    connection: connection)
            }
        } catch var error as PGError {
            guard PQstatus(connection) == CONNECTION_OK else { throw error }
            error.kind = .invalidConfiguration
            error.message = "cannot set the session time zone (sessionTimeZone): "
                + error.message
            throw error
        }
    }

    /// Spellings of UTC that PostgreSQL may report as `TimeZone` (from its time zone database).
    private static let utcNames: Set<String> = [
        "utc", "etc/utc", "uct", "etc/uct", "universal", "etc/universal", "zulu", "etc/zulu", "gmt", "etc/gmt",
        "gmt0", "etc/gmt0", "gmt+0", "etc/gmt+0", "gmt-0", "etc/gmt-0", "greenwich", "etc/greenwich",
    ]

    /// Whether two time zone names are the same zone (names are case-insensitive in PostgreSQL).
    static func isSameTimeZone(_ a: String, _ b: String) -> Bool {
        let a = a.lowercased()
        let b = b.lowercased()
        return a == b || (self.utcNames.contains(a) && self.utcNames.contains(b))
    }

    /// Sends whatever libpq still buffers (a connection in nonblocking mode may hold part of a statement).
    /// - Returns: `false` when writing failed.
    static func flush(_ connection: OpaquePointer) -> Bool {
        while true {
            switch PQflush(connection) {
            case 0: return true
            case 1:
                LibPQ.wait(connection, read: true, write: true)
                if PQconsumeInput(connection) == 0 { return false }
            default: return false
            }
        }
    }

    /// Waits until the connection's socket is readable and/or writable, up to `timeoutMilliseconds` (-1: forever).
    @discardableResult
    static func wait(_ connection: OpaquePointer, read: Bool, write: Bool, timeoutMilliseconds: Int32 = -1) -> Bool {
        var descriptor = pollfd(fd: PQsocket(connection), events: 0, revents: 0)
        if read { descriptor.events |= Int16(POLLIN) }
        if write { descriptor.events |= Int16(POLLOUT) }
        while true {
            let rc = poll(&descriptor, 1, timeoutMilliseconds)
            if rc < 0, errno == EINTR { continue }
            return rc > 0
        }
    }
}

/// Issues `PQcancel` for whatever statement a connection is running, from any thread.
final class QueryCanceller: @unchecked Sendable {
    // @unchecked Sendable: the PGcancel pointer is only touched under `state`'s lock; PQcancel is thread-safe.
    private struct State: @unchecked Sendable {
        // @unchecked Sendable: the pointer only moves into the mutex once, at init.
        var handle: OpaquePointer?
        var running = false
    }
    private let state: Locked<State>

    init(connection: OpaquePointer) {
        self.state = Locked(State(handle: PQgetCancel(connection)))
    }

    func begin() { self.state.withLock { $0.running = true } }
    func end() { self.state.withLock { $0.running = false } }

    /// Sends a cancel request if a statement is running.
    func cancel() {
        self.state.withLock { state in
            guard state.running, let handle = state.handle else { return }
            var buffer = [CChar](repeating: 0, count: 256)
            _ = PQcancel(handle, &buffer, 256)
        }
    }

    deinit {
        self.state.withLock { state in
            if let handle = state.handle { PQfreeCancel(handle) }
            state.handle = nil
        }
    }
}
