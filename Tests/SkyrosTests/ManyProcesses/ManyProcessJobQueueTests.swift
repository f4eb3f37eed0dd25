import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// The job-queue example (Examples/JobQueue): worker processes claim jobs with `FOR UPDATE SKIP LOCKED` in
/// interactive transactions; every job runs exactly once. The same loop on raw libpq runs in the same test,
/// and both throughputs are printed.
@Suite("Job queue example", .serialized)
struct ManyProcessJobQueueTests {
    /// `skyros-job-queue`, beside the test bundle (this build's), else under `.build/debug`.
    static var executablePath: String {
        let besideBundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("skyros-job-queue").path
        if FileManager.default.isExecutableFile(atPath: besideBundle) { return besideBundle }
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { root.deleteLastPathComponent() }
        return root.appendingPathComponent(".build/debug/skyros-job-queue").path
    }

    /// Runs `command` in `workers` processes on a fresh queue of `jobs`; checks each exited 0 and that every job
    /// ran exactly once; returns jobs per second.
    private static func run(_ command: String, schema: String, jobs: Int, workers: Int) async throws -> Double {
        let setup = try NodeProcess.spawn(Self.executablePath, ["setup", "--schema", schema, "--jobs", String(jobs)])
        #expect(await setup.exitStatus() == 0, "\(setup.report)")
        let start = ContinuousClock.now
        let processes = try (0..<workers).map { worker in
            try NodeProcess.spawn(Self.executablePath, [command, "--schema", schema, "--worker", String(worker)])
        }
        var claimed = 0
        for process in processes {
            let status = await process.exitStatus()
            #expect(status == 0, "\(process.report)")
            let line = try #require(process.lines.last { $0.hasPrefix("claimed ") }, "\(process.report)")
            claimed += Int(line.split(separator: " ")[1]) ?? 0
            process.removeOutput()
        }
        let elapsed = ContinuousClock.now - start
        #expect(claimed == jobs)
        let verify = try NodeProcess.spawn(Self.executablePath, ["verify", "--schema", schema, "--jobs", String(jobs)])
        #expect(await verify.exitStatus() == 0, "\(verify.report)")
        #expect(verify.lines == ["verified \(jobs)"])
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Double(jobs) / seconds
    }

    @Test func fourProcessesRunTenThousandJobsExactlyOnce() async throws {
        try await TestServer.withSchema("jq") { schema in
            let raw = try await Self.run("raw-worker", schema: schema, jobs: 10_000, workers: 4)
            let skyros = try await Self.run("worker", schema: schema, jobs: 10_000, workers: 4)
            print(String(format: "job queue, 4 processes, 10000 jobs: skyros %.0f jobs/s, raw libpq %.0f jobs/s, ratio %.2f", skyros, raw, skyros / raw))
        }
    }
}
