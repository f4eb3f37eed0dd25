import Foundation

/// libpq's grammar of URLs and keyword conninfo strings, checked before libpq parses one.
///
/// libpq's parse errors quote the text they could not parse: `postgres//u:Sup3rS3cret@host/db` (a missing
/// colon) is not a URL to libpq, so it reads it as `keyword=value` pairs and answers `missing "=" after
/// "postgres//u:Sup3rS3cret@host/db"`. So a string libpq would reject fails here first, with a message that
/// names the position (1-based, in Unicode scalars) and what was expected there, and quotes nothing of the
/// string; and when libpq rejects a string that passed, its message is replaced by one built here. Where a
/// password is at fault, the position is where it starts, not where in it the fault is.
///
/// The checks follow libpq's parser (`conninfo_uri_parse_options` and `conninfo_parse` in `fe-connect.c`) and
/// accept what it accepts, with three additions: the password rules (PGConfiguration+PasswordSyntax.swift),
/// ports that are numbers, and a string that looks meant as a URL (its first word starts with `postgres`, in
/// any case, or holds a `:`, `/` or `@`, which no keyword does) must start with `postgresql://` or
/// `postgres://`.
extension PGConfiguration {
    /// What a string was taken for, in messages.
    enum SyntaxKind: String {
        case url = "PostgreSQL URL"
        case conninfo = "connection string"
    }

    /// What ``checkSyntax(_:)`` read: the kind of string, and each keyword it names (a URL's query parameters,
    /// percent-decoded) with its position, to say which one libpq did not know if it rejects the string.
    struct SyntaxSummary {
        var kind: SyntaxKind
        var keywords: [(name: String, position: Int)]
    }

    /// The error for a malformed URL or conninfo string: `position` (1-based), when known, and what was wrong
    /// or expected there; never any text of the string.
    static func syntaxError(_ kind: SyntaxKind, at position: Int?, _ problem: String) -> PGError {
        let location = position.map { " at character \($0)" } ?? ""
        return PGError(
            kind: .invalidConfiguration, message: "malformed \(kind.rawValue)\(location): \(problem)", position: position)
    }

    /// Throws ``PGError/Kind/invalidConfiguration`` when libpq would reject `conninfo` (a URL or keyword
    /// conninfo), or would split its password; the message names the position and quotes none of it.
    static func checkSyntax(_ conninfo: String) throws -> SyntaxSummary {
        let text = Array(conninfo.unicodeScalars)
        if let prefix = self.urlPrefixes.first(where: { text.starts(with: $0.unicodeScalars) }) {
            let start = prefix.unicodeScalars.count
            try self.checkURLPassword(text, from: start)
            return SyntaxSummary(kind: .url, keywords: try self.checkURLGrammar(text, from: start))
        }
        try self.checkNotAMisspelledURL(text)
        let syntax = self.keywordSyntax(text)
        try self.checkKeywordPassword(syntax)
        if let failure = syntax.failure { throw self.syntaxError(.conninfo, at: failure.position, failure.expected) }
        return SyntaxSummary(kind: .conninfo, keywords: syntax.pairs.map { ($0.keyword, $0.position) })
    }

    /// The error for a string that passed ``checkSyntax(_:)`` and that libpq rejected all the same (a keyword it
    /// does not know): libpq's message quotes the string, so this one says where instead.
    static func rejectedByLibpq(_ summary: SyntaxSummary) -> PGError {
        // libpq still takes `requiressl`, which it no longer lists among its keywords.
        if let unknown = summary.keywords.first(where: { !self.libpqKeywords.contains($0.name) && $0.name != "requiressl" }) {
            let what = summary.kind == .url ? "a query parameter" : "a keyword"
            return self.syntaxError(
                summary.kind, at: unknown.position,
                "expected \(what) that libpq knows (host, port, dbname, user, password, sslmode, connect_timeout, "
                    + "application_name, target_session_attrs, …)")
        }
        return self.syntaxError(
            summary.kind, at: nil, "libpq rejected it (its message is not shown: it quotes the text, password included)")
    }

