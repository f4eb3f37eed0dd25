/// One statement of a migration section, as found by ``SQLScript``.
struct SQLStatement: Sendable, Hashable {
    /// The statement text, from its first token to (excluding) its terminating `;`.
    var text: String
    /// The 1-based line in the file where ``text`` starts.
    var line: Int
    /// The bare words of the statement outside comments, literals and quoted identifiers, upper-cased.
    var words: [String]

    /// The 1-based file line of a 1-based character `position` in ``text`` (as reported by the server).
    func line(ofPosition position: Int) -> Int {
        var line = self.line
        var remaining = position - 1
        for scalar in self.text.unicodeScalars {
            if remaining <= 0 { break }
            if scalar == "\n" { line += 1 }
            remaining -= 1
        }
        return line
    }
}

/// Splits SQL text into statements the way the server's lexer would: `;` ends a statement except inside
/// `--` and nested `/* */` comments, `'…'`/`E'…'` literals, `"…"` identifiers, `$tag$…$tag$` bodies and
/// SQL-standard `BEGIN ATOMIC … END` function bodies.
enum SQLScript {
    /// The statements of `sql`, whose first line is line `firstLine` of its file. Empty statements are dropped.
    static func statements(in sql: String, firstLine: Int) -> [SQLStatement] {
        let scalars = Array(sql.unicodeScalars)
        var statements: [SQLStatement] = []
        var line = firstLine
        var i = 0
        var start: Int?  // index of the statement's first token
        var startLine = firstLine
        var words: [String] = []
        var atomicDepth = 0
        var parenthesisDepth = 0

        func finish(at end: Int) {
            if let begin = start {
                var text = String(String.UnicodeScalarView(scalars[begin..<end]))
                while let last = text.unicodeScalars.last, last.properties.isWhitespace {
                    text.unicodeScalars.removeLast()
                }
                statements.append(SQLStatement(text: text, line: startLine, words: words))
            }
            start = nil
            words = []
            atomicDepth = 0
            parenthesisDepth = 0
        }
        func markStart() {
            if start == nil {
                start = i
                startLine = line
            }
        }
        func isWordStart(_ c: Unicode.Scalar) -> Bool { c == "_" || c.properties.isAlphabetic }
        func isWordPart(_ c: Unicode.Scalar) -> Bool {
            c == "_" || c == "$" || c.properties.isAlphabetic || ("0"..."9").contains(c)
        }
        /// Advances past a quoted run closed by `quote`, counting lines; `backslash` enables `\'` escapes.
        func skipQuoted(_ quote: Unicode.Scalar, backslash: Bool) {
            i += 1
            while i < scalars.count {
                let c = scalars[i]
                if c == "\n" { line += 1 }
                if backslash && c == "\\" {
                    i += 2
                    if i - 1 < scalars.count, scalars[i - 1] == "\n" { line += 1 }
                    continue
                }
                if c == quote {
                    if i + 1 < scalars.count, scalars[i + 1] == quote {
                        i += 2
                        continue
                    }
                    i += 1
                    return
                }
                i += 1
            }
        }

        while i < scalars.count {
            let c = scalars[i]
            let next: Unicode.Scalar? = i + 1 < scalars.count ? scalars[i + 1] : nil
            if c == "\n" {
                line += 1
                i += 1
                continue
            }
            if c.properties.isWhitespace {
                i += 1
                continue
            }
            if c == "-", next == "-" {
                while i < scalars.count, scalars[i] != "\n" { i += 1 }
                continue
            }
            if c == "/", next == "*" {
                var depth = 0
                while i < scalars.count {
                    if scalars[i] == "/", i + 1 < scalars.count, scalars[i + 1] == "*" {
                        depth += 1
                        i += 2
                    } else if scalars[i] == "*", i + 1 < scalars.count, scalars[i + 1] == "/" {
                        depth -= 1
                        i += 2
                        if depth == 0 { break }
                    } else {
                        if scalars[i] == "\n" { line += 1 }
                        i += 1
                    }
                }
                continue
            }
            if c == ";" {
                // Inside parentheses (a rule's action list: `DO ALSO (INSERT …; INSERT …)`) or a BEGIN ATOMIC body,
                // as psql does: the statement goes on.
                if atomicDepth > 0 || parenthesisDepth > 0 {
                    i += 1
                    continue
                }
                finish(at: i)
                i += 1
                continue
            }
            markStart()
            if c == "'" {
                let escaped = i > 0 && (scalars[i - 1] == "E" || scalars[i - 1] == "e")
                    && (i < 2 || !isWordPart(scalars[i - 2]))
                skipQuoted("'", backslash: escaped)
                continue
            }
            if c == "\"" {
                skipQuoted("\"", backslash: false)
                continue
            }
            if c == "$", let tag = dollarTag(scalars, at: i) {
                i += tag.count
                while i < scalars.count {
                    if scalars[i] == "$", scalars[i..<min(i + tag.count, scalars.count)].elementsEqual(tag) {
                        i += tag.count
                        break
                    }
                    if scalars[i] == "\n" { line += 1 }
                    i += 1
                }
                continue
            }
            if c == "(" {
                parenthesisDepth += 1
            } else if c == ")", parenthesisDepth > 0 {
                parenthesisDepth -= 1
            }
            if isWordStart(c) {
                var j = i
                while j < scalars.count, isWordPart(scalars[j]) { j += 1 }
                let word = String(String.UnicodeScalarView(scalars[i..<j])).uppercased()
                if word == "ATOMIC", words.last == "BEGIN", words.first == "CREATE" {
                    atomicDepth += 1
                } else if atomicDepth > 0, word == "CASE" {
                    atomicDepth += 1
                } else if atomicDepth > 0, word == "END" {
                    atomicDepth -= 1
                }
                words.append(word)
                i = j
                continue
            }
            i += 1
        }
        finish(at: scalars.count)
        return statements
    }

