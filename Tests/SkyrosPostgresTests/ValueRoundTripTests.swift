import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

@Suite("Typed values round-trip through PostgreSQL")
struct ValueRoundTripTests {
    func roundTrip<T: PGCodable & Equatable>(_ value: T, as sqlType: String, file: StaticString = #file) async throws -> T {
        try await TestServer.withConnection { connection in
            let rows = try await connection.query("SELECT \(value)::\(unsafeRaw: sqlType) AS v")
            return try rows[0].decode(T.self, at: 0)
        }
    }

    @Test func integers() async throws {
        for value in [Int.min, -1, 0, 1, Int.max] {
            #expect(try await roundTrip(value, as: "int8") == value)
        }
        for value in [Int32.min, 0, Int32.max] { #expect(try await roundTrip(value, as: "int4") == value) }
        for value in [Int16.min, 0, Int16.max] { #expect(try await roundTrip(value, as: "int2") == value) }
        #expect(try await roundTrip(Int64.min, as: "int8") == Int64.min)
        #expect(try await roundTrip(Int64.max, as: "int8") == Int64.max)
    }

    @Test func booleansAndText() async throws {
        #expect(try await roundTrip(true, as: "bool") == true)
        #expect(try await roundTrip(false, as: "bool") == false)
        for text in ["", "hello", "héllo wörld ✓ 日本語 🎉", "quote ' \" \\ ; -- DROP TABLE x", String(repeating: "x", count: 100_000)] {
            #expect(try await roundTrip(text, as: "text") == text)
        }
    }

    @Test func floats() async throws {
        for value in [0.0, -0.5, 1.0 / 3.0, Double.greatestFiniteMagnitude, Double.leastNonzeroMagnitude, .infinity, -.infinity] {
            #expect(try await roundTrip(value, as: "float8") == value)
        }
        #expect(try await roundTrip(Double.nan, as: "float8").isNaN)
        for value in [Float(0.1), .infinity, -.infinity, .greatestFiniteMagnitude] {
            #expect(try await roundTrip(value, as: "float4") == value)
        }
        #expect(try await roundTrip(Float.nan, as: "float4").isNaN)
    }

    /// Short decimal texts take a fast path (no string made); every text must still decode to exactly what
    /// `Double(String)` gives, and every double PostgreSQL prints must come back bit for bit.
    @Test func doublesDecodeExactlyFromEveryTextForm() async throws {
        var generator = SystemRandomNumberGenerator()
        var texts = [
            "0", "-0", "0.0", "00012.500", "-0.05", "1", "10", "100", "0.1", "0.2", "0.3", "123456789012345",
            "1234567890123456", "0.000000000000000000001", "0.0000000000000000000001", "9007199254740993",
            "999999999999999.9", "1.5e3", "-2E-5", "1e+100", "4.9406564584124654e-324", "NaN", "Infinity",
            "-Infinity", "12.34", "-98765.4321", "3.", ".5",
        ]
        for _ in 0..<5000 {
            let digits = String(UInt64.random(in: 0..<1_000_000_000_000_000, using: &generator))
            let point = Int.random(in: 0...digits.count, using: &generator)
            let sign = Bool.random(using: &generator) ? "-" : ""
            texts.append(sign + String(digits.prefix(point)) + "." + String(digits.dropFirst(point)))
        }
        for text in texts {
            let decoded = try Double(postgresText: ArraySlice(text.utf8), type: .float8)
            let expected = Double(text) ?? (text == "Infinity" ? .infinity : text == "-Infinity" ? -.infinity : .nan)
            #expect(decoded.bitPattern == expected.bitPattern || (decoded.isNaN && expected.isNaN), "\(text)")
        }

        let values = (0..<2000).map { i -> Double in
            switch i % 4 {
            case 0: Double(bitPattern: UInt64.random(in: 0..<0x7FF0_0000_0000_0000, using: &generator))
            case 1: Double(Int.random(in: -1_000_000...1_000_000, using: &generator)) / 100
            case 2: Double.random(in: -1e6...1e6, using: &generator)
            default: Double(Int.random(in: 0...1_000_000_000, using: &generator))
            }
        }
        let rows = try await TestServer.withConnection { connection in
            try await connection.query(
                """
                SELECT v, CASE WHEN abs(v) < 1e15 THEN v::numeric(20, 2) END
                FROM unnest(\(values)::float8[]) WITH ORDINALITY AS t(v, i) ORDER BY i
                """)
        }
        #expect(rows.count == values.count)
        for (row, value) in zip(rows, values) {
            #expect(try row.decode(Double.self, at: 0).bitPattern == value.bitPattern)
            // A numeric column read as a double (`12.30`: trailing zeros, two decimals).
            if let numeric = try row.decode(String?.self, at: 1) {
                #expect(try row.decode(Double.self, at: 1) == Double(numeric))
            }
        }
    }

    @Test func numericKeepsThirtyDigits() async throws {
        let value = Decimal(string: "123456789012345678901234567890")!
        #expect(try await roundTrip(value, as: "numeric") == value)
        let fraction = Decimal(string: "-12345678901234.5678901234567890")!
        #expect(try await roundTrip(fraction, as: "numeric") == fraction)
        let connection = try await TestServer.connect()
        let text = try await connection.query("SELECT \(value)::numeric::text")[0].decode(String.self, at: 0)
        #expect(text == "123456789012345678901234567890")
        await connection.close()
    }

    /// `Decimal` keeps 38 significant digits; `Decimal(string:)` silently drops the ones after. A numeric with
    /// more must not decode to another number: it fails (naming the type, not the value).
    @Test func numericWithMoreDigitsThanDecimalKeepsFailsToDecode() async throws {
        try await TestServer.withConnection { connection in
            for text in [
                "12345678901234567890.123456789012345678901", "-1234567890123456789012345678901234567891",
                "0." + String(repeating: "0", count: 130) + "1234567890",  // beyond Decimal's exponent range
            ] {
                let row = try await connection.query("SELECT \(text)::text::numeric")[0]
                let error = #expect(throws: PGError.self, "\(text)") { try row.decode(Decimal.self, at: 0) }
                #expect(error?.kind == .decoding)
                #expect(error?.message.contains("numeric") == true, "\(String(describing: error))")
                #expect(error?.message.contains("1234567890") == false, "the value is not shown: \(String(describing: error))")
            }
            // Within Decimal's 38 digits (trailing zeros are no significant digits) values decode exactly.
            for text in [
                "1234567890.123456789", "12345678901234567890.123456789012345678", "-0.00012345678901234567890123456789012345678",
                "123456789012345678901234567890000000000000", "0.000", "100",
                "1" + String(repeating: "0", count: 130),  // 1e130: the zeros beyond 10^127 fit in the mantissa
            ] {
                let row = try await connection.query("SELECT \(text)::text::numeric")[0]
                let decoded = try row.decode(Decimal.self, at: 0)
                #expect(decoded == Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")), "\(text)")
                let back = try await connection.query("SELECT \(decoded)::numeric = \(text)::text::numeric")[0].decode(Bool.self, at: 0)
                #expect(back, "\(text) round-trips exactly")
            }
        }
    }

    @Test func byteaWithZeroBytes() async throws {
        let data = Data([0x00, 0x01, 0xFF, 0x00, 0x7F, 0x5C, 0x27])
        #expect(try await roundTrip(data, as: "bytea") == data)
        #expect(try await roundTrip(Data(), as: "bytea") == Data())
    }

    @Test func uuid() async throws {
        let id = UUID()
        #expect(try await roundTrip(id, as: "uuid") == id)
    }

    @Test func timestampsKeepMicroseconds() async throws {
        let samples: [Date] = [
            Date(timeIntervalSince1970: 0),
            Date(timeIntervalSince1970: 1_234_567_890.123456),
            Date(timeIntervalSince1970: -1_000_000_000.654321),  // 1938
            Date(timeIntervalSince1970: 4_102_444_800.000001),  // 2100
            Date(timeIntervalSince1970: 2_208_988_800.5),  // 2040
            Date(timeIntervalSince1970: -62_135_596_800),  // 0001-01-01
        ]
        for date in samples {
            let tz = try await roundTrip(date, as: "timestamptz")
            #expect(abs(tz.timeIntervalSince1970 - date.timeIntervalSince1970) < 0.0000005, "\(date)")
            let plain = try await roundTrip(date, as: "timestamp")
            #expect(abs(plain.timeIntervalSince1970 - date.timeIntervalSince1970) < 0.0000005, "\(date)")
        }
        let connection = try await TestServer.connect()
        let micro = try await connection.query("SELECT '2038-01-19 03:14:08.999999+00'::timestamptz")[0].decode(Date.self, at: 0)
        #expect(Int64((micro.timeIntervalSince1970 * 1_000_000).rounded()) == 2_147_483_648_999_999)
        let text = try await connection.query("SELECT \(Date(timeIntervalSince1970: 1.000001))::timestamptz::text")[0].decode(String.self, at: 0)
        #expect(text == "1970-01-01 00:00:01.000001+00")
        await connection.close()
    }

    @Test func dates() async throws {
        let connection = try await TestServer.connect()
        for (text, seconds) in [("1969-07-20", -14_256_000.0), ("2040-02-29", 2_213_999_999.0 + 1 - 86_400 * 0), ("1900-01-01", -2_208_988_800.0)] {
            let date = try await connection.query("SELECT \(text)::date")[0].decode(Date.self, at: 0)
            let back = try await connection.query("SELECT \(date)::date::text")[0].decode(String.self, at: 0)
            #expect(back == text)
            if text != "2040-02-29" { #expect(date.timeIntervalSince1970 == seconds) }
        }
        await connection.close()
    }

    @Test func json() async throws {
        struct Payload: Codable, Sendable, Equatable {
            var name: String
            var tags: [String]
            var nested: [String: Int]
        }
        let value = Payload(name: "ünï \"q\"", tags: ["a", "b"], nested: ["x": 1])
        let connection = try await TestServer.connect()
        let jsonb = try await connection.query("SELECT \(PGJSONB(value))")[0].decode(PGJSONB<Payload>.self, at: 0)
        #expect(jsonb.value == value)
        let json = try await connection.query("SELECT \(PGJSON(value))")[0].decode(PGJSON<Payload>.self, at: 0)
        #expect(json.value == value)
        await connection.close()
    }

    @Test func arrays() async throws {
        #expect(try await roundTrip([Int](), as: "int8[]") == [])
        #expect(try await roundTrip([1, -2, Int.max], as: "int8[]") == [1, -2, Int.max])
        #expect(try await roundTrip(["a", "b c", "\"q\"", "back\\slash", "NULL", "", "{x,y}", "ü"], as: "text[]") == ["a", "b c", "\"q\"", "back\\slash", "NULL", "", "{x,y}", "ü"])
        #expect(try await roundTrip([String]() , as: "text[]") == [])
        #expect(try await roundTrip([true, false], as: "bool[]") == [true, false])
        #expect(try await roundTrip([1.5, -.infinity], as: "float8[]") == [1.5, -.infinity])
        let ids = [UUID(), UUID()]
        #expect(try await roundTrip(ids, as: "uuid[]") == ids)
        let decimals = [Decimal(string: "1.25")!, Decimal(string: "-99999999999999999999.5")!]
        #expect(try await roundTrip(decimals, as: "numeric[]") == decimals)
        let bytes = [Data([0, 1]), Data()]
        #expect(try await roundTrip(bytes, as: "bytea[]") == bytes)
        let dates = [Date(timeIntervalSince1970: 1.5), Date(timeIntervalSince1970: -100.25)]
        #expect(try await roundTrip(dates, as: "timestamptz[]") == dates)
        let optionals: [Int?] = [1, nil, 3]
        #expect(try await roundTrip(optionals, as: "int8[]") == optionals)
    }

    @Test func nullAndOptionals() async throws {
        let connection = try await TestServer.connect()
        let none: Int? = nil
        let rows = try await connection.query(
            PGQuery(unsafeSQL: "SELECT $1::int8, $2::int8, NULL::text", binds: [try PGValue(none), try PGValue(Optional(5))]))
        #expect(try rows[0].decode(Int?.self, at: 0) == nil)
        #expect(try rows[0].decode(Int?.self, at: 1) == 5)
        #expect(try rows[0].decode(String?.self, at: 2) == nil)
        #expect(throws: PGError.self) { try rows[0].decode(Int.self, at: 0) }
        await connection.close()
    }

    @Test func textWithNULIsAClearError() async throws {
        let connection = try await TestServer.connect()
        let error = await #expect(throws: PGError.self) {
            try await connection.query("SELECT \("a\u{0}b")::text")
        }
        #expect(error?.kind == .encoding)
        #expect(error?.message.contains("NUL") == true)
        // The connection is still usable.
        #expect(try await connection.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
        await connection.close()
    }

    @Test func typeMismatchNamesTheColumn() async throws {
        let connection = try await TestServer.connect()
        let rows = try await connection.query("SELECT 'x'::text AS label")
        let error = #expect(throws: PGError.self) { try rows[0].decode(Int.self, column: "label") }
        #expect(error?.kind == .decoding)
        #expect(error?.column == "label")
        await connection.close()
    }
}
