/// Process-level commands for the commit-queue tests (durable writer killed with SIGKILL, SIGTERM drain).
enum CommitQueueCommands {
    /// Runs `command` if it is one of these; `nil` otherwise.
    static func run(_ command: String, _ arguments: [String]) async throws -> Int32? {
        switch command {
        default: return nil
        }
    }
}
