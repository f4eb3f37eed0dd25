import CLibPQ

/// PGConnection settings: a `postgres://` URL or keyword conninfo, parsed by libpq itself so every libpq
/// option (`sslmode`, `sslrootcert`, `target_session_attrs`, multi-host lists, …) passes through.
///
/// ```swift
/// let config = try PGConfiguration(url: "postgres://app:secret@db:5432/app?sslmode=verify-full")
/// let config2 = try PGConfiguration(conninfo: "host=a,b port=5432 dbname=app target_session_attrs=read-write")
/// ```
///
/// `description` never contains a password: the value of every keyword whose name contains `password` (such as
/// `sslpassword`) shows as `********`, and nothing else is masked.
///
/// A URL must percent-encode special characters in its user name and password (`@` → `%40`, `/` → `%2F`,
/// `%` → `%25`, a space → `%20`): otherwise libpq splits it elsewhere than meant, and pieces of the password
/// would land in the host or the database. A URL whose user information holds an unencoded `@` or `/`, a space
/// or a bad `%` escape, and a conninfo string whose unquoted password runs into other words, are rejected
/// with ``PGError/Kind/invalidConfiguration`` and a message that quotes no part of them.
///
/// ```swift
/// // The password is p@ss/word.
/// let config3 = try PGConfiguration(url: "postgres://app:p%40ss%2Fword@db:5432/app")
/// ```
///
/// libpq's own parse errors quote the text they could not parse, and a mistyped URL is text libpq cannot parse:
/// `postgres//app:secret@db/app` (a missing colon) is not a URL to libpq, so it would answer `missing "=" after
/// "postgres//app:secret@db/app"`. So every string is checked against libpq's grammar first, and one that
/// libpq would reject (a misspelled `postgres://`, an unclosed `[`, a port that is not a number, a query
/// parameter without `=`, an unknown keyword, an unterminated quote, …) fails with a message that names the
/// position and what was expected there, and quotes nothing of the string. ``PGError/position`` holds the
/// position.
///
/// ```swift
/// do {
///     _ = try PGConfiguration(url: "postgres//app:secret@db/app")
/// } catch let error as PGError {
///     print(error.message)   // malformed PostgreSQL URL at character 9: expected the URL to begin with …
/// }
/// ```
public struct PGConfiguration: Sendable, Hashable, CustomStringConvertible {
    /// The libpq keyword/value pairs, in libpq's order; only the options that were set.
    public private(set) var options: [Option]

    /// One libpq connection parameter (`host`, `sslmode`, `application_name`, …) and its value.
    public struct Option: Sendable, Hashable {
        /// The libpq keyword, such as `sslmode`.
        public var keyword: String
        /// The value, as libpq takes it.
        public var value: String
    }

    /// How long a connection busy-polls its socket for a statement's reply before its thread sleeps (default
    /// 100 µs; `.zero` always sleeps). Not a libpq option: Skyros's own, like Linux's `SO_BUSY_POLL`.
    ///
    /// A sleeping thread pays a wake-up on every round trip, and on an idle core (above all a virtual CPU
    /// that halts when idle) that wake-up can cost as much as a short statement. Polling spends at most this
    /// long per reply, yields the core to any other runnable thread while it waits, switches itself off while
    /// replies take longer than twice the window (a server across the network, long statements), and at most
    /// half the cores' worth of connection threads poll at once (the others sleep). Set `.zero` when CPU
    /// matters more than latency.
    ///
    /// ```swift
    /// var config = try PGConfiguration(url: url)
    /// config.busyPoll = .zero   // remote database: never poll
    /// ```
    public var busyPoll: Duration = .microseconds(100)

    /// The session time zone each connection sets when it connects (default `"UTC"`); `nil` keeps the server's.
    ///
    /// A `Date` is sent as `timestamptz`, and PostgreSQL converts it to a `timestamp` or `date` column in the
    /// session time zone, while Skyros reads `timestamp` and `date` as UTC. In any zone but UTC a `Date` stored
    /// in such a column reads back shifted (with `America/New_York`, `2024-03-10 00:00:00+00` is stored as
    /// `2024-03-09 19:00:00` and `2024-03-09`). So each connection runs `SET TimeZone` after connecting,
    /// unless the server already reports this zone (the server's default, or one set for the role or the
    /// database, or by the `options` keyword). A `SET`, not a startup option: PgBouncer in transaction mode
    /// rejects startup options but keeps a `TimeZone` set this way for its client.
    ///
    /// ```swift
    /// var config = try PGConfiguration(url: url)
    /// config.sessionTimeZone = nil   // keep the server's zone (timestamp and date columns then shift)
    /// ```
    ///
    /// A name PostgreSQL does not know makes connecting fail with ``PGError/Kind/invalidConfiguration``.
    public var sessionTimeZone: String? = "UTC"