    // MARK: URLs

    /// Reads a URL after its prefix (`start`) as libpq does, and throws where libpq would fail or quote a
    /// component whole (a bad `%` escape), or where a port is not a number. Returns the query parameters.
    private static func checkURLGrammar(_ text: [Unicode.Scalar], from start: Int) throws -> [(name: String, position: Int)] {
        let end = text.count
        func fail(_ index: Int, _ expected: String) -> PGError { self.syntaxError(.url, at: index + 1, expected) }
        func checkEscapes(_ range: Range<Int>, of component: String) throws {
            if let bad = self.badPercentEscape(in: text, range) {
                throw fail(bad, "expected two hexadecimal digits other than 00 after '%' in the \(component)")
            }
        }
        func decoded(_ range: Range<Int>) -> String? { self.string(text[range]).removingPercentEncoding }
        let hostEnds: Set<Unicode.Scalar> = [":", "/", "?", ","]
        let portEnds: Set<Unicode.Scalar> = ["/", "?", ","]

        // User information: up to an '@' that comes before any '/' (checked by checkURLPassword).
        var index = start
        while index < end, text[index] != "@", text[index] != "/" { index += 1 }
        let hasUserInfo = index < end && text[index] == "@"
        index = hasUserInfo ? index + 1 : start

        // Hosts, each with an optional port, separated by commas.
        while true {
            if index < end, text[index] == "[" {
                let open = index
                index += 1
                while index < end, text[index] != "]" { index += 1 }
                guard index < end else { throw fail(open, "expected a ']' to close the IPv6 address that starts here") }
                guard index > open + 1 else { throw fail(index, "expected an IPv6 address between '[' and ']'") }
                try checkEscapes((open + 1)..<index, of: "host")
                index += 1
                if index < end, !hostEnds.contains(text[index]) {
                    throw fail(index, "expected ':', '/', '?' or ',' after the IPv6 address")
                }
            } else {
                let host = index
                while index < end, !hostEnds.contains(text[index]) { index += 1 }
                try checkEscapes(host..<index, of: "host")
            }
            if index < end, text[index] == ":" {
                index += 1
                let port = index
                while index < end, !portEnds.contains(text[index]) { index += 1 }
                try checkEscapes(port..<index, of: "port")
                if port < index, !(decoded(port..<index).flatMap { Int($0) }.map { (1...65_535).contains($0) } ?? false) {
                    let advice =
                        hasUserInfo ? "" : " (a password goes before the host: postgres://user:password@host:port/database)"
                    throw fail(port, "expected a port number from 1 to 65535" + advice)
                }
            }
            guard index < end, text[index] == "," else { break }
            index += 1
        }

        // The database, up to the query.
        if index < end, text[index] == "/" {
            index += 1
            let database = index
            while index < end, text[index] != "?" { index += 1 }
            try checkEscapes(database..<index, of: "database name")
        }

        // The query: keyword=value parameters separated by '&' (a trailing '&' is allowed).
        var parameters: [(name: String, position: Int)] = []
        guard index < end else { return parameters }
        index += 1
        while index < end {
            let parameter = index
            var equals: Int?
            while index < end, text[index] != "&" {
                if text[index] == "=" {
                    guard equals == nil else {
                        throw fail(
                            index, "expected '&' or the end of the URL: a query parameter holds a second '=' (encode it as %3D)")
                    }
                    equals = index
                }
                index += 1
            }
            guard let equals else { throw fail(parameter, "expected a keyword=value query parameter") }
            try checkEscapes(parameter..<equals, of: "name of a query parameter")
            try checkEscapes((equals + 1)..<index, of: "value of a query parameter")
            parameters.append((decoded(parameter..<equals) ?? "", parameter + 1))
            if index < end { index += 1 }  // past the '&'
        }
        return parameters
    }

