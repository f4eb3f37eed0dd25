import Foundation

// Usage: DATABASE_URL=postgres://… swift run -c release skyros-bench [--rounds N] [--iterations N]
//     [--only client|stack|prefetch|cache|sync|queue|durable|observe|capture] [--smoke] [--phase-deadline SECONDS]
// --smoke: every phase with a few rounds and iterations, to show that none hangs (CI); not figures to quote.
// Each phase has a deadline (Deadlines.swift; --phase-deadline sets one for all): past it the run fails (status 3).
// (Benchmarks/run --low-latency also holds CPU wake-up latency at 0 while it runs: see Benchmarks/run.)
// Benchmarks/run starts a throw-away PostgreSQL and runs this.
let arguments = CommandLine.arguments
func option(_ name: String, _ fallback: Int) -> Int {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let value = Int(arguments[i + 1]) else { return fallback }
    return value
}
guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else {
    FileHandle.standardError.write(Data("DATABASE_URL is not set (use Benchmarks/run)\n".utf8))
    exit(2)
}
if arguments.count > 1, arguments[1] == ListenNode.command {
    // A listening stack of Benchmarks/capture-cost (see ListenNode.swift).
    try await ListenNode.run(url: url, arguments: Array(arguments.dropFirst(2)))
}
if arguments.count > 1, arguments[1] == ObserverNode.command {
    // A child process of the observation benchmark (see ObserverProcess.swift).
    try await ObserverNode.run(url: url, ids: arguments.dropFirst(2).compactMap { Int($0) })
}
let smoke = arguments.contains("--smoke")
let rounds = option("--rounds", smoke ? 2 : 7)
let iterations = option("--iterations", smoke ? 100 : 2000)
let phaseDeadline = option("--phase-deadline", 0)
if arguments.contains("--phase-deadline"), phaseDeadline <= 0 {
    FileHandle.standardError.write(Data("--phase-deadline takes a whole number of seconds above 0\n".utf8))
    exit(2)
}
let deadlines = PhaseDeadlines(
    rounds: rounds, iterations: iterations, override: phaseDeadline > 0 ? phaseDeadline : nil)

let only = arguments.firstIndex(of: "--only").flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }

func runAll() async throws -> Report {
    var report = Report()
    // The client benchmarks create the tables the stack benchmarks read.
    if only == nil || only == "client" || only == "stack" {
        try await deadlines.run(.client) {
            try await ClientBenchmarks(url: url, rounds: rounds, iterations: iterations).run(into: &report)
        }
    }
    if only == nil || only == "stack" {
        try await deadlines.run(.stack) {
            try await StackBenchmarks(url: url, rounds: rounds, iterations: iterations).run(into: &report)
        }
    }
    if only == nil || only == "prefetch" {
        try await deadlines.run(.prefetch) {
            try await PrefetchBenchmarks(url: url, rounds: rounds, iterations: iterations).run(into: &report)
        }
    }
    if only == nil || only == "cache" {
        try await deadlines.run(.cache) { try await CacheBoundBenchmark(url: url).run(into: &report) }
    }
    let syncParts: Set<SyncBenchmarks.Part> =
        only == nil || only == "sync" ? Set(SyncBenchmarks.Part.allCases) : Set([only.flatMap(SyncBenchmarks.Part.init(rawValue:))].compactMap { $0 })
    if !syncParts.isEmpty {
        try await SyncBenchmarks(url: url, rounds: rounds, iterations: iterations, parts: syncParts)
            .run(into: &report, deadlines: deadlines)
    }
    return report
}
let report: Report
do {
    report = try await runAll()
} catch {
    FileHandle.standardError.write(Data("benchmark failed: \(error)\n".utf8))
    ChildProcesses.killAll()
    exit(1)
}
if smoke {
    print("SMOKE RUN (--smoke): every phase with a few rounds and iterations, to show that none hangs.")
    print("Not figures to quote.")
}
print("rounds: \(rounds), iterations per round: \(iterations); medians")
if ProcessInfo.processInfo.environment["SKYROS_BENCH_CPU_LATENCY"] == "0" {
    print("--low-latency: a PM QoS request held CPU wake-up latency at 0 µs (idle CPUs polled instead of halting)")
}
print("")
report.print(header: ["Operation", "Baseline (raw libpq, C)", "Skyros", "Ratio", "Target"])
if smoke {
    print("")
    print("SMOKE RUN: the figures above come from too few samples to mean anything.")
}
