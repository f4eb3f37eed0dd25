/// The rows of a statement's result, copied out of libpq into Swift memory.
///
/// ```swift
/// let rows = try await connection.query("SELECT id, name FROM users")
/// for row in rows {
///     let id = try row.decode(Int.self, column: "id")
///     let name = try row.decode(String?.self, at: 1)
/// }
/// ```
public struct PGRows: Sendable, RandomAccessCollection {
    /// A result column: name and type.
    public struct Column: Sendable, Hashable {
        /// The column's name or alias in the statement (`SELECT count(*) AS n` gives `n`).
        public var name: String
        /// The column's type, which ``PGRow/decode(_:at:)`` passes to the decoding type.
        public var type: PGType
    }

    /// The result's contents behind one reference: a ``PGRow`` (and everything that passes one along,
    /// such as an entity decoder reading a cell per property) copies one pointer, not four arrays and a string
    /// (one retain and release instead of five).
    final class Contents: Sendable {
        let columns: [Column]
        let commandTag: String
        let affectedRows: Int
        let storage: [UInt8]
        /// Two entries per cell: start offset and length (-1 for NULL).
        let cells: [Int32]
        let rowCount: Int

        init(columns: [Column], commandTag: String, affectedRows: Int, storage: [UInt8], cells: [Int32], rowCount: Int) {
            self.columns = columns
            self.commandTag = commandTag
            self.affectedRows = affectedRows
            self.storage = storage
            self.cells = cells
            self.rowCount = rowCount
        }
    }

    let contents: Contents

    /// The result's columns, in select-list order.
    public var columns: [Column] { self.contents.columns }
    /// The command tag, e.g. `INSERT 0 1`.
    public var commandTag: String { self.contents.commandTag }
    /// Rows affected by INSERT/UPDATE/DELETE (or returned by SELECT), from `PQcmdTuples`.
    public var affectedRows: Int { self.contents.affectedRows }

    init(columns: [Column], commandTag: String, affectedRows: Int, storage: [UInt8], cells: [Int32], rowCount: Int) {
        self.contents = Contents(
            columns: columns, commandTag: commandTag, affectedRows: affectedRows, storage: storage, cells: cells,
            rowCount: rowCount)
    }

    /// The most bytes of values one result may hold (2 GiB - 1): each cell's offset and length are stored as
    /// `Int32`, which keeps the index of a large result half the size. PostgreSQL caps a single value at 1 GB.
    package static let maximumStorageSize = Int(Int32.max)

    /// Throws unless `size` bytes of values fit in one result (``maximumStorageSize``).
    /// - Throws: ``PGError`` of kind ``PGError/Kind/resultTooLarge``.
    package static func checkStorageSize(_ size: Int) throws {
        guard size > Self.maximumStorageSize else { return }
        throw PGError(
            kind: .resultTooLarge,
            message: "the result holds \(size) bytes of values, more than the \(Self.maximumStorageSize) one result can hold; "
                + "fetch it in parts (LIMIT and OFFSET, or a cursor)")
    }

    /// The first row's position: always 0.
    public var startIndex: Int { 0 }
    /// The number of rows.
    public var endIndex: Int { self.contents.rowCount }
    /// The row at `position` (0-based).
    public subscript(position: Int) -> PGRow { PGRow(rows: self, index: position) }

    /// The position of a column by name.
    public func index(ofColumn name: String) -> Int? { self.columns.firstIndex { $0.name == name } }

    /// The raw text bytes of a cell, or `nil` for NULL, without making a ``PGRow`` (for decoders that
    /// read every cell of a large result).
    @inline(__always)
    package func cellBytes(row: Int, column: Int) -> ArraySlice<UInt8>? {
        let contents = self.contents
        let base = (row &* contents.columns.count &+ column) &* 2
        let length = Int(contents.cells[base &+ 1])
        if length < 0 { return nil }
        let start = Int(contents.cells[base])
        return contents.storage[start..<(start &+ length)]
    }
}

/// One row of a ``PGRows`` result.
public struct PGRow: Sendable {
    let rows: PGRows
    let index: Int

    /// The result's columns, the same for every row.
    public var columns: [PGRows.Column] { self.rows.columns }

    /// The raw text bytes of a cell, or `nil` for NULL.
    public func bytes(at column: Int) -> ArraySlice<UInt8>? {
        self.rows.cellBytes(row: self.index, column: column)
    }

    /// Whether the cell at a column position is SQL NULL.
    public func isNull(at column: Int) -> Bool { self.bytes(at: column) == nil }

    /// Decodes the cell at a column position.
    /// - Throws: ``PGError`` of kind ``PGError/Kind/decoding`` naming the column.
    @inline(__always)
    public func decode<T: PGDecodable>(_ type: T.Type, at column: Int) throws -> T {
        let columns = self.rows.contents.columns
        guard column >= 0, column < columns.count else {
            throw PGError(kind: .decoding, message: "column index \(column) is out of range")
        }
        let pgType = columns[column].type
        do {
            guard let bytes = self.bytes(at: column) else { return try T.postgresNull(type: pgType) }
            return try T(postgresText: bytes, type: pgType)
        } catch var error as PGError {
            error.column = self.rows.columns[column].name
            error.message = "column \"\(self.rows.columns[column].name)\": \(error.message)"
            throw error
        }
    }

    /// Decodes the cell of a named column.
    public func decode<T: PGDecodable>(_ type: T.Type, column name: String) throws -> T {
        guard let column = self.rows.index(ofColumn: name) else {
            throw PGError(kind: .decoding, message: "no column named \"\(name)\" in the result", column: name)
        }
        return try self.decode(type, at: column)
    }

    /// Decodes the first two/three columns as a tuple, e.g. `let (id, name) = try row.decode((Int, String).self)`.
    public func decode<A: PGDecodable, B: PGDecodable>(_: (A, B).Type) throws -> (A, B) {
        (try self.decode(A.self, at: 0), try self.decode(B.self, at: 1))
    }

    /// Decodes the first three columns as a tuple: `let (id, name, email) = try row.decode((Int, String, String?).self)`.
    public func decode<A: PGDecodable, B: PGDecodable, C: PGDecodable>(
        _: (A, B, C).Type
    ) throws -> (A, B, C) {
        (try self.decode(A.self, at: 0), try self.decode(B.self, at: 1), try self.decode(C.self, at: 2))
    }
}
