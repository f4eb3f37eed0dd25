import CLibPQ
import Foundation

extension PGConnection {
    /// Bulk-inserts rows with `COPY … FROM STDIN` (text format).
    ///
    /// ```swift
    /// try await connection.copyFrom(table: ["public", "events"], columns: ["id", "name"],
    ///                               rows: [[try PGValue(1), try PGValue("a")]])
    /// ```
    /// - Parameters:
    ///   - table: the table name, optionally schema-qualified (`["schema", "table"]`); each part is quoted.
    ///   - columns: the column names, quoted.
    ///   - rows: one array of values per row, in column order.
    /// - Returns: the number of rows copied.
    @discardableResult
    public func copyFrom(table: [String], columns: [String], rows: [[PGValue]]) async throws -> Int {
        let sql =
            "COPY \(table.map(quoteIdentifier).joined(separator: ".")) (\(columns.map(quoteIdentifier).joined(separator: ", "))) FROM STDIN"
        self.logger.debug("copy", metadata: [PGLogKey.sql: "\(sql)", "skyros.copy.rows": "\(rows.count)"])
        // Encode before starting COPY so a bad value fails without touching the server.
        var chunks: [[UInt8]] = []
        var chunk: [UInt8] = []
        chunk.reserveCapacity(1 << 16)
        for (r, row) in rows.enumerated() {
            guard row.count == columns.count else {
                throw PGError(kind: .encoding, message: "row \(r) has \(row.count) values for \(columns.count) columns")
            }
            for (c, value) in row.enumerated() {
                if c > 0 { chunk.append(UInt8(ascii: "\t")) }
                guard let text = value.text else {
                    chunk.append(UInt8(ascii: "\\"))
                    chunk.append(UInt8(ascii: "N"))
                    continue
                }
                for byte in text.utf8 {
                    switch byte {
                    case 0:
                        throw PGError(kind: .encoding, message: "row \(r), column \"\(columns[c])\" contains a NUL (0x00) character")
                    case UInt8(ascii: "\\"): chunk += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
                    case UInt8(ascii: "\n"): chunk += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
                    case UInt8(ascii: "\r"): chunk += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
                    case UInt8(ascii: "\t"): chunk += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
                    default: chunk.append(byte)
                    }
                }
            }
            chunk.append(UInt8(ascii: "\n"))
            if chunk.count >= 1 << 16 {
                chunks.append(chunk)
                chunk.removeAll(keepingCapacity: true)
            }
        }
        if !chunk.isEmpty { chunks.append(chunk) }
        return try await self.withSession { session in
            let connection = session.handle
            guard let start = PQexec(connection, sql) else {
                throw LibPQ.error(result: nil, connection: connection)
            }
            guard PQresultStatus(start) == PGRES_COPY_IN else {
                _ = try LibPQ.consume(start, connection: connection)
                throw PGError(kind: .protocolViolation, message: "COPY did not enter COPY IN mode")
            }
            PQclear(start)
            // A chunk holds whole rows, so one huge row makes a chunk of any size: it is sent in parts that fit
            // `PQputCopyData`'s `Int32` length (COPY data may be split anywhere).
            let partSize = 1 << 30
            sending: for piece in chunks {
                for start in stride(from: 0, to: piece.count, by: partSize) {
                    let end = min(start + partSize, piece.count)
                    let ok = piece.withUnsafeBufferPointer { buffer in
                        UnsafeBufferPointer(rebasing: buffer[start..<end]).withMemoryRebound(to: CChar.self) {
                            PQputCopyData(connection, $0.baseAddress, Int32($0.count))
                        }
                    }
                    if ok != 1 { break sending }
                }
            }
            PQputCopyEnd(connection, nil)
            var copied = 0
            var failure: (any Error)?
            while let result = PQgetResult(connection) {
                do {
                    copied = try LibPQ.consume(result, connection: connection).affectedRows
                } catch {
                    if failure == nil { failure = error }
                }
            }
            if let failure { throw failure }
            return copied
        }
    }
}
