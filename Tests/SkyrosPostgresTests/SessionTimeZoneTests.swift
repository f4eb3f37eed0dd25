import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// Each connection's session time zone is UTC (``PGConfiguration/sessionTimeZone``), so a `Date` stored in a
/// `timestamp` or `date` column reads back unshifted whatever the server's, role's or database's default zone.
@Suite("Session time zone")
struct SessionTimeZoneTests {
    /// The test server's configuration with a session default of `zone` given at startup (as a role's or
    /// database's `SET TimeZone` would be), for this connection only.
    static func configuration(defaultZone zone: String) throws -> PGConfiguration {
        var config = try TestServer.configuration
        config["options"] = [config["options"], "-c TimeZone=\(zone)"].compactMap { $0 }.joined(separator: " ")
        return config
    }

    static func zone(of connection: PGConnection) async throws -> String {
        try await connection.query("SELECT current_setting('TimeZone')")[0].decode(String.self, at: 0)
    }

    @Test func datesDoNotShiftWhenTheServersZoneIsNotUTC() async throws {
        try await TestServer.withSchema { schema in
            let connection = try await PGConnection.connect(to: try Self.configuration(defaultZone: "America/New_York"))
            try await withCleanup {
                #expect(try await Self.zone(of: connection) == "UTC")
                try await connection.execute(
                    script: "CREATE TABLE \(quoteIdentifier(schema)).t (ts timestamp, tstz timestamptz, d date)")
                let table = [schema, "t"]
                let midnight = Date(timeIntervalSince1970: 1_710_028_800)  // 2024-03-10 00:00:00 UTC
                try await connection.query("INSERT INTO \(qualified: table) (ts, tstz, d) VALUES (\(midnight), \(midnight), \(midnight))")
                let row = try await connection.query("SELECT ts, tstz, d, ts::text, d::text FROM \(qualified: table)")[0]
                let (timestamp, timestamptz, date) = try row.decode((Date, Date, Date).self)
                #expect(timestamp == midnight)
                #expect(timestamptz == midnight)
                #expect(date == midnight)
                let (timestampText, dateText) = (try row.decode(String.self, at: 3), try row.decode(String.self, at: 4))
                #expect(timestampText == "2024-03-10 00:00:00")
                #expect(dateText == "2024-03-10")

                // A pooled connection gets the same session.
                let pool = PGConnectionPool(postgres: try Self.configuration(defaultZone: "Asia/Tokyo"))
                #expect(try await pool.withConnection { try await Self.zone(of: $0) } == "UTC")
                await pool.shutdown()
            } cleanup: {
                await connection.close()
            }
        }
    }

    @Test func nilKeepsTheServersZone() async throws {
        var config = try Self.configuration(defaultZone: "America/New_York")
        config.sessionTimeZone = nil
        let (zone, stored) = try await Self.withConnection(to: config) { connection in
            // PostgreSQL converts the timestamptz parameter in the session zone: 19:00 the day before.
            let midnight = Date(timeIntervalSince1970: 1_710_028_800)
            return (
                try await Self.zone(of: connection),
                try await connection.query("SELECT \(midnight)::timestamp::text")[0].decode(String.self, at: 0)
            )
        }
        #expect(zone == "America/New_York")
        #expect(stored == "2024-03-09 19:00:00")
    }

    @Test func anotherZoneCanBeChosenAndAnUnknownOneIsAConfigurationError() async throws {
        var config = try Self.configuration(defaultZone: "America/New_York")
        config.sessionTimeZone = "Europe/Paris"
        #expect(try await Self.withConnection(to: config) { try await Self.zone(of: $0) } == "Europe/Paris")

        config.sessionTimeZone = "No/Such_Zone"
        let error = await #expect(throws: PGError.self) { _ = try await PGConnection.connect(to: config) }
        #expect(error?.kind == .invalidConfiguration)
        #expect(error?.message.contains("No/Such_Zone") == true)
    }

    /// A server already in UTC (under any of its names) gets no `SET`.
    @Test func aServerAlreadyInUTCIsLeftAsItIs() async throws {
        let zone = try await Self.withConnection(to: try Self.configuration(defaultZone: "Etc/UTC")) { try await Self.zone(of: $0) }
        #expect(zone == "Etc/UTC")
    }

    /// Behind PgBouncer in transaction mode (which refuses startup `options`) the zone set after connecting
    /// holds for every statement, on whichever server connection PgBouncer picks: it tracks `TimeZone` for its
    /// client and sets it on each server connection it lends.
    @Test(
        .enabled(if: PostgresFixture.isAvailable, "starts its own PgBouncer: run through scripts/test"),
        .enabled(if: PostgresFixture.hasPgBouncer, "pgbouncer is not installed (scripts/test installs it as root with apt-get)"),
        .timeLimit(.minutes(2)))
    func theZoneHoldsBehindPgBouncerInTransactionMode() async throws {
        // A database of its own whose default zone is not UTC (a role's or database's default, as in production).
        let database = "skyros_tz_\(UUID().uuidString.prefix(8).lowercased())"
        try await TestServer.withConnection { admin in
            try await admin.execute(script: "CREATE DATABASE \(quoteIdentifier(database))")
            try await admin.execute(script: "ALTER DATABASE \(quoteIdentifier(database)) SET TimeZone = 'America/New_York'")
        }
        try await withCleanup {
            try await PostgresFixture.with("pgbouncer", [TestServer.url]) { fixture in
                let bouncer = try fixture.configuration("BOUNCER_URL").withDatabase(database)
                var serverDefault = bouncer
                serverDefault.sessionTimeZone = nil
                let utc = try await PGConnection.connect(to: bouncer, usePreparedStatements: false)
                let other = try await PGConnection.connect(to: serverDefault, usePreparedStatements: false)
                try await withCleanup {
                    var utcZones: Set<String> = []
                    var otherZones: Set<String> = []
                    var utcServers: Set<Int> = []
                    var otherServers: Set<Int> = []
                    func readUTC() async throws {
                        let row = try await utc.query("SELECT current_setting('TimeZone'), pg_backend_pid()")[0]
                        utcZones.insert(try row.decode(String.self, at: 0))
                        utcServers.insert(try row.decode(Int.self, at: 1))
                    }
                    try await readUTC()
                    for _ in 0..<4 {
                        // `other` holds a server connection in a transaction, so `utc` gets another one.
                        try await other.execute(script: "BEGIN")
                        let row = try await other.query("SELECT current_setting('TimeZone'), pg_backend_pid()")[0]
                        otherZones.insert(try row.decode(String.self, at: 0))
                        otherServers.insert(try row.decode(Int.self, at: 1))
                        try await readUTC()
                        try await other.execute(script: "COMMIT")
                        try await readUTC()
                    }
                    #expect(!utcServers.isDisjoint(with: otherServers), "a server connection served both clients")
                    #expect(utcServers.union(otherServers).count >= 2)
                    #expect(utcZones == ["UTC"])
                    #expect(otherZones == ["America/New_York"])
                } cleanup: {
                    await utc.close()
                    await other.close()
                }
            }
        } cleanup: {
            _ = try? await TestServer.withConnection { admin in
                try await admin.execute(script: "DROP DATABASE IF EXISTS \(quoteIdentifier(database)) WITH (FORCE)")
            }
        }
    }

    static func withConnection<R>(to config: PGConfiguration, _ body: (PGConnection) async throws -> R) async throws -> R {
        let connection = try await PGConnection.connect(to: config)
        return try await withCleanup { try await body(connection) } cleanup: { await connection.close() }
    }
}
