import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Every date PostgreSQL can hold decodes, and a `Date` it cannot hold fails to encode with a clear error: neither
/// traps.
@Suite("Dates at the edges of PostgreSQL's ranges")
struct DateCodingTests {
    /// Seconds from 1970 of midnight UTC on `date`, as the server computes them.
    func serverSeconds(of date: String, on connection: PGConnection) async throws -> Double {
        let days = try await connection.query("SELECT \(date)::date - '1970-01-01'::date")[0].decode(Int.self, at: 0)
        return Double(days) * 86_400
    }

    @Test func theLatestDatesDecode() async throws {
        try await TestServer.withConnection { connection in
            // Past ±292,000 years, microseconds from 1970 overflow an Int64 (this trapped).
            let last = try await connection.query("SELECT date '294276-12-31'")[0].decode(Date.self, at: 0)
            #expect(last.timeIntervalSince1970 == (try await serverSeconds(of: "294276-12-31", on: connection)))
            let lastTimestamp = try await connection.query("SELECT timestamp '294276-12-31 23:59:59'")[0].decode(Date.self, at: 0)
            #expect(lastTimestamp.timeIntervalSince1970 == last.timeIntervalSince1970 + 86_399)
            // `date` reaches further than `timestamp`.
            let latest = try await connection.query("SELECT date '5874897-12-31'")[0].decode(Date.self, at: 0)
            #expect(latest.timeIntervalSince1970 == (try await serverSeconds(of: "5874897-12-31", on: connection)))
            let earliest = try await connection.query("SELECT date '4714-11-24 BC'")[0].decode(Date.self, at: 0)
            #expect(earliest.timeIntervalSince1970 == (try await serverSeconds(of: "4714-11-24 BC", on: connection)))

            // The latest timestamp goes back as it came.
            #expect(try await connection.query("SELECT \(last)::date::text")[0].decode(String.self, at: 0) == "294276-12-31")
            #expect(try await connection.query("SELECT \(earliest)::date::text")[0].decode(String.self, at: 0) == "4714-11-24 BC")
        }
    }

    @Test func infinityDecodesAsTheDistantDates() async throws {
        try await TestServer.withConnection { connection in
            let row = try await connection.query(
                "SELECT 'infinity'::date, '-infinity'::date, 'infinity'::timestamp, '-infinity'::timestamptz")[0]
            #expect(try row.decode(Date.self, at: 0) == .distantFuture)
            #expect(try row.decode(Date.self, at: 1) == .distantPast)
            #expect(try row.decode(Date.self, at: 2) == .distantFuture)
            #expect(try row.decode(Date.self, at: 3) == .distantPast)
            let sent = try await connection.query("SELECT \(Date.distantFuture)::date::text, \(Date.distantPast)::timestamp::text")[0]
            #expect(try sent.decode(String.self, at: 0) == "infinity")
            #expect(try sent.decode(String.self, at: 1) == "-infinity")
        }
    }

    @Test func aDatePostgreSQLCannotHoldIsAnEncodingError() async throws {
        let unsendable = [
            Date(timeIntervalSince1970: .nan), Date(timeIntervalSince1970: .infinity), Date(timeIntervalSince1970: -.infinity),
            Date(timeIntervalSince1970: 1e17), Date(timeIntervalSince1970: -1e17),  // ±3 billion years (this trapped)
            Date(timeIntervalSince1970: 9_224_318_016_000),  // 294277-01-01, the first instant past timestamp's range
            Date(timeIntervalSince1970: -210_866_803_201),  // a second before 4714-11-24 BC
        ]
        for date in unsendable {
            let error = #expect(throws: PGError.self, "\(date.timeIntervalSince1970)") { _ = try date.postgresText() }
            #expect(error?.kind == .encoding)
        }
        try await TestServer.withConnection { connection in
            let error = await #expect(throws: PGError.self) {
                try await connection.query("SELECT \(Date(timeIntervalSince1970: 1e17))::timestamptz")
            }
            #expect(error?.kind == .encoding)
            #expect(try await connection.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
            // The edges themselves are sent.
            let edges = try await connection.query(
                "SELECT \(Date(timeIntervalSince1970: 9_224_318_015_999))::timestamptz::text, \(Date(timeIntervalSince1970: -210_866_803_200))::timestamptz::text")[0]
            #expect(try edges.decode(String.self, at: 0) == "294276-12-31 23:59:59+00")
            #expect(try edges.decode(String.self, at: 1) == "4714-11-24 00:00:00+00 BC")
        }
    }

    @Test func textThatIsNotADateIsADecodingError() {
        for text in ["2024-13", "abc", "2024-01-01 10:00", "999999999-12-31 junk"] {
            let error = #expect(throws: PGError.self) { _ = try Date(postgresText: ArraySlice(text.utf8), type: .date) }
            #expect(error?.kind == .decoding)
        }
    }
}