    /// How long opening one connection may take (libpq's `connect_timeout`) when the URL or conninfo sets no
    /// `connect_timeout`; default 10 seconds, `nil` for no limit.
    ///
    /// Without a limit, a host that accepts TCP connections and never answers (a firewall, a hung server, a
    /// proxy whose backend is gone) makes every connection attempt wait for the operating system's TCP
    /// timeouts, minutes. libpq counts whole seconds and waits at least 2: this value is rounded up to whole
    /// seconds. With several hosts, the limit applies to each host in turn. An explicit `connect_timeout` in
    /// the URL or conninfo wins over this value.
    ///
    /// ```swift
    /// var config = try PGConfiguration(url: "postgres://app:secret@db:5432/app")
    /// config.connectTimeout = .seconds(3)    // fail fast within one data center
    /// ```
    public var connectTimeout: Duration? = .seconds(10)

    /// The limit on opening one connection as libpq applies it: the `connect_timeout` keyword when it is set
    /// (`0` or less: no limit; `1`: 2 s), else ``connectTimeout``; `nil` for no limit.
    package var effectiveConnectTimeout: Duration? {
        guard let keyword = self["connect_timeout"] else { return self.connectTimeout.map { .seconds(Self.libpqSeconds($0)) } }
        guard let seconds = Int(keyword.trimmingCharacters(in: .whitespaces)), seconds > 0 else { return nil }
        return .seconds(max(seconds, 2))
    }

    /// The options passed to libpq when a connection opens: ``options``, plus `connect_timeout` from
    /// ``connectTimeout`` when they hold none.
    package var connectOptions: [Option] {
        guard self["connect_timeout"] == nil, let timeout = self.connectTimeout else { return self.options }
        return self.options + [Option(keyword: "connect_timeout", value: String(Self.libpqSeconds(timeout)))]
    }

