import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

@Suite("Connection: statements, errors, cancellation, pipeline, COPY")
struct ConnectionTests {
    @Test func boundParametersNeverBecomeSQL() async throws {
        try await TestServer.withSchema { schema in
            let connection = try await TestServer.connect()
            try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).\"odd \"\"name\"\"\" (\"order\" text)")
            let hostile = ["'; DROP TABLE x; --", "\\", "$1", "\"", "' OR '1'='1", "%_"]
            for value in hostile {
                try await connection.query("INSERT INTO \(qualified: [schema, "odd \"name\""]) (\(identifier: "order")) VALUES (\(value))")
            }
            let rows = try await connection.query("SELECT \(identifier: "order") FROM \(qualified: [schema, "odd \"name\""]) ORDER BY 1")
            #expect(Set(try rows.map { try $0.decode(String.self, at: 0) }) == Set(hostile))
            #expect(quoteIdentifier("odd \"name\"") == "\"odd \"\"name\"\"\"")
            #expect(quoteIdentifier("naïve 表") == "\"naïve 表\"")
            await connection.close()
        }
    }

    @Test func libpqCallsRunOnTheConnectionsOwnThread() async throws {
        let connection = try await TestServer.connect()
        #expect(try await connection.runsOnOwnThread())
        #expect(try await Task.detached { try await connection.runsOnOwnThread() }.value)
        await connection.close()
    }

    @Test func preparedStatementsAreReused() async throws {
        let connection = try await TestServer.connect()
        for i in 0..<50 {
            let value = try await connection.query("SELECT \(i)::int8 + 1")[0].decode(Int.self, at: 0)
            #expect(value == i + 1)
        }
        let prepared = try await connection.query("SELECT count(*) FROM pg_prepared_statements WHERE statement = 'SELECT $1::int8 + 1'")
        #expect(try prepared[0].decode(Int.self, at: 0) == 1)
        await connection.close()
    }

    /// A migration that changes a column's type makes statements prepared before it fail with "cached plan must
    /// not change result type" (0A000) on every later use. Outside a transaction the statement is prepared
    /// again and runs; in a transaction, and in a pipeline, it fails once and the next use prepares it again.
    /// Either way the outdated statement is deallocated on the server (after the transaction, when it failed in
    /// one).
    @Test func statementsPreparedBeforeTheirTableChangedArePreparedAgain() async throws {
        try await TestServer.withSchema { schema in
            try await TestServer.withConnection { admin in
                try await TestServer.withConnection { connection in
                    let table = "\(quoteIdentifier(schema)).t"
                    try await admin.execute(script: "CREATE TABLE \(table) (id int8 PRIMARY KEY, n int4 NOT NULL); INSERT INTO \(table) VALUES (1, 10)")
                    func read() async throws -> Int {
                        try await connection.query("SELECT n FROM \(qualified: [schema, "t"]) WHERE id = \(1)")[0].decode(Int.self, at: 0)
                    }
                    func cached() async throws -> Int {
                        try await connection.query("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'SELECT n FROM%'")[0]
                            .decode(Int.self, at: 0)
                    }
                    #expect(try await read() == 10)
                    try await admin.execute(script: "ALTER TABLE \(table) ALTER COLUMN n TYPE int8")
                    #expect(try await read() == 10)
                    #expect(try await cached() == 1, "the stale statement is deallocated")

                    try await admin.execute(script: "ALTER TABLE \(table) ALTER COLUMN n TYPE int2")
                    let inTransaction = await #expect(throws: PGError.self) {
                        try await connection.withTransaction { _ in try await read() }
                    }
                    #expect(inTransaction?.sqlState == .featureNotSupported)
                    #expect(try await read() == 10)
                    #expect(try await cached() == 1, "the statement that failed in the transaction is deallocated after it")

                    let bump = PGQuery("UPDATE \(qualified: [schema, "t"]) SET n = n + \(1) WHERE id = 1 RETURNING n")
                    #expect(try await connection.pipeline([bump])[0][0].decode(Int.self, at: 0) == 11)
                    try await admin.execute(script: "ALTER TABLE \(table) ALTER COLUMN n TYPE int4")
                    let inPipeline = await #expect(throws: PGError.self) { try await connection.pipeline([bump]) }
                    #expect(inPipeline?.sqlState == .featureNotSupported)
                    #expect(inPipeline?.statementIndex == 0)
                    #expect(try await connection.pipeline([bump])[0][0].decode(Int.self, at: 0) == 12)
                    let updates = try await connection.query("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'UPDATE %'")
                    #expect(try updates[0].decode(Int.self, at: 0) == 1, "the statement that failed in the pipeline is deallocated after it")
                }
            }
        }
    }

    @Test func serverErrorsCarrySQLStateAndFields() async throws {
        try await TestServer.withSchema { schema in
            let connection = try await TestServer.connect()
            try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).users (id int PRIMARY KEY, email text CONSTRAINT users_email_key UNIQUE)")
            try await connection.query("INSERT INTO \(qualified: [schema, "users"]) VALUES (1, \("a@x"))")
            let duplicate = await #expect(throws: PGError.self) {
                try await connection.query("INSERT INTO \(qualified: [schema, "users"]) VALUES (2, \("a@x"))")
            }
            #expect(duplicate?.kind == .uniqueViolation)
            #expect(duplicate?.sqlState == .uniqueViolation)
            #expect(duplicate?.constraint == "users_email_key")
            #expect(duplicate?.table == "users")
            #expect(duplicate?.schema == schema)
            #expect(duplicate?.detail?.contains("already exists") == true)
            #expect(duplicate.map { SQLState.integrityConstraintViolation ~= $0.sqlState } == true)

            let syntax = await #expect(throws: PGError.self) { try await connection.query("SELEC 1") }
            #expect(syntax?.kind == .syntaxError)
            #expect(syntax?.position == 1)
            let missing = await #expect(throws: PGError.self) { try await connection.query("SELECT * FROM no_such_table") }
            #expect(missing?.kind == .undefinedTable)
            // Still usable after errors.
            #expect(try await connection.query("SELECT 2")[0].decode(Int.self, at: 0) == 2)
            await connection.close()
        }
    }

    @Test func transactionRollsBackOnThrow() async throws {
        try await TestServer.withSchema { schema in
            let connection = try await TestServer.connect()
            try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).t (n int)")
            struct Boom: Error {}
            await #expect(throws: Boom.self) {
                try await connection.withTransaction(isolation: .serializable) { connection in
                    try await connection.query("INSERT INTO \(qualified: [schema, "t"]) VALUES (1)")
                    throw Boom()
                }
            }
            try await connection.withTransaction { connection in
                try await connection.query("INSERT INTO \(qualified: [schema, "t"]) VALUES (2)")
            }
            let rows = try await connection.query("SELECT n FROM \(qualified: [schema, "t"])")
            #expect(try rows.map { try $0.decode(Int.self, at: 0) } == [2])
            #expect(await connection.isInTransaction == false)
            await connection.close()
        }
    }

    @Test func cancellingTheTaskCancelsTheQuery() async throws {
        let connection = try await TestServer.connect()
        let observer = try await TestServer.connect()
        let pid = await connection.backendPID
        let clock = ContinuousClock()
        let task = Task { try await connection.query("SELECT pg_sleep(10)") }
        // Wait until the server is actually running the statement.
        try await expectEventually("the statement never ran") {
            let rows = try await observer.query("SELECT state FROM pg_stat_activity WHERE pid = \(Int(pid))")
            return try rows.first?.decode(String?.self, at: 0) == "active"
        }
        let start = clock.now
        task.cancel()
        let result = await task.result
        let elapsed = clock.now - start
        // Well before the 10 s sleep ends (a bound, not a timing: on a loaded machine this took 1.05 s).
        #expect(elapsed < .seconds(5), "cancellation took \(elapsed)")
        #expect(throws: PGError.self) { try result.get() }
        if case .failure(let error as PGError) = result { #expect(error.kind == .queryCancelled) }
        #expect(try await connection.query("SELECT 7")[0].decode(Int.self, at: 0) == 7)
        await connection.close()
        await observer.close()
    }

    @Test func pipelineOfTenThousandInsertsCommitsInOneTransaction() async throws {
        try await TestServer.withSchema { schema in
            let connection = try await TestServer.connect()
            try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).items (n int PRIMARY KEY, xid8 xid8 DEFAULT pg_current_xact_id())")
            var batch: [PGQuery] = ["BEGIN"]
            batch += (0..<10_000).map { i in "INSERT INTO \(qualified: [schema, "items"]) (n) VALUES (\(i))" }
            batch.append("COMMIT")
            let results = try await connection.pipeline(batch)
            #expect(results.count == 10_002)
            #expect(results[1].affectedRows == 1)
            let rows = try await connection.query("SELECT count(*), count(DISTINCT xid8::text) FROM \(qualified: [schema, "items"])")
            #expect(try rows[0].decode(Int.self, at: 0) == 10_000)
            #expect(try rows[0].decode(Int.self, at: 1) == 1, "all rows were written by one transaction")
            await connection.close()
        }
    }

    @Test func pipelineErrorAbortsAndNamesTheStatement() async throws {
        try await TestServer.withSchema { schema in
            let connection = try await TestServer.connect()
            try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).items (n int PRIMARY KEY)")
            var batch: [PGQuery] = (0..<100).map { i in "INSERT INTO \(qualified: [schema, "items"]) (n) VALUES (\(i))" }
            batch[57] = "INSERT INTO \(qualified: [schema, "items"]) (n) VALUES (\(3))"  // duplicate key
            let error = await #expect(throws: PGError.self) { try await connection.pipeline(batch) }
            #expect(error?.kind == .uniqueViolation)
            #expect(error?.statementIndex == 57)
            let count = try await connection.query("SELECT count(*) FROM \(qualified: [schema, "items"])")[0].decode(Int.self, at: 0)
            #expect(count == 0, "the implicit pipeline transaction was rolled back")
            // The connection left pipeline mode cleanly.
            #expect(try await connection.query("SELECT \(5)::int8")[0].decode(Int.self, at: 0) == 5)
            await connection.close()
        }
    }

    /// A long pipeline whose early statement fails: PostgreSQL skips everything up to the sync, and libpq
    /// answers every statement already queued as aborted without waiting for the server, then has nothing left
    /// to report. The pipeline must notice that (and stop sending what would be skipped) instead of waiting for
    /// results that never come: it used to spin on its connection's thread forever.
    @Test(.timeLimit(.minutes(1))) func longPipelineWithAnEarlyFailureEndsWithTheError() async throws {
        try await TestServer.withSchema { schema in
            let connection = try await TestServer.connect()
            try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).items (n int PRIMARY KEY)")
            for (count, failing) in [(600, 10), (3_000, 10), (10_000, 10), (3_000, 1_000), (3_000, 2_995)] {
                var batch: [PGQuery] = (0..<count).map { i in "INSERT INTO \(qualified: [schema, "items"]) (n) VALUES (\(i))" }
                batch[failing] = "INSERT INTO \(qualified: [schema, "items"]) (n) VALUES (\(0))"  // duplicate key
                let error = await #expect(throws: PGError.self) { try await connection.pipeline(batch) }
                #expect(error?.kind == .uniqueViolation)
                #expect(error?.statementIndex == failing, "\(count) statements, failing at \(failing)")
                let stored = try await connection.query("SELECT count(*) FROM \(qualified: [schema, "items"])")[0].decode(Int.self, at: 0)
                #expect(stored == 0, "the implicit pipeline transaction was rolled back")
                #expect(await !connection.isInTransaction)
            }
            // The connection left pipeline mode cleanly, and a long pipeline still commits whole.
            let batch: [PGQuery] = (0..<3_000).map { i in "INSERT INTO \(qualified: [schema, "items"]) (n) VALUES (\(i))" }
            #expect(try await connection.pipeline(batch).count == 3_000)
            #expect(try await connection.query("SELECT count(*) FROM \(qualified: [schema, "items"])")[0].decode(Int.self, at: 0) == 3_000)
            await connection.close()
        }
    }

    /// The server ends the session in the middle of a pipeline: the pipeline fails with the lost connection
    /// instead of waiting for a sync that can never come (libpq has nothing more to report, and is not busy).
    @Test(.timeLimit(.minutes(1))) func aPipelineWhoseConnectionDropsFailsWithTheLoss() async throws {
        let connection = try await TestServer.connect()
        let error = await #expect(throws: PGError.self) {
            try await connection.pipeline(["SELECT \(1)", "SELECT pg_terminate_backend(pg_backend_pid())", "SELECT \(2)"])
        }
        #expect(error?.isTransient == true, "\(String(describing: error))")
        await connection.close()
    }

    /// A deferred constraint is checked when the implicit transaction commits, at the sync, after every statement
    /// succeeded: libpq reports that error as one more result. It fails the pipeline with no statement index.
    @Test func pipelineWhoseImplicitCommitFailsReportsTheConstraint() async throws {
        try await TestServer.withSchema { schema in
            let connection = try await TestServer.connect()
            try await connection.execute(script: """
                CREATE TABLE \(quoteIdentifier(schema)).items (
                    n int, CONSTRAINT items_n_once UNIQUE (n) DEFERRABLE INITIALLY DEFERRED)
                """)
            let insert = { (n: Int) -> PGQuery in "INSERT INTO \(qualified: [schema, "items"]) (n) VALUES (\(n))" }
            for _ in 0..<2 {  // the second time with the statement prepared
                let error = await #expect(throws: PGError.self) {
                    try await connection.pipeline([insert(1), insert(2), insert(1)])
                }
                #expect(error?.kind == .uniqueViolation)
                #expect(error?.constraint == "items_n_once")
                #expect(error?.statementIndex == nil, "no statement failed: the commit did")
                #expect(await !connection.isInTransaction)
            }
            let count = try await connection.query("SELECT count(*) FROM \(qualified: [schema, "items"])")[0].decode(Int.self, at: 0)
            #expect(count == 0, "nothing was committed")
            let results = try await connection.pipeline([insert(1), insert(2)])
            #expect(results.count == 2)
            await connection.close()
        }
    }

    @Test func pipelinesPrepareTheirStatementsOnceAndReuseThem() async throws {
        try await TestServer.withSchema { schema in
            let connection = try await TestServer.connect()
            try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).items (n int8 PRIMARY KEY, label text)")
            func insert(_ n: Int) -> PGQuery { "INSERT INTO \(qualified: [schema, "items"]) (n, label) VALUES (\(n), \("row \(n)"))" }
            func preparedCount() async throws -> Int {
                try await connection.query("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'INSERT INTO%'")[0].decode(Int.self, at: 0)
            }
            // A new statement is prepared inside the pipeline, once, however often it repeats.
            let first = try await connection.pipeline((0..<20).map(insert) + ["SELECT \(7)::int8 * 6"])
            #expect(first.count == 21)
            #expect(try first[20][0].decode(Int.self, at: 0) == 42)
            #expect(try await preparedCount() == 1)
            // A pipeline that fails after preparing keeps the statement usable; the failure names the statement.
            let duplicate = await #expect(throws: PGError.self) {
                try await connection.pipeline([insert(100), insert(5), insert(101)])
            }
            #expect(duplicate?.kind == .uniqueViolation)
            #expect(duplicate?.statementIndex == 1)
            // A new statement that does not parse fails with its own index, and nothing is cached for it.
            let syntax = await #expect(throws: PGError.self) {
                try await connection.pipeline([insert(200), "INSERT INTO nowhere_at_all VALUES (\(1))", insert(201)])
            }
            #expect(syntax?.kind == .undefinedTable)
            #expect(syntax?.statementIndex == 1)
            let again = await #expect(throws: PGError.self) {
                try await connection.pipeline(["INSERT INTO nowhere_at_all VALUES (\(1))"])
            }
            #expect(again?.statementIndex == 0)
            // The same text with other parameter types runs unnamed instead of replacing the cached statement.
            let mixed = try await connection.pipeline([
                "INSERT INTO \(qualified: [schema, "items"]) (n, label) VALUES (\(300), \(3.5))", insert(301),
            ])
            #expect(mixed.count == 2)
            #expect(try await preparedCount() == 1)
            let rows = try await connection.query("SELECT count(*) FROM \(qualified: [schema, "items"])")[0].decode(Int.self, at: 0)
            #expect(rows == 22)
            await connection.close()

            // Without prepared statements (PgBouncer in transaction mode) pipelines prepare nothing.
            let unprepared = try await PGConnection.connect(to: TestServer.configuration, usePreparedStatements: false)
            try await unprepared.pipeline([insert(400), insert(401)])
            #expect(try await unprepared.query("SELECT count(*) FROM pg_prepared_statements")[0].decode(Int.self, at: 0) == 0)
            await unprepared.close()
        }
    }

    @Test func copyFromStdin() async throws {
        try await TestServer.withSchema { schema in
            let connection = try await TestServer.connect()
            try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).docs (id int, body text, blob bytea, at timestamptz)")
            let tricky = "tab\there\nnew line \\ back \\N not null"
            var rows: [[PGValue]] = []
            for i in 0..<5_000 {
                rows.append([
                    try PGValue(i), i == 1 ? .null : try PGValue(i == 0 ? tricky : "row \(i)"),
                    try PGValue(Data([0, UInt8(i % 256)])), try PGValue(Date(timeIntervalSince1970: Double(i))),
                ])
            }
            let copied = try await connection.copyFrom(table: [schema, "docs"], columns: ["id", "body", "blob", "at"], rows: rows)
            #expect(copied == 5_000)
            let first = try await connection.query("SELECT body, blob FROM \(qualified: [schema, "docs"]) WHERE id IN (0, 1) ORDER BY id")
            #expect(try first[0].decode(String.self, at: 0) == tricky)
            #expect(try first[1].decode(String?.self, at: 0) == nil)
            #expect(try first[0].decode(Data.self, at: 1) == Data([0, 0]))
            let bad = await #expect(throws: PGError.self) {
                try await connection.copyFrom(table: [schema, "docs"], columns: ["id"], rows: [[try PGValue("not a number")]])
            }
            #expect(bad?.sqlState == .invalidTextRepresentation)
            #expect(try await connection.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
            await connection.close()
        }
    }

    @Test(arguments: [Duration.zero, .microseconds(100), .milliseconds(20)])
    func repliesAreTheSameWhateverTheBusyPollWindow(_ window: Duration) async throws {
        var configuration = try TestServer.configuration
        configuration.busyPoll = window
        let connection = try await PGConnection.connect(to: configuration)
        for i in 0..<200 {
            #expect(try await connection.query("SELECT \(i)::int8 * 2")[0].decode(Int.self, at: 0) == i * 2)
        }
        // A reply slower than the window, then fast ones again.
        #expect(try await connection.query("SELECT pg_sleep(0.05), 1")[0].decode(Int.self, at: 1) == 1)
        let script = try await connection.execute(script: "SELECT 1; SELECT 2")
        #expect(try script[0].decode(Int.self, at: 0) == 2)
        let results = try await connection.pipeline((0..<300).map { "SELECT \($0)::int8" })
        #expect(try results.map { try $0[0].decode(Int.self, at: 0) } == Array(0..<300))
        let syntax = await #expect(throws: PGError.self) { try await connection.query("SELEC \(1)") }
        #expect(syntax?.kind == .syntaxError)
        #expect(try await connection.query("SELECT 9")[0].decode(Int.self, at: 0) == 9)
        await connection.close()
    }

    @Test func busyPollingSwitchesOffWhileRepliesAreSlowAndBackOnWhenFast() async throws {
        var configuration = try TestServer.configuration
        // A 5 ms window: wide enough that a local point select comes back within twice it even under
        // ThreadSanitizer beside the parallel suite, narrow enough that a 100 ms sleep is far beyond it.
        configuration.busyPoll = .milliseconds(5)
        let connection = try await PGConnection.connect(to: configuration)
        #expect(await connection.busyPollsNextReply)
        try await connection.query("SELECT pg_sleep(0.1)")
        #expect(await connection.busyPollsNextReply == false)
        // A local point select comes back within twice the window (retried: the VM can stall any one of them).
        try await expectEventually("no point select came back within twice the window") {
            try await connection.query("SELECT 1")
            return await connection.busyPollsNextReply
        }
        try await connection.pipeline(["SELECT pg_sleep(0.1)"])
        #expect(await connection.busyPollsNextReply == false)
        var off = configuration
        off.busyPoll = .zero
        let never = try await PGConnection.connect(to: off)
        try await never.query("SELECT 1")
        #expect(await never.busyPollsNextReply == false)
        await connection.close()
        await never.close()
    }

    @Test func atMostHalfTheCoresBusyPollAtOnceHoweverManyConnectionsWait() async throws {
        var polling = try TestServer.configuration
        polling.busyPoll = .milliseconds(20)   // every 2 ms reply below is polled for, if allowed
        let configuration = polling
        let connections = try await withThrowingTaskGroup(of: PGConnection.self) { group in
            for _ in 0..<8 { group.addTask { try await PGConnection.connect(to: configuration) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for connection in connections {
                group.addTask {
                    for _ in 0..<15 { try await connection.query("SELECT pg_sleep(0.002)") }
                }
            }
            try await group.waitForAll()
        }
        let pollers = PGConnection.busyPollers
        #expect(pollers.peak >= 1)
        #expect(pollers.peak <= pollers.limit, "\(pollers)")
        #expect(pollers.limit == max(1, ProcessInfo.processInfo.activeProcessorCount / 2))
        for connection in connections { await connection.close() }
    }

    @Test func copyStartedThroughQueryEndsCleanlyAndTheConnectionStaysUsable() async throws {
        try await TestServer.withSchema { schema in
            let connection = try await TestServer.connect()
            try await connection.execute(script: "CREATE TABLE \(quoteIdentifier(schema)).t (n int)")
            let copyIn = await #expect(throws: PGError.self) {
                try await connection.query("COPY \(qualified: [schema, "t"]) FROM STDIN")
            }
            #expect(copyIn?.message.contains("copyFrom") == true)
            #expect(await connection.isInTransaction == false)
            #expect(try await connection.query("SELECT 3")[0].decode(Int.self, at: 0) == 3)
            try await connection.execute(script: "INSERT INTO \(quoteIdentifier(schema)).t VALUES (1), (2)")
            let copyOut = try await connection.execute(script: "COPY \(quoteIdentifier(schema)).t TO STDOUT")
            #expect(copyOut.commandTag == "COPY 2")
            #expect(try await connection.query("SELECT count(*) FROM \(qualified: [schema, "t"])")[0].decode(Int.self, at: 0) == 2)
            await connection.close()
        }
    }

    @Test func connectionFailuresAreSpecificAndNeverShowThePassword() async throws {
        let base = try TestServer.configuration
        let secret = "s3cr3t-Pa55word-%41"

        let malformed = #expect(throws: PGError.self) {
            _ = try PGConfiguration(url: "postgres://user:\(secret)@host:notaport/db")
        }
        #expect(malformed?.kind == .invalidConfiguration)
        #expect(malformed.map { "\($0)".contains("s3cr3t") } == false)
        let badEscape = #expect(throws: PGError.self) {
            _ = try PGConfiguration(url: "postgres://user:bad%zzsecret@host/db")
        }
        #expect(badEscape.map { "\($0) \($0.debugDescription)".contains("zzsecret") } == false)

        var wrongPassword = base
        wrongPassword["password"] = secret
        let auth = await #expect(throws: PGError.self) { _ = try await PGConnection.connect(to: wrongPassword) }
        #expect(auth?.kind == .authenticationFailed)
        #expect(auth.map { "\($0) \($0.debugDescription)".contains(secret) } == false)
        #expect(!wrongPassword.description.contains(secret))

        var unreachable = base
        unreachable["host"] = "127.0.0.1"
        unreachable["port"] = "1"
        unreachable["password"] = secret
        let refused = await #expect(throws: PGError.self) { _ = try await PGConnection.connect(to: unreachable) }
        #expect(refused?.kind == .connectionFailed)
        #expect(refused.map { "\($0) \($0.debugDescription)".contains(secret) } == false)

        let missing = await #expect(throws: PGError.self) {
            _ = try await PGConnection.connect(to: base.withDatabase("no_such_db_\(UUID().uuidString.prefix(6))"))
        }
        #expect(missing?.kind == .databaseNotFound)
    }

    @Test func keywordConninfoPassesLibpqOptions() async throws {
        let base = try TestServer.configuration
        let conninfo = "host=\(base.host!) port=\(base.port!) user=\(base.user!) password='\(base["password"] ?? "")' dbname=\(base.database!) application_name=skyros_conninfo_test connect_timeout=5 target_session_attrs=read-write"
        let config = try PGConfiguration(conninfo: conninfo)
        #expect(config["target_session_attrs"] == "read-write")
        #expect(!config.description.contains(base["password"] ?? "\u{1}"))
        let connection = try await PGConnection.connect(to: config)
        let name = try await connection.query("SELECT current_setting('application_name')")[0].decode(String.self, at: 0)
        #expect(name == "skyros_conninfo_test")
        await connection.close()
    }
}