    /// The `$tag$` opening a dollar-quoted string at `index`, or `nil` (for example for `$1`).
    private static func dollarTag(_ scalars: [Unicode.Scalar], at index: Int) -> [Unicode.Scalar]? {
        var j = index + 1
        if j < scalars.count, ("0"..."9").contains(scalars[j]) { return nil }
        while j < scalars.count {
            let c = scalars[j]
            if c == "$" { return Array(scalars[index...j]) }
            guard c == "_" || c.properties.isAlphabetic || ("0"..."9").contains(c) else { return nil }
            j += 1
        }
        return nil
    }
}

/// Statements that PostgreSQL refuses inside a transaction block, or that would break the migrator's own
/// transaction.
enum NonTransactionalStatement {
    /// Why `statement` cannot run inside a transactional migration on a server of version
    /// `serverVersion` (`server_version_num`), or `nil` when it can.
    static func reason(for statement: SQLStatement, serverVersion: Int) -> String? {
        let w = statement.words
        guard let first = w.first else { return nil }
        func at(_ index: Int) -> String? { index < w.count ? w[index] : nil }
        switch first {
        case "VACUUM":
            return "VACUUM cannot run inside a transaction"
        case "CREATE":
            var index = 1
            if at(index) == "UNIQUE" { index += 1 }
            if at(index) == "INDEX", at(index + 1) == "CONCURRENTLY" {
                return "CREATE INDEX CONCURRENTLY cannot run inside a transaction"
            }
            if at(1) == "DATABASE" { return "CREATE DATABASE cannot run inside a transaction" }
            if at(1) == "TABLESPACE" { return "CREATE TABLESPACE cannot run inside a transaction" }
            if at(1) == "SUBSCRIPTION" { return "CREATE SUBSCRIPTION cannot run inside a transaction" }
        case "DROP":
            if at(1) == "INDEX", at(2) == "CONCURRENTLY" {
                return "DROP INDEX CONCURRENTLY cannot run inside a transaction"
            }
            if at(1) == "DATABASE" { return "DROP DATABASE cannot run inside a transaction" }
            if at(1) == "TABLESPACE" { return "DROP TABLESPACE cannot run inside a transaction" }
            if at(1) == "SUBSCRIPTION" { return "DROP SUBSCRIPTION cannot run inside a transaction" }
        case "REINDEX":
            if w.contains("CONCURRENTLY") { return "REINDEX … CONCURRENTLY cannot run inside a transaction" }
            if at(1) == "SYSTEM" || at(1) == "DATABASE" {
                return "REINDEX \(at(1)!) cannot run inside a transaction"
            }
        case "ALTER":
            if at(1) == "SYSTEM" { return "ALTER SYSTEM cannot run inside a transaction" }
            if at(1) == "TABLE", w.contains("DETACH"), w.contains("CONCURRENTLY") {
                return "ALTER TABLE … DETACH PARTITION … CONCURRENTLY cannot run inside a transaction"
            }
            if at(1) == "TYPE", w.contains("ADD"), w.contains("VALUE"), serverVersion < 120000 {
                return "ALTER TYPE … ADD VALUE cannot run inside a transaction before PostgreSQL 12"
            }
        case "BEGIN", "START", "COMMIT", "END", "ABORT":
            return "\(first) would end the migrator's transaction (the migration and its history row must commit "
                + "together)"
        case "ROLLBACK":
            if at(1) != "TO" && !(at(1) == "TRANSACTION" && at(2) == "TO") && !(at(1) == "WORK" && at(2) == "TO")
                && at(1) != "PREPARED"
            {
                return "ROLLBACK would end the migrator's transaction"
            }
        default:
            break
        }
        return nil
    }
}
