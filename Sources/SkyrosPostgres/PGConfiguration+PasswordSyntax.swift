/// Rejects a URL or conninfo string in which libpq would not find the password where its writer meant it.
///
/// libpq ends a URL's user information at its first `@` (or sees none when a `/` comes first), so a password
/// holding an unencoded `@` or `/` is split: its tail becomes the host, the port or the database, and shows in
/// every message that names them. libpq's URL decoder also quotes a component with a bad `%` escape whole in its
/// error. In a conninfo string, an unquoted value ends at the first space, so the rest of a password holding
/// spaces becomes the next keyword, quoted in libpq's error. Each of these is rejected here, before libpq parses
/// the text, with a message that quotes none of the text and names where the user information or the
/// password's value starts: a position inside the password would tell where its space, `@` or `%` is.
extension PGConfiguration {
    /// libpq's URL prefixes (matched as libpq does, case-sensitively).
    static let urlPrefixes = ["postgresql://", "postgres://"]

    /// How to write special characters in a URL's password, for the messages below.
    static let percentEncodingAdvice =
        "percent-encode special characters in the user name and password: '@' as %40, '/' as %2F, ':' as %3A, "
        + "'%' as %25, a space as %20 (for example postgres://app:p%40ss%2Fword@db:5432/app for the password "
        + "p@ss/word)"

    /// Throws ``PGError/Kind/invalidConfiguration`` when the password of a URL is written so that libpq would
    /// split it or quote it. `text`: the URL's Unicode scalars; `start`: the index after its `postgres://` prefix.
    static func checkURLPassword(_ text: [Unicode.Scalar], from start: Int) throws {
        // Up to the query: user information, hosts and ports, database.
        let hierarchyEnd = text[start...].firstIndex(of: "?") ?? text.count
        if let lastAt = text[start..<hierarchyEnd].lastIndex(of: "@") {
            let userInfo = start..<lastAt
            if text[userInfo].contains(where: { $0 == "@" || $0 == "/" }) {
                throw self.malformedPassword(
                    at: start,
                    "more than one '@', or a '/' before the last '@': the password (or user name) that starts here holds "
                        + "an unencoded '@' or '/', so the host, port and database cannot be told apart")
            }
            if text[userInfo].contains(where: \.properties.isWhitespace) {
                throw self.malformedPassword(at: start, "the user name or password that starts here holds a space")
            }
            if self.badPercentEscape(in: text, userInfo) != nil {
                throw self.malformedPassword(
                    at: start,
                    "the user name or password that starts here holds a '%' that is not followed by two hexadecimal "
                        + "digits, or %00")
            }
        }
        // Query parameters holding a secret (`password`, `sslpassword`).
        guard hierarchyEnd < text.count else { return }
        var parameterStart = hierarchyEnd + 1
        while parameterStart <= text.count {
            let parameterEnd = text[parameterStart...].firstIndex(of: "&") ?? text.count
            let parameter = parameterStart..<parameterEnd
            parameterStart = parameterEnd + 1
            guard let equals = text[parameter].firstIndex(of: "=") else { continue }
            let name = self.string(text[parameter.lowerBound..<equals])
            guard self.isSecret(name) else { continue }
            let value = (equals + 1)..<parameter.upperBound
            if text[value].contains(where: { $0.properties.isWhitespace || $0 == "=" })
                || self.badPercentEscape(in: text, value) != nil
            {
                // The name is quoted only when it is libpq's: any other text may be part of the password.
                let named = self.libpqKeywords.contains(name) ? "query parameter \(name)" : "a query parameter naming a password"
                throw self.malformedPassword(
                    at: value.lowerBound,
                    "the value of \(named) that starts here holds a space, a '=', a '&' or a bad '%' escape (encode "
                        + "them as %20, %3D, %26 and %25)")
            }
        }
    }

    /// The error for a URL's password that libpq would split or quote: where (`index`, 0-based), what, and how
    /// to write it.
    private static func malformedPassword(at index: Int, _ problem: String) -> PGError {
        self.syntaxError(.url, at: index + 1, "\(problem); \(self.percentEncodingAdvice)")
    }

    /// The index of the first `%` in `range` of `text` that is not followed by two hexadecimal digits, or is
    /// followed by `00` (libpq's rule); `nil` when there is none.
    static func badPercentEscape(in text: [Unicode.Scalar], _ range: Range<Int>) -> Int? {
        var index = range.lowerBound
        while index < range.upperBound {
            if text[index] == "%" {
                guard index + 2 < range.upperBound, text[index + 1].properties.isASCIIHexDigit,
                    text[index + 2].properties.isASCIIHexDigit, !(text[index + 1] == "0" && text[index + 2] == "0")
                else { return index }
                index += 3
            } else {
                index += 1
            }
        }
        return nil
    }

    /// A keyword conninfo string: an unquoted password must be followed by nothing or by another
    /// `keyword=value` pair whose keyword libpq knows.
    static func checkKeywordPassword(_ syntax: KeywordSyntax) throws {
        for (index, pair) in syntax.pairs.enumerated() where self.isSecret(pair.keyword) && !pair.quoted {
            let next = index + 1
            let runsOn =
                next < syntax.pairs.count ? !self.libpqKeywords.contains(syntax.pairs[next].keyword) : syntax.failure != nil
            guard runsOn else { continue }
            let keyword = self.libpqKeywords.contains(pair.keyword) ? pair.keyword : "password"
            throw self.syntaxError(
                .conninfo, at: pair.valueStart + 1,
                "the unquoted value of \(keyword) that starts here is followed by words that are not a keyword=value "
                    + "pair, so the password likely holds a space; quote it: \(keyword)='…' (write a quote as \\' and a "
                    + "backslash as \\\\)")
        }
    }
}
