import Foundation
import Testing

/// The deadline ``eventually(within:every:_:sourceLocation:_:)`` waits by default: 10 s, and three times that
/// under a sanitizer (`SKYROS_SANITIZE`, set by `scripts/test`), where the whole suite runs several times
/// slower beside itself. A condition that holds returns as soon as it does, so a longer deadline costs
/// nothing unless a test fails.
public let defaultPollDeadline: Duration =
    ProcessInfo.processInfo.environment["SKYROS_SANITIZE", default: ""].isEmpty ? .seconds(10) : .seconds(30)

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
    within deadline: Duration = defaultPollDeadline, every interval: Duration = .milliseconds(10),
    _ comment: @autoclosure () -> Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    if try await poll(within: deadline, every: interval, condition) { return true }
    let detail = comment().map { ": \($0.rawValue)" } ?? ""
    Issue.record("condition not met within \(deadline)\(detail)", sourceLocation: sourceLocation)
    return false
}
