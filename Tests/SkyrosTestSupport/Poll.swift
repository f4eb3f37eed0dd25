import Foundation
import SkyrosTesting
import Testing

/// The deadline ``expectEventually(within:every:_:sourceLocation:_:)`` waits by default: 10 s, and three times
/// that under a sanitizer (`SKYROS_SANITIZE`, set by `scripts/test`), where the whole suite runs several times
/// slower beside itself. A condition that holds returns as soon as it does, so a longer deadline costs nothing
/// unless a test fails.
public let defaultPollDeadline: Duration =
    ProcessInfo.processInfo.environment["SKYROS_SANITIZE", default: ""].isEmpty ? .seconds(10) : .seconds(30)

/// SkyrosTesting's `eventually(within:every:_:)` that records an issue at the caller when the deadline passes
/// first — "condition not met within <deadline>", followed by `comment` — and returns `false` (so a caller may
/// stop early; it need not `#expect` the result). The kit records nothing (it depends on no testing framework);
/// this is the swift-testing side.
@discardableResult
public func expectEventually(
    within deadline: Duration = defaultPollDeadline, every interval: Duration = .milliseconds(10),
    _ comment: @autoclosure () -> Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    if try await eventually(within: deadline, every: interval, condition) { return true }
    let detail = comment().map { ": \($0.rawValue)" } ?? ""
    Issue.record("condition not met within \(deadline)\(detail)", sourceLocation: sourceLocation)
    return false
}
