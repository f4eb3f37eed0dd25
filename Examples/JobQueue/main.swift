// A job queue on PostgreSQL: worker processes claim jobs with `SELECT … FOR UPDATE SKIP LOCKED` inside
// interactive transactions (`DataStack.transaction`), and the same loop written on the raw libpq client
// (`PGConnection`, no stack) to compare with. See README.md beside this file.
//
//   skyros-job-queue setup      --schema S --jobs N       creates the schema's tables and N queued jobs
//   skyros-job-queue worker     --schema S --worker K     claims jobs through a Skyros stack until none is left
//                               [--change-feed off]       (without the change feed: nothing is announced)
//   skyros-job-queue raw-worker --schema S --worker K     the same loop on one PGConnection
//   skyros-job-queue verify     --schema S --jobs N       checks that every job ran exactly once
//   skyros-job-queue bench      [--jobs N] [--workers W]  both loops in one run, W processes each; prints the ratio
//                               [--rounds R] [--without-feed yes]
//
// DATABASE_URL names the database. Each worker prints `claimed <count> in <seconds>` when the queue is empty.
import Foundation
import Skyros
import SkyrosPostgres
import SkyrosTesting   // TestDatabase.dropSchema: the bench drops each run's schema with its capture

/// A job (table `jobs`): queued until a worker claims and runs it, then done.
struct Job: Entity, Equatable {
    var id: Int64
    var state: String
    var payload: Int
    var worker: Int?

    static let tableName = "jobs"
    static let versionColumn: String? = "version"
    static let columns: [EntityColumn<Job>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.state, "state"), EntityColumn(\.payload, "payload"),
        EntityColumn(\.worker, "worker"),
    ]
}

/// One run of a job (table `job_runs`): a job run twice would leave two rows here.
struct JobRun: Entity, Equatable, ColumnKeyStrategyProviding {
    var id: UUID
    var jobID: Int64
    var worker: Int
    var result: Int

    static let tableName = "job_runs"
    static let columnKeyStrategy = ColumnKeyStrategy.convertToSnakeCase   // jobID → job_id
    static let columns: [EntityColumn<JobRun>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.jobID, "job_id"), EntityColumn(\.worker, "worker"),
        EntityColumn(\.result, "result"),
    ]
}

/// The job's work: a little arithmetic on its payload.
func run(_ payload: Int) -> Int { (payload &* 2_654_435_761) % 1_000_003 }

struct Options {
    var values: [String: String] = [:]

    init(_ arguments: ArraySlice<String>) throws {
        var iterator = arguments.makeIterator()
        while let name = iterator.next() {
            guard name.hasPrefix("--"), let value = iterator.next() else { throw Failure("expected --name value, got \(name)") }
            self.values[String(name.dropFirst(2))] = value
        }
    }

    func string(_ name: String, default fallback: String? = nil) throws -> String {
        guard let value = self.values[name] ?? fallback else { throw Failure("--\(name) is required") }
        return value
    }

