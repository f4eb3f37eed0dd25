import SkyrosPostgres
import SkyrosStore
import Tracing

/// The caller's trace, kept with a queued change set so that the group commit that writes it — on the
/// drain's task, not the caller's — is a span under the caller's span.
///
/// Captured only when the writing task is traced (``ServiceContext/current`` is set), together with the
/// tracer active there (a task-local one from `withTracer`, or the bootstrapped one).
struct CommitTrace: Sendable {
    let context: ServiceContext
    let tracer: any Tracer

    /// The current task's trace; `nil` (one task-local read) when it has none.
    static var current: CommitTrace? {
        guard let context = ServiceContext.current else { return nil }
        return CommitTrace(context: context, tracer: InstrumentationSystem.tracer)
    }

    /// Runs `commit` for `batch` inside a `skyros.commit` span parented under the first traced set's caller,
    /// linked to every other traced caller in the group; the statements it sends are that span's children.
    /// Without a traced set, runs `commit` as is (no span).
    static func traced(
        _ batch: [QueuedCommit], _ commit: () async -> GroupOutcome
    ) async -> GroupOutcome {
        guard let first = batch.firstIndex(where: { $0.trace != nil }), let trace = batch[first].trace else {
            return await commit()
        }
        let span = trace.tracer.startSpan("skyros.commit", context: trace.context, ofKind: .client)
        defer { span.end() }
        if span.isRecording {
            span.updateAttributes { attributes in
                StatementSpanTarget.setDatabase(&attributes, operation: "COMMIT", namespace: nil)
                attributes["skyros.commit.sets"] = batch.count
                attributes["skyros.commit.rows"] = batch.reduce(0) { $0 + $1.slots.count }
            }
            for commit in batch[(first + 1)...] {
                if let other = commit.trace { span.addLink(SpanLink(context: other.context, attributes: [:])) }
            }
        }
        let outcome = await withTracer(trace.tracer) {
            await ServiceContext.withValue(span.context) { await commit() }
        }
        guard span.isRecording else { return outcome }
        let failures = outcome.results.count { if case .failure = $0 { true } else { false } }
        if failures > 0 {
            span.setStatus(SpanStatus(code: .error))
            span.attributes["skyros.commit.failed_sets"] = failures
        }
        return outcome
    }
}
