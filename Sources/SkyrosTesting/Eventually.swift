/// Polls `condition` every `interval` until it holds or `deadline` passes, and says whether it held: the
/// deadline-bounded wait a test uses instead of a bare sleep. A condition that holds returns at once, so a
/// generous deadline costs nothing unless the test fails.
///
/// It records nothing: the caller decides what a timeout means, with its own framework.
///
/// ```swift
/// func authorBecomesVisible() async throws {
///     let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory, entities: [Author.self]))
///     try await stack.write { try $0.insert(Author(id: UUID(), name: "Ada")) }
///     let seen = try await eventually(within: .seconds(5)) {
///         try await stack.read { try await $0.count(FetchDescriptor<Author>()) } == 1
///     }
///     precondition(seen)    // swift-testing: #expect(seen); XCTest: XCTAssertTrue(seen)
/// }
/// ```
/// - Parameters:
///   - deadline: how long to keep trying (10 s by default).
///   - interval: the pause between two tries (10 ms by default).
///   - condition: what to wait for; checked once more after the deadline.
/// - Returns: whether `condition` held before the deadline.
/// - Throws: what `condition` throws (the first error ends the wait).
public func eventually(
    within deadline: Duration = .seconds(10), every interval: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let end = ContinuousClock.now + deadline
    while ContinuousClock.now < end {
        if try await condition() { return true }
        // A cancelled test stops sleeping here and checks once more below.
        do { try await Task.sleep(for: interval) } catch { break }
    }
    return try await condition()
}

/// Waits like ``eventually(within:every:_:)``, but throws ``ConditionTimeout`` when the deadline passes first:
/// for a test that should stop there (swift-testing and XCTest both fail a test that throws).
///
/// ```swift
/// func authorBecomesVisible() async throws {
///     let stack = try await DataStack.start(DataStackConfiguration(store: .inMemory, entities: [Author.self]))
///     try await stack.write { try $0.insert(Author(id: UUID(), name: "Ada")) }
///     try await waitUntil("the author is visible", within: .seconds(5)) {
///         try await stack.read { try await $0.count(FetchDescriptor<Author>()) } == 1
///     }
/// }
/// ```
/// - Parameters:
///   - description: what is waited for; the error repeats it.
///   - deadline: how long to keep trying (10 s by default).
///   - interval: the pause between two tries (10 ms by default).
///   - condition: what to wait for.
/// - Throws: ``ConditionTimeout`` when the deadline passes first, or what `condition` throws.
public func waitUntil(
    _ description: String = "condition", within deadline: Duration = .seconds(10),
    every interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool
) async throws {
    guard try await eventually(within: deadline, every: interval, condition) else {
        throw ConditionTimeout(description: description, deadline: deadline)
    }
}

/// The error of ``waitUntil(_:within:every:_:)``: the condition did not hold within the deadline.
///
/// ```swift
/// do {
///     try await waitUntil("never", within: .milliseconds(50)) { false }
/// } catch let timeout as ConditionTimeout {
///     print(timeout.description)    // "never: not met within 0.05 seconds"
/// }
/// ```
public struct ConditionTimeout: Error, Sendable, CustomStringConvertible {
    /// What was waited for.
    public var description: String { "\(self.condition): not met within \(self.deadline)" }
    /// The condition's description, as given to ``waitUntil(_:within:every:_:)``.
    public let condition: String
    /// How long it was waited for.
    public let deadline: Duration

    /// An error for `description`, not met within `deadline`.
    ///
    /// ```swift
    /// let error = ConditionTimeout(description: "a row appears", deadline: .seconds(1))
    /// ```
    /// - Parameters:
    ///   - description: what was waited for.
    ///   - deadline: how long.
    public init(description: String, deadline: Duration) {
        self.condition = description
        self.deadline = deadline
    }
}
