/// Polls `condition` every `interval` until it holds or `deadline` passes; whether it held. The one deadline
/// poll of the test targets (never a bare sleep for synchronisation).
public func poll(
    within deadline: Duration, every interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let end = ContinuousClock.now + deadline
    while ContinuousClock.now < end {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}
