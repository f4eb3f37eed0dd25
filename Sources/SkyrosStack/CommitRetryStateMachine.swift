import SkyrosPostgres

/// The attempts at committing one group, as a value: when to read the commit log, when to retry and after
/// how long, when to commit the sets one by one, and when to give up.
///
/// Driven by ``GroupCommitter``, which classifies each failure (``Failure``) and runs the action returned.
/// Time enters only as the `elapsed` argument, so transitions are tested without a clock or a server.
///
/// The delays and the time a group keeps retrying (its `RetryPolicy.budget`) are the policy's.
package struct CommitRetryStateMachine: Sendable {
    /// What a failed attempt's error means for the group.
    package struct Failure: Sendable, Equatable {
        /// A deferred constraint failed the group's `COMMIT` (not one set's statement).
        package var failedAtCommit = false
        /// Worth retrying: connection lost, server restart, serialization failure, deadlock.
        package var transient = false
        /// The attempt may have committed all the same (the connection broke, perhaps after `COMMIT`).
        package var mayHaveCommitted = false

        package init(failedAtCommit: Bool = false, transient: Bool = false, mayHaveCommitted: Bool = false) {
            (self.failedAtCommit, self.transient, self.mayHaveCommitted) = (failedAtCommit, transient, mayHaveCommitted)
        }
    }

    package enum Next: Equatable, Sendable {
        /// Read the commit log first: an earlier attempt may have committed some of the sets.
        case checkLog
        /// Send the sets not known to be done; `usePrepared`: the first attempt sends the group built ahead.
        case send(usePrepared: Bool)
    }

    package enum Action: Equatable, Sendable {
        /// Commit the remaining sets one by one, in order: only those that break the constraint fail.
        case commitOneByOne
        /// Wait `delay`, then try again (this is attempt number `attempt`).
        case retry(after: Duration, attempt: Int)
        /// Stop: the remaining sets fail. `askLogFirst`: an attempt may have committed, so the commit log is
        /// asked once which did (when it cannot be read, the outcome is reported unknown).
        case giveUp(askLogFirst: Bool)
    }

    package let policy: RetryPolicy
    private(set) package var attempt = 0
    private var mustCheckLog = false
    /// An attempt failed in a way that may have committed it, and no read of the commit log since said which
    /// of its sets did.
    private var outcomeUnresolved = false

    package init(policy: RetryPolicy) {
        self.policy = policy
    }

    package var next: Next { self.mustCheckLog ? .checkLog : .send(usePrepared: self.attempt == 0) }

    /// The commit log said which sets committed.
    package mutating func logChecked() {
        self.mustCheckLog = false
        self.outcomeUnresolved = false
    }

    /// An attempt failed. `remaining`: sets not known to be done; `abandoned`: a shutdown's deadline passed;
    /// `elapsed`: since the group's first attempt.
    package mutating func failed(_ failure: Failure, remaining: Int, abandoned: Bool, elapsed: Duration) -> Action {
        if remaining > 1, !abandoned, failure.failedAtCommit { return .commitOneByOne }
        if failure.mayHaveCommitted { self.outcomeUnresolved = true }
        guard failure.transient, !abandoned, self.policy.allowsRetry(elapsed: elapsed) else {
            return .giveUp(askLogFirst: self.outcomeUnresolved)
        }
        self.attempt += 1
        self.mustCheckLog = true
        return .retry(after: self.policy.delay(afterAttempt: self.attempt), attempt: self.attempt)
    }
}
