import Testing

/// Polls `condition` every `interval` until it holds or `deadline` passes; whether it held. Records nothing:
/// the primitive under ``eventually(within:every:_:sourceLocation:_:)``, for a caller that handles a timeout
/// itself (never a bare sleep for synchronisation).
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

/// Waits until `condition` holds, polling it every `interval` for at most `deadline`: the one deadline-bounded
/// wait of the test targets. When the deadline passes first it records an issue at the caller —
/// "condition not met within <deadline>", followed by `comment` — and returns `false` (so a caller may stop
/// early; it need not `#expect` the result).
@discardableResult
public func eventually(
    within deadline: Duration = .seconds(10), every interval: Duration = .milliseconds(10),
    _ comment: @autoclosure () -> Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    if try await poll(within: deadline, every: interval, condition) { return true }
    let detail = comment().map { ": \($0.rawValue)" } ?? ""
    Issue.record("condition not met within \(deadline)\(detail)", sourceLocation: sourceLocation)
    return false
}
