import Foundation
import Synchronization

/// The parts of a run, each with a deadline (SPEC §6: a hang is a failure, never a figure). The names are the
/// ones `--only` takes, plus the setup and shutdown the sync parts share.
enum Phase: String, CaseIterable {
    case client, stack, cache, prefetch
    case syncSetup = "sync setup"
    case queue, durable, observe, capture
    case syncShutdown = "sync shutdown"

    /// Seconds the phase may take in a run of the default size (7 rounds × 2,000 iterations): at least 15× what
    /// it took there on the 2-core development VM (client 13 s, stack 4 s, cache 7 s, queue 5 s, durable 9 s,
    /// capture 3.5 s, observe 3 s), so that a loaded machine is not a failure. `scales` is false for the phases
    /// whose work does not depend on `--rounds` and `--iterations`.
    var budget: (seconds: Double, scales: Bool) {
        switch self {
        case .client: (240, true)
        case .stack: (120, true)
        case .cache: (120, false)  // a million rows, whatever the run's size
        case .prefetch: (120, true)
        case .syncSetup, .syncShutdown: (60, false)
        case .queue: (120, true)
        case .durable: (180, true)
        case .observe: (120, true)
        case .capture: (90, true)
        }
    }
}

/// Runs each phase under its deadline. When a phase passes it, a thread of the watchdog's own reports the phase,
/// kills the child processes and ends the process with status 3, without waiting for the phase: a hung phase
/// may be blocked in a libpq call that never returns, or hold the cooperative pool's threads in C calls (the
/// raw baselines run synchronously on them), so neither cancelling it nor a timer task in that pool would do.
struct PhaseDeadlines: Sendable {
    /// The exit status of a run that passed a deadline.
    static let exitStatus: Int32 = 3
    /// The least a scaled phase gets, however small the run.
    static let floor = 30.0

    /// `--phase-deadline`: one deadline for every phase, in seconds.
    let override: Int?
    /// How much larger than the default run this one is, by the largest of its factors (rounds, iterations and
    /// both together): a phase's work grows at most linearly in each.
    let scale: Double

    init(rounds: Int, iterations: Int, override: Int?) {
        self.override = override
        self.scale = max(
            Double(rounds) / 7, Double(iterations) / 2000, Double(rounds) * Double(iterations) / (7 * 2000))
    }

    func seconds(for phase: Phase) -> Int {
        if let override { return override }
        let budget = phase.budget
        return Int((budget.scales ? max(Self.floor, budget.seconds * self.scale) : budget.seconds).rounded(.up))
    }

    /// Runs `body` as `phase`, in the caller's isolation, and reports on standard error how long it took.
    func run<T>(
        _ phase: Phase, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async rethrows -> T {
        let seconds = self.seconds(for: phase)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            if finished.wait(timeout: .now() + .seconds(seconds)) == .timedOut {
                Self.expire(phase, seconds: seconds)
            }
        }
        defer { finished.signal() }
        let started = ContinuousClock.now
        let result = try await body()
        let elapsed = ContinuousClock.now - started
        let taken = String(
            format: "%.1f", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        standardError("skyros-bench: phase \(phase.rawValue) done in \(taken) s (deadline \(seconds) s)\n")
        return result
    }

    private static func expire(_ phase: Phase, seconds: Int) -> Never {
        standardError("skyros-bench: phase \(phase.rawValue) passed its deadline of \(seconds) s\n")
        ChildProcesses.killAll()
        // _exit, not exit: the hung phase's threads still run, and exit's handlers (stdio, static destructors)
        // could block or crash under them. Nothing waits on standard output: the report prints after the last phase.
        _exit(Self.exitStatus)
    }
}

/// The child processes this process started and has not seen exit (the observation benchmark's observer),
/// so that a run that fails kills them instead of leaving them behind.
enum ChildProcesses {
    private static let running = Mutex<Set<pid_t>>([])

    static func add(_ pid: pid_t) { _ = Self.running.withLock { $0.insert(pid) } }
    static func remove(_ pid: pid_t) { _ = Self.running.withLock { $0.remove(pid) } }

    /// Sends SIGKILL to each and waits (up to 2 s) until it is gone.
    static func killAll() {
        let pids = Self.running.withLock { running in
            defer { running.removeAll() }
            return running
        }
        for pid in pids { kill(pid, SIGKILL) }
        let giveUp = ContinuousClock.now + .seconds(2)
        for pid in pids {
            // Reaped here, or by the thread Foundation's Process waits for it on (then this gets ECHILD): gone.
            while waitpid(pid, nil, WNOHANG) == 0, ContinuousClock.now < giveUp { usleep(10_000) }
        }
    }
}

/// One write(2) to standard error, unbuffered, from any thread.
func standardError(_ text: String) {
    let bytes = Array(text.utf8)
    bytes.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
}
