import Foundation
import SkyrosPostgres

/// JSON coding of nested Codable values stored in `json`/`jsonb` columns.
///
/// Keys are sorted (so equal values encode to equal text, which change detection relies on) and dates use
/// PostgreSQL's timestamp text with microseconds, so they round-trip exactly like `timestamptz` columns.
enum ColumnJSON {
    static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(try date.postgresText() ?? "")
        }
        return encoder
    }

    static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = try? Date(postgresText: ArraySlice(text.utf8), type: .timestamptz) { return date }
            if let date = try? Date(text, strategy: .iso8601) { return date }
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "invalid date '\(text)'")
        }
        return decoder
    }
}
