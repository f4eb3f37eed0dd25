import Foundation
import Logging
import SkyrosPostgres
import SkyrosStore

/// A group planned and built as one pipeline ahead, while the group before it was on the server.
struct PlannedGroup: Sendable {
    let plan: GroupPlan
    let pipeline: PreparedGroup
}

/// Commits one group of queued change sets through the store, retrying transient failures with backoff and
/// never applying a set twice: after an attempt whose outcome is unknown, the commit log says which sets of it
/// committed. The decisions are ``CommitRetryStateMachine``'s; this type runs them.
struct GroupCommitter: Sendable {
    let store: any GroupCommitStore
    let builder: ChangeSetBuilder
    let state: Locked<StackState>
    let policy: RetryPolicy
    let metrics: CommitQueueMetrics
    let logger: Logger
    /// The retries of every group of the queue, logged at `warning` (rate-limited) with one `notice` when a
    /// group commits again: an outage spanning several groups is one story.
    let outage: OutageLog

    /// Commits `batch`. When a deferred constraint fails the group's commit, its sets are committed again one
    /// by one, in order, so that only the sets that break the constraint fail (``GroupCommitStore/failedAtCommit(_:)``).
    /// - Returns: one outcome per commit, in order (a group committed whole by one pipeline is mapped to them
    ///   when settled). `prepared`: the group built ahead, sent on the first attempt. `prior`: the outcomes of
    ///   the sets queued before `batch` that are not settled yet (a set may need a version one of them wrote).
    func commit(_ batch: [QueuedCommit], prepared: PlannedGroup? = nil, prior: [PriorOutcome] = []) async -> GroupOutcome {
        var outcomes = [Result<ChangeSetResult, any Error>?](repeating: nil, count: batch.count)
        let started = ContinuousClock.now
        var retries = CommitRetryStateMachine(policy: self.policy)
        while true {
            var remaining = outcomes.indices.filter { outcomes[$0] == nil }
            do {
                let next = retries.next
                if next == .checkLog {
                    let committed = try await self.store.committedIDs(remaining.map { batch[$0].commitID }, since: batch[0].commitID)
                    for index in remaining where committed.contains(batch[index].commitID) {
                        outcomes[index] = .success(.committedUnseen)
                    }
                    remaining = remaining.filter { outcomes[$0] == nil }
                    retries.logChecked()
                }
                if remaining.isEmpty { break }
                let outcome = try await self.attempt(
                    remaining.map { batch[$0] }, prepared: next == .send(usePrepared: true) ? prepared : nil, prior: prior)
                self.outage.recovered()
                if remaining.count == batch.count { return outcome }
                for (index, result) in zip(remaining, outcome.results) { outcomes[index] = result }
                break
            } catch {
                let abandoned = self.state.withLock { $0.queue.abandoned }
                let failure = CommitRetryStateMachine.Failure(
                    failedAtCommit: self.store.failedAtCommit(error), transient: Self.isTransient(error),
                    mayHaveCommitted: Self.mayHaveCommitted(error))
                switch retries.failed(failure, remaining: remaining.count, abandoned: abandoned, elapsed: ContinuousClock.now - started) {
                case .commitOneByOne:
                    self.logger.info(
                        "a deferred constraint failed the group's commit; committing its sets one by one",
                        metadata: ["skyros.stack.sets": "\(remaining.count)", "skyros.error": "\(error)"])
                    for index in remaining {
                        let earlier = prior + zip(batch[..<index], outcomes[..<index]).compactMap { commit, outcome in
                            outcome.map { PriorOutcome(commit: commit.id, result: $0) }
                        }
                        outcomes[index] = await self.commit([batch[index]], prior: earlier).results[0]
                    }
                case .giveUp(let askLogFirst):
                    let failure =
                        askLogFirst ? await self.settleAbandonedAttempt(batch, remaining: remaining, error: error, into: &outcomes) : error
                    for index in remaining where outcomes[index] == nil { outcomes[index] = .failure(failure) }
                case .retry(let delay, let attempt):
                    self.metrics.retries.increment()
                    self.outage.failed(
                        error, retryIn: delay,
                        metadata: ["skyros.stack.sets": "\(remaining.count)", "skyros.stack.attempt": "\(attempt)"])
                    try? await Task.sleep(for: delay)
                    continue
                }
                break
            }
        }
        return .results(outcomes.map { $0 ?? .failure(DataStackError(code: .commitFailed, message: "the write was not committed")) })
    }

