import SkyrosPostgres
import Tracing

extension SchemaMigrator {
    /// Runs one migration inside a `skyros.migration` span (under the caller's span, if any; a root span
    /// otherwise, since a deploy's migrations are worth seeing on their own). Its statements are child spans.
    static func traced(
        _ migration: SchemaMigration, direction: MigrationDirection, on connection: PGConnection,
        _ run: () async throws -> Duration
    ) async throws -> Duration {
        let span = InstrumentationSystem.tracer.startSpan(
            "skyros.migration \(migration.version)", context: ServiceContext.current ?? .topLevel, ofKind: .client)
        defer { span.end() }
        if span.isRecording {
            span.updateAttributes { attributes in
                StatementSpanTarget.setDatabase(&attributes, operation: "MIGRATE", namespace: connection.spanTarget.namespace)
                attributes["skyros.migration.version"] = Int(migration.version)
                attributes["skyros.migration.file"] = migration.fileName
                attributes["skyros.migration.direction"] = direction.rawValue
            }
        }
        do {
            return try await ServiceContext.withValue(span.context) { try await run() }
        } catch {
            StatementSpanTarget.record(error, on: span)
            throw error
        }
    }
}
