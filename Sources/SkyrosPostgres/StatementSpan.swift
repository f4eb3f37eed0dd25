import Tracing

/// Client spans for statements, named and attributed as OpenTelemetry's database conventions ask
/// (`db.system.name`, `db.namespace`, `db.operation.name`, `db.query.text`, `server.address`, …).
///
/// A span starts only under a caller's span (``ServiceContext/current`` is set, e.g. by a traced HTTP
/// request): work no caller traces — the change feed, an untraced write — adds none, and an untraced statement
/// costs one task-local read. The text recorded is the statement's SQL, whose values are always bound
/// parameters: no value ever reaches a span.
package struct StatementSpanTarget: Sendable {
    package let namespace: String?
    let address: String?
    let port: Int

    package init(_ configuration: PGConfiguration) {
        self.namespace = configuration.database ?? configuration.user
        // A socket directory is not a server address.
        self.address = configuration.host.flatMap { $0.hasPrefix("/") ? nil : $0.split(separator: ",").first.map(String.init) }
        self.port = configuration.port ?? 5432
    }

    /// Starts a span for `sql` when the current task is traced; `nil` otherwise.
    /// - Parameters:
    ///   - operation: `db.operation.name`; derived from the statement's first keyword when `nil`.
    ///   - text: whether `db.query.text` is recorded (not for scripts, which may carry literals).
    ///   - batch: `db.operation.batch.size` for a pipeline.
    /// `sql` and `operation` are evaluated only when a span starts (a pipeline's text is built from all its
    /// statements).
    package func start(
        sql makeSQL: @autoclosure () -> String, operation makeOperation: @autoclosure () -> String? = nil, text: Bool = true,
        batch: Int? = nil
    ) -> (any Span)? {
        guard let parent = ServiceContext.current else { return nil }
        let sql = makeSQL()
        let operation = makeOperation() ?? Self.operationName(of: sql)
        let span = InstrumentationSystem.tracer.startSpan(
            self.namespace.map { "\(operation) \($0)" } ?? operation, context: parent, ofKind: .client)
        guard span.isRecording else { return span }
        span.updateAttributes { attributes in
            Self.setDatabase(&attributes, operation: operation, namespace: self.namespace)
            if text { attributes["db.query.text"] = sql }
            if let batch { attributes["db.operation.batch.size"] = batch }
            if let address = self.address {
                attributes["server.address"] = address
                attributes["server.port"] = self.port
            }
        }
        return span
    }

    /// Runs `body` inside a statement span when the current task is traced (``start(sql:operation:text:batch:)``),
    /// marking the span failed when `body` throws; without a trace, runs `body` as is. Stays on the caller's
    /// executor (a connection's thread).
    package func trace<R>(
        sql: @autoclosure () -> String, operation: @autoclosure () -> String? = nil, text: Bool = true, batch: Int? = nil,
        isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> R
    ) async throws -> R {
        guard let span = self.start(sql: sql(), operation: operation(), text: text, batch: batch) else {
            return try await body()
        }
        defer { span.end() }
        do {
            return try await body()
        } catch {
            Self.record(error, on: span)
            throw error
        }
    }

    /// The attributes every Skyros database span carries: the system, the operation and, when known, the
    /// database (`db.namespace`).
    package static func setDatabase(_ attributes: inout SpanAttributes, operation: String, namespace: String?) {
        attributes["db.system"] = "postgresql"
        attributes["db.system.name"] = "postgresql"
        attributes["db.operation.name"] = operation
        if let namespace { attributes["db.namespace"] = namespace }
    }

    /// Marks `span` failed with `error`; a server error's SQLSTATE becomes `db.response.status_code`.
    package static func record(_ error: any Error, on span: any Span) {
        span.recordError(error)
        span.setStatus(SpanStatus(code: .error))
        guard span.isRecording else { return }
        if let error = error as? PGError {
            let code = error.sqlState?.rawValue
            span.updateAttributes { attributes in
                if let code { attributes["db.response.status_code"] = code }
                attributes["error.type"] = code ?? error.kind.description
            }
        } else {
            span.attributes["error.type"] = "\(type(of: error))"
        }
    }

    /// The statement's first keyword, upper-cased (`SELECT`, `INSERT`, `WITH`, …), skipping leading
    /// whitespace and comments; `"QUERY"` when there is none.
    package static func operationName(of sql: String) -> String {
        var utf8 = Substring(sql).utf8[...]
        while true {
            while let first = utf8.first, first == 0x20 || first == 0x0A || first == 0x09 || first == 0x0D || first == 0x28 {
                utf8 = utf8.dropFirst()
            }
            if utf8.starts(with: "--".utf8) {
                utf8 = utf8.drop { $0 != 0x0A }
            } else if utf8.starts(with: "/*".utf8), let end = utf8.firstRange(of: "*/".utf8) {
                utf8 = utf8[end.upperBound...]
            } else {
                break
            }
        }
        let word = utf8.prefix { ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) }
        return word.isEmpty ? "QUERY" : String(Substring(word)).uppercased()
    }
}

/// Runs `body` with no current trace. Background work started from a traced task (the commit queue's drain,
/// the change feed started during a traced start-up) inherits that task's task-locals; without this its
/// statements would show up under a span that ended long before.
package func untraced(_ body: () async -> Void) async {
    await ServiceContext.withValue(nil) { await body() }
}
