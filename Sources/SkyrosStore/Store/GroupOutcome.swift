/// What one attempt at a group commit gave: a result per set, or a group sent to PostgreSQL as one pipeline
/// whose results are worked out when read (see ``PostgresStore/SentGroup``).
package enum GroupOutcome: Sendable {
    case results([Result<ChangeSetResult, any Error>])
    case sent(PostgresStore.SentGroup)

    /// One result per set, in order.
    package var results: [Result<ChangeSetResult, any Error>] {
        switch self {
        case .results(let results): results
        case .sent(let group): group.results()
        }
    }
}