    /// Throws when `text` looks meant as a URL but does not start with libpq's prefix, so that libpq would read it
    /// as `keyword=value` pairs and quote it whole: its first word starts with `postgres` (in any case), or holds
    /// a `:`, `/` or `@`, which no keyword does.
    private static func checkNotAMisspelledURL(_ text: [Unicode.Scalar]) throws {
        let first = text.firstIndex { !self.isSpace($0) } ?? text.count
        let word = text[first...].prefix { !self.isSpace($0) && $0 != "=" }
        let startsAsURL = self.string(word).lowercased().hasPrefix("postgres")
        guard startsAsURL || word.contains(where: { $0 == ":" || $0 == "/" || $0 == "@" }) else { return }
        let expected = "expected the URL to begin with postgresql:// or postgres://"
        if first > 0 { throw self.syntaxError(.url, at: 1, "\(expected), with nothing before it") }
        let matched = self.urlPrefixes.map { prefix in zip(text, prefix.unicodeScalars).prefix { $0 == $1 }.count }.max() ?? 0
        if matched == 0, startsAsURL { throw self.syntaxError(.url, at: 1, "\(expected), in lower case") }
        throw self.syntaxError(.url, at: matched + 1, expected)
    }

    // MARK: Keyword conninfo

    /// One `keyword = value` of a conninfo string (the value is not kept).
    struct KeywordPair {
        var keyword: String
        /// 1-based position of the keyword.
        var position: Int
        var quoted: Bool
        /// The index of the value's first character (its opening quote when quoted).
        var valueStart: Int
    }

    /// A keyword conninfo string as libpq's parser splits it: its pairs, up to the first place it would fail.
    struct KeywordSyntax {
        var pairs: [KeywordPair]
        /// Where (1-based) and why libpq would reject the string; `nil` when every pair is complete.
        var failure: (position: Int, expected: String)?
    }

    /// Splits a keyword conninfo string into its pairs as libpq's `conninfo_parse` does: blanks are `isspace`, a
    /// value is quoted with `'` or ends at a blank, and a backslash escapes the next character in either.
    static func keywordSyntax(_ text: [Unicode.Scalar]) -> KeywordSyntax {
        var pairs: [KeywordPair] = []
        var index = 0
        let end = text.count
        func skipBlanks() { while index < end, self.isSpace(text[index]) { index += 1 } }
        func failure(_ at: Int, _ expected: String) -> KeywordSyntax {
            KeywordSyntax(pairs: pairs, failure: (at + 1, expected))
        }
        while true {
            skipBlanks()
            guard index < end else { return KeywordSyntax(pairs: pairs, failure: nil) }
            let keywordStart = index
            while index < end, text[index] != "=", !self.isSpace(text[index]) { index += 1 }
            let keyword = self.string(text[keywordStart..<index])
            skipBlanks()
            guard index < end, text[index] == "=" else {
                return failure(index, "expected '=' after the keyword at character \(keywordStart + 1)")
            }
            guard !keyword.isEmpty else { return failure(index, "expected a keyword before '='") }
            index += 1
            skipBlanks()
            let valueStart = index
            let quoted = index < end && text[index] == "'"
            if quoted {
                let open = index
                index += 1
                var closed = false
                while index < end {
                    let character = text[index]
                    index += character == "\\" ? 2 : 1
                    if character == "'" {
                        closed = true
                        break
                    }
                }
                guard closed else {
                    return failure(
                        open, "the quoted value that starts here has no closing quote (write a quote inside it as \\' and a "
                            + "backslash as \\\\)")
                }
            } else {
                while index < end, !self.isSpace(text[index]) { index += text[index] == "\\" ? 2 : 1 }
                index = min(index, end)
            }
            pairs.append(KeywordPair(keyword: keyword, position: keywordStart + 1, quoted: quoted, valueStart: valueStart))
        }
    }

    // MARK: Scalars

    /// C's `isspace` in the C locale, which libpq's parser uses: space, tab, newline, vertical tab, form feed,
    /// carriage return.
    static func isSpace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || ("\t"..."\r").contains(scalar)
    }

    static func string(_ scalars: some Sequence<Unicode.Scalar>) -> String {
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars)
        return String(view)
    }
}