    /// A duration as libpq's `connect_timeout`: whole seconds, rounded up, at least 2.
    package static func libpqSeconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return max(2, Int(seconds) + (attoseconds > 0 ? 1 : 0))
    }

    /// Parses a `postgres://` / `postgresql://` URL or a keyword conninfo string.
    /// - Throws: ``PGError`` of kind ``PGError/Kind/invalidConfiguration``: for a malformed string, a message
    ///   that names the position and what was expected, and quotes nothing of the string; for an invalid value
    ///   (a port, a timeout), one that never contains the password.
    public init(url: String) throws {
        try self.init(conninfo: url)
    }

    /// Parses a keyword conninfo string (`host=… port=… dbname=…`) or a URL.
    /// - Throws: ``PGError`` of kind ``PGError/Kind/invalidConfiguration``: for a malformed string, a message
    ///   that names the position and what was expected, and quotes nothing of the string; for an invalid value,
    ///   one that never contains the password, nor a piece of it.
    public init(conninfo: String) throws {
        let syntax = try Self.checkSyntax(conninfo)
        let candidates = Self.passwordCandidates(in: conninfo)
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let parsed = PQconninfoParse(conninfo, &errorMessage) else {
            // libpq's parse errors quote the text they could not parse, password included: never shown.
            if let errorMessage { PQfreemem(errorMessage) }
            throw Self.rejectedByLibpq(syntax)
        }
        defer { PQconninfoFree(parsed) }
        var options: [Option] = []
        var cursor = parsed
        while let keyword = cursor.pointee.keyword {
            if let value = cursor.pointee.val {
                options.append(Option(keyword: String(cString: keyword), value: String(cString: value)))
            }
            cursor += 1
        }
        self.options = options
        // A password libpq parsed whole leaves nothing in other values, so their messages mask nothing; only one
        // it split (which the checks above missed) may have left pieces there.
        let parsedSecrets = Set(options.filter { Self.isSecret($0.keyword) }.map(\.value))
        let splitPieces = candidates.filter { !$0.forms.contains(where: parsedSecrets.contains) }.flatMap(\.all)
        try self.validate(redacting: Self.longestFirst(splitPieces))
        if self["application_name"] == nil { self["application_name"] = "skyros" }
    }

    /// libpq only checks some values when connecting; reject malformed numbers up front. The messages quote
    /// the value, with `candidates` (pieces of a password libpq split) masked.
    private func validate(redacting candidates: [String]) throws {
        if let ports = self["port"] {
            for port in ports.split(separator: ",", omittingEmptySubsequences: false) {
                guard port.isEmpty || (Int(port).map { (1...65_535).contains($0) } ?? false) else {
                    throw PGError(
                        kind: .invalidConfiguration,
                        message: Self.redact("invalid port \"\(port)\": expected a number from 1 to 65535", secrets: candidates))
                }
            }
        }
        for keyword in ["connect_timeout", "keepalives_idle", "keepalives_interval", "keepalives_count"] {
            if let value = self[keyword], Int(value) == nil {
                throw PGError(
                    kind: .invalidConfiguration,
                    message: Self.redact("invalid \(keyword) \"\(value)\": expected an integer", secrets: candidates))
            }
        }
    }

    /// Builds a configuration from individual settings.
    public init(
        host: String = "localhost", port: Int = 5432, user: String, password: String? = nil,
        database: String, tls: String? = nil
    ) {
        self.options = []
        self["host"] = host
        self["port"] = String(port)
        self["user"] = user
        if let password { self["password"] = password }
        self["dbname"] = database
        if let tls { self["sslmode"] = tls }
        self["application_name"] = "skyros"
    }

    /// Reads or sets any libpq keyword (`sslmode`, `connect_timeout`, `options`, …).
    public subscript(keyword: String) -> String? {
        get { self.options.first { $0.keyword == keyword }?.value }
        set {
            if let index = self.options.firstIndex(where: { $0.keyword == keyword }) {
                if let newValue { self.options[index].value = newValue } else { self.options.remove(at: index) }
            } else if let newValue {
                self.options.append(Option(keyword: keyword, value: newValue))
            }
        }
    }

    /// The `host` parameter: a name, an address, or a socket directory (`nil`: libpq's default).
    public var host: String? { self["host"] }
    /// The `port` parameter (`nil`: libpq's default, 5432).
    public var port: Int? { self["port"].flatMap { Int($0) } }
    /// The `user` parameter (`nil`: libpq uses the operating-system user).
    public var user: String? { self["user"] }
    /// The `dbname` parameter (`nil`: libpq uses the user name).
    public var database: String? { self["dbname"] }
    var password: String? { self["password"] }

    /// A copy connecting to another database on the same server.
    public func withDatabase(_ name: String) -> PGConfiguration {
        var copy = self
        copy["dbname"] = name
        return copy
    }

    /// Keyword conninfo with the value of every password keyword (`password`, `sslpassword`, …) replaced by
    /// `********`; every other value as it is.
    public var description: String {
        self.options.map { option in
            "\(option.keyword)=\(Self.quote(Self.isSecret(option.keyword) ? "********" : option.value))"
        }.joined(separator: " ")
    }

    /// Whether a keyword's value is a secret: any keyword whose name contains `password` (`password`,
    /// `sslpassword`, and any libpq adds).
    static func isSecret(_ keyword: String) -> Bool {
        keyword.lowercased().contains("password")
    }

    /// Without duplicates or empty strings, longest first.
    private static func longestFirst(_ strings: [String]) -> [String] {
        Set(strings.filter { !$0.isEmpty }).sorted { $0.count != $1.count ? $0.count > $1.count : $0 < $1 }
    }

    private static func quote(_ value: String) -> String {
        if !value.isEmpty, !value.contains(where: { $0 == " " || $0 == "'" || $0 == "\\" }) { return value }
        return "'" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    /// Replaces every occurrence of a secret in `text` with `********`: only for messages that quote a value libpq
    /// parsed (``validate(redacting:)``), where a piece of a password it split may have landed.
    static func redact(_ text: String, secrets: [String]) -> String {
        var result = text
        for secret in secrets where !secret.isEmpty {
            result = result.replacingOccurrences(of: secret, with: "********")
        }
        return result
    }

    /// A password as written in a raw URL or conninfo: its `forms` (as written, and percent-decoded), and the
    /// `pieces` libpq may split it into when it is not percent-encoded (or, in a conninfo string, not quoted).
    struct PasswordCandidate {
        var forms: [String] = []
        var pieces: [String] = []
        var all: [String] { self.forms + self.pieces }
    }

    /// Best-effort extraction of the passwords in a raw URL or conninfo, before libpq parses it.
    static func passwordCandidates(in conninfo: String) -> [PasswordCandidate] {
        var candidates: [PasswordCandidate] = []
        if let schemeEnd = conninfo.range(of: "://") {
            let rest = conninfo[schemeEnd.upperBound...]
            // The password may hold `/` and `@` unencoded: the user information runs to the last `@` before
            // the query string (libpq ends it at the first `/` or `@`).
            let authority = rest.prefix { $0 != "?" }
            if let at = authority.lastIndex(of: "@") {
                let userinfo = authority[..<at]
                if let colon = userinfo.firstIndex(of: ":") {
                    let raw = userinfo[userinfo.index(after: colon)...]
                    var candidate = PasswordCandidate(forms: [String(raw)])
                    if let decoded = raw.removingPercentEncoding { candidate.forms.append(decoded) }
                    let split = raw.split { $0 == "/" || $0 == "@" || $0 == ":" || $0.isWhitespace }.map(String.init)
                    if split.count > 1 { candidate.pieces = split + split.compactMap { $0.removingPercentEncoding } }
                    candidates.append(candidate)
                }
            }
            // Every `…password=` parameter (`password`, `sslpassword`).
            var searched = conninfo[...]
            while let query = searched.range(of: "password=") {
                let value = conninfo[query.upperBound...].prefix { $0 != "&" }
                var candidate = PasswordCandidate(forms: [String(value)])
                if let decoded = String(value).removingPercentEncoding { candidate.forms.append(decoded) }
                candidates.append(candidate)
                searched = conninfo[query.upperBound...]
            }
        } else {
            // Every `…password = value` keyword (`password`, `sslpassword`).
            var searched = conninfo[...]
            while let key = searched.range(of: "password") {
                var rest = conninfo[key.upperBound...].drop { $0.isWhitespace }
                if rest.first == "=" {
                    rest = rest.dropFirst().drop { $0.isWhitespace }
                    if rest.first == "'" {
                        candidates.append(PasswordCandidate(forms: [String(rest.dropFirst().prefix { $0 != "'" })]))
                    } else {
                        // Unquoted, the value ends at the first space: the words after it, up to the next
                        // `keyword=`, are likely the rest of the password (libpq then reports them).
                        let words = rest.split(whereSeparator: \.isWhitespace)
                        var taken: [Substring] = []
                        for (i, word) in words.enumerated() {
                            let name = word.prefix { $0 != "=" }
                            let assigns = word.contains("=") || (i + 1 < words.count && words[i + 1].first == "=")
                            if i > 0, assigns, Self.libpqKeywords.contains(String(name)) { break }
                            taken.append(word)
                        }
                        var candidate = PasswordCandidate(forms: taken.first.map { [String($0)] } ?? [])
                        if taken.count > 1 {
                            candidate.pieces.append(taken.joined(separator: " "))
                            for word in taken {
                                candidate.pieces.append(String(word))
                                candidate.pieces += word.split(separator: "=").map(String.init)
                            }
                        }
                        candidates.append(candidate)
                    }
                }
                searched = conninfo[key.upperBound...]
            }
        }
        return candidates
    }

    /// Every keyword libpq knows (`host`, `dbname`, `sslmode`, …).
    static let libpqKeywords: Set<String> = {
        guard let defaults = PQconndefaults() else { return [] }
        defer { PQconninfoFree(defaults) }
        var names: Set<String> = []
        var cursor = defaults
        while let keyword = cursor.pointee.keyword {
            names.insert(String(cString: keyword))
            cursor += 1
        }
        return names
    }()
}

import Foundation