    func int(_ name: String, default fallback: Int? = nil) throws -> Int {
        guard let value = try Int(self.string(name, default: fallback.map(String.init))) else { throw Failure("--\(name) must be a number") }
        return value
    }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func databaseConfiguration() throws -> PGConfiguration {
    guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else { throw Failure("DATABASE_URL is not set") }
    return try PGConfiguration(url: url)
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

// MARK: Setup and verification

func setup(schema: String, jobs: Int) async throws {
    let connection = try await PGConnection.connect(to: try databaseConfiguration())
    defer { Task { await connection.close() } }
    let s = quoteIdentifier(schema)
    _ = try await connection.execute(script: """
        CREATE SCHEMA IF NOT EXISTS \(s);
        DROP TABLE IF EXISTS \(s).jobs, \(s).job_runs;
        CREATE TABLE \(s).jobs (id bigint PRIMARY KEY, state text NOT NULL, payload integer NOT NULL, worker integer,
                                version bigint NOT NULL);
        CREATE INDEX ON \(s).jobs (id) WHERE state = 'queued';
        CREATE TABLE \(s).job_runs (id uuid PRIMARY KEY, job_id bigint NOT NULL, worker integer NOT NULL,
                                    result integer NOT NULL);
        """)
    _ = try await connection.query(
        "INSERT INTO \(qualified: [schema, "jobs"]) (id, state, payload, version) SELECT g, 'queued', g % 1000, 1 FROM generate_series(1, \(jobs)) AS g")
}

/// Checks that every job is done and ran exactly once; prints `verified <jobs>` or throws.
func verify(schema: String, jobs: Int) async throws {
    let connection = try await PGConnection.connect(to: try databaseConfiguration())
    defer { Task { await connection.close() } }
    let row = try await connection.query("""
        SELECT (SELECT count(*) FROM \(qualified: [schema, "jobs"]) WHERE state = 'done')::int8,
               (SELECT count(*) FROM \(qualified: [schema, "job_runs"]))::int8,
               (SELECT count(DISTINCT job_id) FROM \(qualified: [schema, "job_runs"]))::int8
        """)[0]
    let (done, runs, distinct) = (try row.decode(Int.self, at: 0), try row.decode(Int.self, at: 1), try row.decode(Int.self, at: 2))
    guard done == jobs, runs == jobs, distinct == jobs else {
        throw Failure("expected \(jobs) jobs done once each; done \(done), runs \(runs), distinct jobs run \(distinct)")
    }
    say("verified \(jobs)")
}

// MARK: The two workers

/// Claims one job per interactive transaction until none is queued.
/// `changeFeed: false` runs the stack without its change feed (and so without change capture): no other
/// stack hears of the jobs' commits; for measuring what announcing them costs.
func skyrosWorker(schema: String, worker: Int, changeFeed: Bool) async throws {
    var configuration = DataStackConfiguration(store: .postgres(try databaseConfiguration(), schema: schema), entities: [Job.self, JobRun.self])
    configuration.pool.leaseTimeout = .seconds(30)
    configuration.changeFeed.isEnabled = changeFeed
    let stack = try await DataStack.start(configuration)
    let queued = FetchDescriptor<Job>(predicate: #Predicate { $0.state == "queued" }, sortBy: [SortDescriptor(\.id)])
    let start = ContinuousClock.now
    var claimed = 0
    while true {
        let ran = try await stack.transaction { tx -> Bool in
            guard var job = try await tx.first(queued, lock: .forUpdate(.skipLocked)) else { return false }
            job.state = "done"
            job.worker = worker
            try await tx.update(job)
            try await tx.insert(JobRun(id: UUID(), jobID: job.id, worker: worker, result: run(job.payload)))
            return true
        }
        guard ran else { break }
        claimed += 1
    }
    let elapsed = ContinuousClock.now - start
    await stack.shutdown()
    say("claimed \(claimed) in \(seconds(elapsed))")
}

/// The same loop on one libpq connection: BEGIN, claim, update, insert, COMMIT.
func rawWorker(schema: String, worker: Int) async throws {
    let connection = try await PGConnection.connect(to: try databaseConfiguration())
    let jobs = quoteIdentifier(schema) + ".jobs"
    let runs = quoteIdentifier(schema) + ".job_runs"
    let start = ContinuousClock.now
    var claimed = 0
    while true {
        let ran = try await connection.withTransaction { connection -> Bool in
            let rows = try await connection.query(
                "SELECT id, payload, version FROM \(unsafeRaw: jobs) WHERE state = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED")
            guard let row = rows.first else { return false }
            let (id, payload, version) = (try row.decode(Int64.self, at: 0), try row.decode(Int.self, at: 1), try row.decode(Int64.self, at: 2))
            _ = try await connection.query(
                "UPDATE \(unsafeRaw: jobs) SET state = 'done', worker = \(worker), version = version + 1 WHERE id = \(id) AND version = \(version)")
            _ = try await connection.query(
                "INSERT INTO \(unsafeRaw: runs) (id, job_id, worker, result) VALUES (\(UUID()), \(id), \(worker), \(run(payload)))")
            return true
        }
        guard ran else { break }
        claimed += 1
    }
    let elapsed = ContinuousClock.now - start
    await connection.close()
    say("claimed \(claimed) in \(seconds(elapsed))")
}

func seconds(_ duration: Duration) -> String {
    String(format: "%.3f", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
}

// MARK: Bench

/// Starts `path arguments` as a child process (its output goes to this one's).
func spawn(_ path: String, _ arguments: [String]) throws -> pid_t {
    var pid: pid_t = 0
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    let result = posix_spawn(&pid, path, nil, nil, argv, environ)
    guard result == 0 else { throw Failure("posix_spawn \(path) failed: \(result)") }
    return pid
}

/// Waits, polling without blocking a thread, for `pid` to exit; its exit status, or 128 + signal.
func exitStatus(of pid: pid_t) async throws -> Int32 {
    while true {
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid {
            let signal = status & 0x7F
            return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
        }
        guard result == 0 else { throw Failure("waitpid failed: \(errno)") }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// Runs `workers` processes of `command` on a fresh queue of `jobs`, verifies, and returns jobs per second.
func timedRun(_ command: String, schema: String, jobs: Int, workers: Int, extra: [String] = []) async throws -> Double {
    try await setup(schema: schema, jobs: jobs)
    let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
    let start = ContinuousClock.now
    let pids = try (0..<workers).map { worker in
        try spawn(executable, [command, "--schema", schema, "--worker", String(worker)] + extra)
    }
    for pid in pids {
        let status = try await exitStatus(of: pid)
        guard status == 0 else { throw Failure("\(command) exited with status \(status)") }
    }
    let elapsed = ContinuousClock.now - start
    try await verify(schema: schema, jobs: jobs)
    let rate = Double(jobs) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    say("\(([command] + extra).joined(separator: " ")): \(jobs) jobs by \(workers) processes in \(seconds(elapsed)) s: \(Int(rate)) jobs/s")
    return rate
}

/// Alternates the raw loop, the Skyros loop, and (`withoutFeed`) the Skyros loop without its change feed, each
/// on a fresh schema; prints the median rate of each and the ratios to raw.
func bench(jobs: Int, workers: Int, rounds: Int, withoutFeed: Bool) async throws {
    var rates: [String: [Double]] = [:]
    let database = TestDatabase(configuration: try databaseConfiguration())
    var runs: [(name: String, command: String, extra: [String])] = [("raw", "raw-worker", []), ("skyros", "worker", [])]
    if withoutFeed { runs.append(("skyros-no-feed", "worker", ["--change-feed", "off"])) }
    for round in 0..<rounds {
        // A fresh schema per run; dropped with its change capture (publication and slot) afterwards.
        for run in runs {
            let schema = "job_queue_bench_\(getpid())_\(round)_\(run.name.replacingOccurrences(of: "-", with: "_"))"
            let rate = try await timedRun(run.command, schema: schema, jobs: jobs, workers: workers, extra: run.extra)
            try await database.dropSchema(schema)
            rates[run.name, default: []].append(rate)
        }
    }
    let median = { (values: [Double]) in values.sorted()[values.count / 2] }
    let raw = median(rates["raw"] ?? [1])
    for run in runs {
        let rate = median(rates[run.name] ?? [0])
        say(String(format: "median of %d, %@: %.0f jobs/s, ratio to raw %.2f", rounds, run.name, rate, rate / raw))
    }
}

// MARK: Main

let arguments = CommandLine.arguments.dropFirst()
do {
    let options = try Options(arguments.dropFirst())
    switch arguments.first {
    case "setup": try await setup(schema: try options.string("schema"), jobs: try options.int("jobs"))
    case "worker":
        try await skyrosWorker(
            schema: try options.string("schema"), worker: try options.int("worker"),
            changeFeed: try options.string("change-feed", default: "on") != "off")
    case "raw-worker": try await rawWorker(schema: try options.string("schema"), worker: try options.int("worker"))
    case "verify": try await verify(schema: try options.string("schema"), jobs: try options.int("jobs"))
    case "bench":
        try await bench(
            jobs: try options.int("jobs", default: 10_000), workers: try options.int("workers", default: 4),
            rounds: try options.int("rounds", default: 3), withoutFeed: try options.string("without-feed", default: "no") == "yes")
    default:
        FileHandle.standardError.write(Data("usage: skyros-job-queue setup|worker|raw-worker|verify|bench [--name value]…\n".utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("skyros-job-queue: \(error)\n".utf8))
    exit(1)
}
