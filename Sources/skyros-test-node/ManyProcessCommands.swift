/// Process-level commands for the many-processes tests (writers, observers, cache coherence).
enum ManyProcessCommands {
    /// Runs `command` if it is one of these; `nil` otherwise.
    static func run(_ command: String, _ arguments: [String]) async throws -> Int32? {
        switch command {
        default: return nil
        }
    }
}
