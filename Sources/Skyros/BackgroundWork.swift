import SkyrosPostgres

/// A stack's long-running background work (the change feed's loops), as child tasks of one task group that
/// ``stop()`` cancels and awaits.
///
/// The group is rooted in one task started when the stack is ready, not in ``DataStack/run()``: a stack that
/// ``DataStack/start(_:logger:)`` returned works (other processes' changes reach its cache and observers)
/// whether or not the caller runs it as a service, and `run()` and `shutdown()` both end it and wait for it.
final class BackgroundWork: Sendable {
    private let root = Locked<Task<Void, Never>?>(nil)
    private let children = Locked(0)

    /// Starts `jobs` as child tasks of the work's group (once; later calls are ignored).
    func start(_ jobs: [@Sendable () async -> Void]) {
        self.root.withLock { root in
            guard root == nil else { return }
            // The one unstructured task of the stack's background work: see the type's documentation.
            root = Task {
                // Started during `start`, perhaps under a traced caller: the feed's statements belong to no span.
                await untraced {
                    await withDiscardingTaskGroup { group in
                        for job in jobs {
                            self.children.withLock { $0 += 1 }
                            group.addTask {
                                await job()
                                self.children.withLock { $0 -= 1 }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The number of child tasks running.
    var running: Int { self.children.withLock { $0 } }

    /// Cancels the work and waits until every child task has ended.
    func stop() async {
        guard let root = self.root.withLock({ $0 }) else { return }
        root.cancel()
        await root.value
    }
}
