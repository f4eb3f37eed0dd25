import Foundation

/// The service's settings, read from the environment once at start.
///
/// | Variable | Default | Meaning |
/// |---|---|---|
/// | `DATABASE_URL` | (required) | the PostgreSQL URL |
/// | `HOST` | `0.0.0.0` | the address to bind; in a container it must not be `127.0.0.1` (unreachable from outside) |
/// | `PORT` | `8080` | the port to bind |
/// | `SCHEMA` | none | a schema to sandbox the tables in (the connection's `search_path` otherwise) |
/// | `MIGRATIONS` | `migrations` | the migrations directory |
/// | `MIGRATE_AT_START` | `true` | apply the migrations at start; `false` when a `migrate` job runs them once per deploy |
/// | `SSE_HEARTBEAT_SECONDS` | `15` | the interval of the `: heartbeat` comment on an idle event stream |
/// | `DRAIN_SECONDS` | `0` | on SIGTERM, how long `/health` answers 503 `draining` while requests are still served |
/// | `DATABASE_WAIT_SECONDS` | `30` | how long start-up waits for PostgreSQL to accept a connection |
/// | `WRITE_TIMEOUT_MS` | `2000` | how long a write may wait for PostgreSQL before the request answers 503 |
struct Settings: Sendable {
    var databaseURL: String
    var host: String
    var port: Int
    var schema: String?
    var migrations: String
    var migrateAtStart: Bool
    var heartbeat: Duration
    var drain: Duration
    var databaseWait: Duration
    var writeTimeout: Duration

    /// A variable that is set but cannot be used: the service exits with status 2 naming it (never its value,
    /// which for `DATABASE_URL` holds a password).
    struct Invalid: Error, CustomStringConvertible {
        var variable: String
        var expected: String
        var description: String { "\(self.variable) must be \(self.expected)" }
    }

    init(environment: [String: String]) throws(Invalid) {
        guard let url = environment["DATABASE_URL"], !url.isEmpty else {
            throw Invalid(variable: "DATABASE_URL", expected: "set (postgres://user:password@host:port/database)")
        }
        self.databaseURL = url
        self.host = environment["HOST"].flatMap { $0.isEmpty ? nil : $0 } ?? "0.0.0.0"
        self.port = try Self.integer(environment, "PORT", default: 8080, in: 0...65_535)
        self.schema = environment["SCHEMA"].flatMap { $0.isEmpty ? nil : $0 }
        self.migrations = environment["MIGRATIONS"].flatMap { $0.isEmpty ? nil : $0 } ?? "migrations"
        self.migrateAtStart = try Self.flag(environment, "MIGRATE_AT_START", default: true)
        self.heartbeat = try Self.seconds(environment, "SSE_HEARTBEAT_SECONDS", default: 15, minimum: 0.1)
        self.drain = try Self.seconds(environment, "DRAIN_SECONDS", default: 0, minimum: 0)
        self.databaseWait = try Self.seconds(environment, "DATABASE_WAIT_SECONDS", default: 30, minimum: 0)
        self.writeTimeout = .milliseconds(try Self.integer(environment, "WRITE_TIMEOUT_MS", default: 2000, in: 1...600_000))
    }

    private static func integer(
        _ environment: [String: String], _ name: String, default value: Int, in range: ClosedRange<Int>
    ) throws(Invalid) -> Int {
        guard let text = environment[name], !text.isEmpty else { return value }
        guard let parsed = Int(text), range.contains(parsed) else {
            throw Invalid(variable: name, expected: "an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return parsed
    }

    private static func seconds(
        _ environment: [String: String], _ name: String, default value: Double, minimum: Double
    ) throws(Invalid) -> Duration {
        guard let text = environment[name], !text.isEmpty else { return .milliseconds(Int64(value * 1000)) }
        guard let parsed = Double(text), parsed.isFinite, parsed >= minimum, parsed <= 86_400 else {
            throw Invalid(variable: name, expected: "a number of seconds between \(minimum) and 86400")
        }
        return .milliseconds(Int64((parsed * 1000).rounded()))
    }

    private static func flag(_ environment: [String: String], _ name: String, default value: Bool) throws(Invalid) -> Bool {
        guard let text = environment[name], !text.isEmpty else { return value }
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw Invalid(variable: name, expected: "true or false (1/0, yes/no, on/off)")
        }
    }
}