    /// Before the sets of a group are given up (its retries ran out, or a shutdown deadline abandoned it) after
    /// an attempt that may have committed (the connection broke, perhaps after `COMMIT` was sent; see
    /// ``mayHaveCommitted(_:)``): the commit log is asked once which of them did; those succeed. When the log
    /// cannot be read either, the others fail with ``DataStackError/Code/commitOutcomeUnknown`` (not the plain
    /// error, which would claim they were not committed).
    /// - Returns: the error for the sets that did not commit.
    private func settleAbandonedAttempt(
        _ batch: [QueuedCommit], remaining: [Int], error: any Error, into outcomes: inout [Result<ChangeSetResult, any Error>?]
    ) async -> any Error {
        do {
            let committed = try await self.store.committedIDs(remaining.map { batch[$0].commitID }, since: batch[0].commitID)
            for index in remaining where committed.contains(batch[index].commitID) {
                outcomes[index] = .success(.committedUnseen)
            }
            return error
        } catch {
            return DataStackError(
                code: .commitOutcomeUnknown,
                message: "the connection was lost while this write was being committed, and the commit log could not be read "
                    + "before retrying stopped: look up its commit id in skyros_commit_groups",
                underlying: error)
        }
    }

    /// One attempt: the store commits the group (PostgreSQL: one transaction, with a savepoint per set unless it
    /// goes as one pipeline; memory: set by set). `earlier`: the outcomes of unsettled sets queued before these,
    /// which a set's versions may come from.
    private func attempt(_ commits: [QueuedCommit], prepared: PlannedGroup?, prior earlier: [PriorOutcome]) async throws -> GroupOutcome {
        // A group planned ahead is planned whole: it needed no settled version, nor any outcome of a set before it.
        let plan = prepared?.plan ?? self.builder.plan(commits, earlier: earlier) { key, commit in
            self.state.withLock { $0.view.settled.version(of: key, writtenBy: commit) }
        }
        // Only a plan made ahead (no settled versions to read) can be missing.
        guard let plan else {
            throw DataStackError(code: .commitFailed, message: "internal: the group could not be planned with the settled versions")
        }
        let hook = self.state.withLock { $0.hook }
        if let hook {
            var tables: Set<String> = []
            var last = ""
            for commit in commits {
                for slot in commit.slots where slot.table != last {
                    last = slot.table
                    tables.insert(last)
                }
            }
            let unprepared = hook.tablesNeedingPreparation(tables)
            if !unprepared.isEmpty { try await hook.prepare(tables: unprepared) }
        }
        return try await self.store.commitGroup(plan, hook: hook, prepared: prepared?.pipeline)
    }

    /// Whether a failed attempt may have committed all the same: the connection broke (or the server shut
    /// down) while it ran, perhaps after `COMMIT` reached the server. Not a lease that timed out or a connection
    /// that never opened (nothing was sent), nor a deadlock or serialization failure (rolled back).
    static func mayHaveCommitted(_ error: any Error) -> Bool {
        guard let error = error as? PGError else { return false }
        switch error.kind {
        case .connectionLost, .connectionClosed: return true
        case .poolTimeout, .connectionFailed, .serializationFailure, .deadlock: return false
        default:
            return error.sqlState ~= .connectionException || error.sqlState == .adminShutdown || error.sqlState == .crashShutdown
        }
    }

    static func isTransient(_ error: any Error) -> Bool {
        guard let error = error as? PGError else { return false }
        return error.isTransient || error.kind == .connectionClosed || error.kind == .connectionFailed
    }
}
