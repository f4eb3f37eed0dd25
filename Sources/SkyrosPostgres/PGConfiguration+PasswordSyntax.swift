/// Rejects a URL or conninfo string in which libpq would not find the password where its writer meant it.
///
/// libpq ends a URL's user information at its first `@` (or sees none when a `/` comes first), so a password
/// holding an unencoded `@` or `/` is split: its tail becomes the host, the port or the database, and shows in
/// every message that names them. libpq's URL decoder also quotes a component with a bad `%` escape or a space
/// whole in its error. In a conninfo string, an unquoted value ends at the first space, so the rest of a password
/// holding spaces becomes the next keyword, quoted in libpq's error. Each of these is rejected here, before
/// libpq parses the text, with a message that quotes none of it.
extension PGConfiguration {
    /// libpq's URL prefixes (matched as libpq does, case-sensitively).
    static let urlPrefixes = ["postgresql://", "postgres://"]

    /// How to write special characters in a URL's password, for the messages below.
    static let percentEncodingAdvice =
        "percent-encode special characters in the user name and password: '@' as %40, '/' as %2F, ':' as %3A, "
        + "'%' as %25, a space as %20 (for example postgres://app:p%40ss%2Fword@db:5432/app for the password "
        + "p@ss/word)"

    /// Throws ``PGError/Kind/invalidConfiguration`` when the password of `conninfo` (a URL or keyword
    /// conninfo) is written so that libpq would split it or quote it; the message names the problem, never
    /// the text.
    static func checkPasswordSyntax(_ conninfo: String) throws {
        if let prefix = self.urlPrefixes.first(where: { conninfo.hasPrefix($0) }) {
            try self.checkURL(conninfo.dropFirst(prefix.count))
        } else {
            try self.checkKeywordConninfo(conninfo)
        }
    }

    /// `rest`: the URL after its `postgres://` prefix.
    private static func checkURL(_ rest: Substring) throws {
        // Up to the query: user information, hosts and ports, database.
        let hierarchy = rest.prefix { $0 != "?" }
        if let lastAt = hierarchy.lastIndex(of: "@") {
            let userInfo = hierarchy[..<lastAt]
            if userInfo.contains("@") || userInfo.contains("/") {
                throw self.malformedURL(
                    "more than one '@', or a '/' before the last '@': the password (or user name) holds an unencoded "
                        + "'@' or '/', so the host, port and database cannot be told apart")
            }
            if userInfo.contains(where: \.isWhitespace) {
                throw self.malformedURL("the user name or password holds a space")
            }
            if !self.isValidPercentEncoding(userInfo) {
                throw self.malformedURL("the user name or password holds a '%' that is not followed by two hexadecimal digits, or %00")
            }
        }
        // Query parameters holding a secret (`password`, `sslpassword`).
        guard let query = rest.firstIndex(of: "?") else { return }
        for parameter in rest[rest.index(after: query)...].split(separator: "&") {
            let name = parameter.prefix { $0 != "=" }
            guard self.isSecret(String(name)), name.endIndex < parameter.endIndex else { continue }
            let value = parameter[parameter.index(after: name.endIndex)...]
            if value.contains(where: \.isWhitespace) || value.contains("=") || !self.isValidPercentEncoding(value) {
                throw self.malformedURL(
                    "the value of query parameter \(name) holds a space, a '=', a '&' or a bad '%' escape (encode them "
                        + "as %20, %3D, %26 and %25)")
            }
        }
    }

    private static func malformedURL(_ problem: String) -> PGError {
        PGError(kind: .invalidConfiguration, message: "malformed PostgreSQL URL: \(problem); \(self.percentEncodingAdvice)")
    }

    /// Whether every `%` is followed by two hexadecimal digits that are not `00` (libpq's rule).
    static func isValidPercentEncoding(_ text: Substring) -> Bool {
        var index = text.startIndex
        while let percent = text[index...].firstIndex(of: "%") {
            let digits = text[text.index(after: percent)...].prefix(2)
            guard digits.count == 2, digits.allSatisfy(\.isHexDigit), digits != "00" else { return false }
            index = digits.endIndex
        }
        return true
    }

    /// A keyword conninfo string: an unquoted password must be followed by nothing or by another
    /// `keyword=value` pair whose keyword libpq knows.
    private static func checkKeywordConninfo(_ conninfo: String) throws {
        let (pairs, complete) = self.keywordPairs(conninfo)
        for (index, pair) in pairs.enumerated() where self.isSecret(pair.keyword) && !pair.quoted {
            let next = index + 1
            let runsOn = next < pairs.count ? !self.libpqKeywords.contains(pairs[next].keyword) : !complete
            if runsOn {
                throw PGError(
                    kind: .invalidConfiguration,
                    message: "malformed connection string: the unquoted value of \(pair.keyword) is followed by words that "
                        + "are not a keyword=value pair, so the password likely holds a space; quote it: "
                        + "\(pair.keyword)='…' (write a quote as \\' and a backslash as \\\\)")
            }
        }
    }

    /// One `keyword = value` of a conninfo string.
    struct KeywordPair {
        var keyword: String
        var quoted: Bool
    }

    /// Splits a keyword conninfo string into its pairs as libpq's parser does (values are not kept); `complete`
    /// is false when the text ends in something that is not a pair (a word with no `=`, an open quote).
    static func keywordPairs(_ conninfo: String) -> (pairs: [KeywordPair], complete: Bool) {
        var pairs: [KeywordPair] = []
        var rest = conninfo[...]
        while true {
            rest = rest.drop(while: \.isWhitespace)
            guard !rest.isEmpty else { return (pairs, true) }
            let keyword = rest.prefix { $0 != "=" && !$0.isWhitespace }
            rest = rest[keyword.endIndex...].drop(while: \.isWhitespace)
            guard rest.first == "=" else { return (pairs, false) }
            rest = rest.dropFirst().drop(while: \.isWhitespace)
            var quoted = false
            if rest.first == "'" {
                quoted = true
                rest = rest.dropFirst()
                var closed = false
                while let character = rest.popFirst() {
                    if character == "\\" {
                        _ = rest.popFirst()
                    } else if character == "'" {
                        closed = true
                        break
                    }
                }
                guard closed else { return (pairs, false) }
            } else {
                while let character = rest.first, !character.isWhitespace {
                    rest = rest.dropFirst()
                    if character == "\\" { _ = rest.popFirst() }
                }
            }
            pairs.append(KeywordPair(keyword: String(keyword), quoted: quoted))
        }
    }
}
