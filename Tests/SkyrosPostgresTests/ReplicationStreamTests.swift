import Foundation
import SkyrosPostgres
import SkyrosTestSupport
import Testing

/// The replication protocol's own values, without a server: LSNs, the stream's frames, the commands' text.
@Suite("Replication protocol, without a server")
struct ReplicationProtocolTests {
    @Test func lsnsPrintAndParseAsPostgreSQLDoes() throws {
        #expect(LSN(0x16_B374_D848).description == "16/B374D848")
        #expect(LSN.invalid.description == "0/0")
        #expect(LSN(UInt64.max).description == "FFFFFFFF/FFFFFFFF")
        #expect(LSN("16/b374d848") == LSN(0x16_B374_D848))
        #expect(LSN("0/0") == .invalid)
        #expect(LSN("FFFFFFFF/FFFFFFFF") == LSN(.max))
        #expect(LSN("00000001/00000002") == LSN(0x1_0000_0002))
        for bad in ["", "/", "1/", "/1", "1", "1/2/3", "123456789/0", "0/123456789", "g/0", "0/-1", " 0/0", "0/0 ", "+1/0", "１/0"] {
            #expect(LSN(bad) == nil, "\(bad)")
        }
        for value: UInt64 in [0, 1, 0xFFFF_FFFF, 0x1_0000_0000, 0xDEAD_BEEF_0000_0001, .max] {
            #expect(LSN(LSN(value).description) == LSN(value))
        }
        #expect(LSN(1) < LSN(2) && LSN(0xFFFF_FFFF) < LSN(0x1_0000_0000))
        #expect(try LSN(postgresText: ArraySlice("2/A".utf8), type: .pgLSN) == LSN(0x2_0000_000A))
        #expect(throws: PGError.self) { try LSN(postgresText: ArraySlice("2/Z".utf8), type: .pgLSN) }
        #expect(throws: PGError.self) { try LSN(postgresText: ArraySlice("2/A".utf8), type: .int8) }
    }

    @Test func framesParseAndStatusUpdatesEncodeBigEndian() throws {
        var data: [UInt8] = [UInt8(ascii: "w")]
        data += [0, 0, 0, 0x16, 0xB3, 0x74, 0xD8, 0x48]  // walStart
        data += [0, 0, 0, 0x16, 0xB3, 0x74, 0xD8, 0x50]  // walEnd
        data += [0, 0, 0, 0, 0, 0x0F, 0x42, 0x40]  // sendTime: 1 s after 2000-01-01
        data += [UInt8(ascii: "B"), 0, 1]
        #expect(
            try PGReplicationMessage(frame: data)
                == .data(
                    PGXLogData(
                        walStart: LSN(0x16_B374_D848), walEnd: LSN(0x16_B374_D850), sendTime: PGTimestamp(rawValue: 1_000_000),
                        payload: [UInt8(ascii: "B"), 0, 1])))
        #expect(try PGReplicationMessage(frame: Array(data.prefix(25))) == .data(PGXLogData(
            walStart: LSN(0x16_B374_D848), walEnd: LSN(0x16_B374_D850), sendTime: PGTimestamp(rawValue: 1_000_000), payload: [])))
        var keepalive: [UInt8] = [UInt8(ascii: "k"), 0, 0, 0, 0, 0, 0, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1]
        #expect(try PGReplicationMessage(frame: keepalive) == .keepalive(PGPrimaryKeepalive(walEnd: LSN(256), sendTime: PGTimestamp(rawValue: -1), replyRequested: true)))
        keepalive[17] = 0
        #expect(try PGReplicationMessage(frame: keepalive) == .keepalive(PGPrimaryKeepalive(walEnd: LSN(256), sendTime: PGTimestamp(rawValue: -1), replyRequested: false)))
        // Truncated, padded or unknown frames are protocol violations, never a trap.
        for bad in [[], Array(data.prefix(24)), Array(keepalive.prefix(17)), keepalive + [0], [UInt8(ascii: "x"), 0], [UInt8(ascii: "k")] + [UInt8](repeating: 0, count: 16) + [2]] {
            let error = #expect(throws: PGError.self) { try PGReplicationMessage(frame: bad) }
            #expect(error?.kind == .protocolViolation)
        }

        let update = PGStandbyStatusUpdate(
            written: LSN(0x0102_0304_0506_0708), flushed: LSN(0x10), applied: LSN(0x20), clientTime: PGTimestamp(rawValue: 0x0A0B), replyRequested: true)
        #expect(
            update.bytes
                == [UInt8(ascii: "r"), 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0x0A, 0x0B, 1])
        #expect(PGTimestamp(rawValue: 0).date == Date(timeIntervalSince1970: 946_684_800))
        #expect(PGTimestamp(Date(timeIntervalSince1970: 946_684_800.25)) == PGTimestamp(rawValue: 250_000))
        // Times no 64-bit count of microseconds holds saturate instead of trapping.
        #expect(PGTimestamp(Date(timeIntervalSinceReferenceDate: 9.22336e12)) == PGTimestamp(rawValue: .max))
        #expect(PGTimestamp(Date(timeIntervalSinceReferenceDate: -1e300)) == PGTimestamp(rawValue: .min))
        let now = PGTimestamp.now
        #expect(abs(now.date.timeIntervalSinceNow) < 5)
    }

    /// Names are identifiers (double quotes doubled), option values string constants (single quotes doubled),
    /// and `publication_names` a list of identifiers inside a string constant.
    @Test func commandsQuoteNamesAndValues() {
        #expect(PGReplicationConnection.createSlotCommand(name: "s", temporary: false, plugin: "pgoutput", snapshot: .nothing)
            == #"CREATE_REPLICATION_SLOT "s" LOGICAL "pgoutput" (SNAPSHOT 'nothing')"#)
        #expect(PGReplicationConnection.createSlotCommand(name: "a\"b", temporary: true, plugin: "pgoutput", snapshot: .export)
            == #"CREATE_REPLICATION_SLOT "a""b" TEMPORARY LOGICAL "pgoutput" (SNAPSHOT 'export')"#)
        #expect(PGReplicationConnection.dropSlotCommand(name: "s", wait: true) == #"DROP_REPLICATION_SLOT "s" WAIT"#)
        #expect(PGReplicationConnection.dropSlotCommand(name: "s", wait: false) == #"DROP_REPLICATION_SLOT "s""#)
        #expect(
            PGReplicationConnection.startReplicationCommand(
                slot: "slot", start: LSN(0x16_B374_D848), publications: ["a'b,\"c", "Plain", "x y"], messages: true)
                == #"START_REPLICATION SLOT "slot" LOGICAL 16/B374D848 (proto_version '1', publication_names '"a''b,""c","Plain","x y"', messages 'true')"#)
        #expect(
            PGReplicationConnection.startReplicationCommand(slot: "s", start: .invalid, publications: ["p"], messages: false)
                == #"START_REPLICATION SLOT "s" LOGICAL 0/0 (proto_version '1', publication_names '"p"', messages 'false')"#)
        #expect(PGReplicationConnection.quoteLiteral(#"it's \ "x""#) == #"'it''s \ "x"'"#)
    }

    @Test func theConfigurationAsksForALogicalWalsenderWithKeepalives() throws {
        var configuration = try PGConfiguration(url: "postgres://app:secret@db:5432/app")
        configuration["keepalives_idle"] = "5"
        let replication = PGReplicationConnection.replicationConfiguration(configuration)
        #expect(replication["replication"] == "database")
        #expect(replication["keepalives"] == "1")
        #expect(replication["keepalives_idle"] == "5")
        #expect(replication.sessionTimeZone == nil)
        #expect(!replication.description.contains("secret"))
    }
}

/// A `pgoutput` message as the tests look at it: read from the payload by this file's own reader (the decoder
/// proper lives in SkyrosSync, a layer above; `PgOutputMessageTests` checks it without a server). Text values
/// are strings; NULL is `nil`.
/// The prefix of the logical messages these tests emit.
private let testMessagePrefix = "skyros-replication-test"

private enum Seen: Equatable, CustomStringConvertible {
    case begin(finalLSN: LSN, xid: UInt32)
    case relation(namespace: String, name: String, columns: [String], keyFlags: [UInt8])
    case insert(oid: UInt32, new: [String?])
    case update(oid: UInt32, old: Character?, oldValues: [String?]?, new: [String?])
    case delete(oid: UInt32, old: Character, values: [String?])
    case truncate(oids: [UInt32], options: UInt8)
    case message(transactional: Bool, prefix: String, content: String)
    case commit(commitLSN: LSN, endLSN: LSN)

    /// A message another session emitted (its prefix is not ``testMessagePrefix``).
    var isForeignMessage: Bool {
        if case .message(_, let prefix, _) = self { return prefix != testMessagePrefix }
        return false
    }

    var description: String {
        switch self {
        case .begin: return "Begin"
        case .relation(_, let name, _, _): return "Relation(\(name))"
        case .insert(_, let new): return "Insert(\(new))"
        case .update(_, let old, let values, let new): return "Update(\(old.map(String.init) ?? "-") \(values ?? []) → \(new))"
        case .delete(_, let old, let values): return "Delete(\(old) \(values))"
        case .truncate(let oids, _): return "Truncate(\(oids.count))"
        case .message(_, let prefix, let content): return "Message(\(prefix), \(content))"
        case .commit: return "Commit"
        }
    }

    /// The tests' expectations leave the relation's OID out of changes: ``withoutOIDs`` sets them to 0.
    var withoutOIDs: Seen {
        switch self {
        case .insert(_, let new): return .insert(oid: 0, new: new)
        case .update(_, let old, let values, let new): return .update(oid: 0, old: old, oldValues: values, new: new)
        case .delete(_, let old, let values): return .delete(oid: 0, old: old, values: values)
        case .truncate(let oids, let options): return .truncate(oids: oids.map { _ in 0 }, options: options)
        default: return self
        }
    }

    struct Malformed: Error {}

    /// Reads one payload, checking every length against the bytes there.
    init(_ payload: [UInt8]) throws {
        var offset = 0
        func take(_ count: Int) throws -> ArraySlice<UInt8> {
            guard count >= 0, count <= payload.count - offset else { throw Malformed() }
            defer { offset += count }
            return payload[offset..<(offset + count)]
        }
        func integer(_ size: Int) throws -> UInt64 { try take(size).reduce(0) { $0 << 8 | UInt64($1) } }
        func string() throws -> String {
            guard let end = payload[offset...].firstIndex(of: 0) else { throw Malformed() }
            defer { offset = end + 1 }
            return String(decoding: payload[offset..<end], as: UTF8.self)
        }
        func tuple() throws -> [String?] {
            try (0..<Int(try integer(2))).map { _ -> String? in
                switch try take(1).first {
                case UInt8(ascii: "n"): return nil
                case UInt8(ascii: "u"): return "<unchanged>"
                case UInt8(ascii: "t"): return String(decoding: try take(Int(try integer(4))), as: UTF8.self)
                default: throw Malformed()
                }
            }
        }
        func marker() throws -> Character { Character(Unicode.Scalar(try take(1).first!)) }
        let type = try marker()
        switch type {
        case "B":
            let finalLSN = LSN(try integer(8))
            _ = try integer(8)
            self = .begin(finalLSN: finalLSN, xid: UInt32(try integer(4)))
        case "C":
            _ = try take(1)
            let commitLSN = LSN(try integer(8))
            let endLSN = LSN(try integer(8))
            _ = try integer(8)
            self = .commit(commitLSN: commitLSN, endLSN: endLSN)
        case "R":
            _ = try integer(4)
            let namespace = try string()
            let name = try string()
            _ = try take(1)
            var columns: [String] = []
            var flags: [UInt8] = []
            for _ in 0..<Int(try integer(2)) {
                flags.append(try take(1).first!)
                columns.append(try string())
                _ = try integer(8)
            }
            self = .relation(namespace: namespace, name: name, columns: columns, keyFlags: flags)
        case "I":
            let oid = UInt32(try integer(4))
            guard try marker() == "N" else { throw Malformed() }
            self = .insert(oid: oid, new: try tuple())
        case "U":
            let oid = UInt32(try integer(4))
            var old: Character?
            var oldValues: [String?]?
            var next = try marker()
            if next == "K" || next == "O" {
                old = next
                oldValues = try tuple()
                next = try marker()
            }
            guard next == "N" else { throw Malformed() }
            self = .update(oid: oid, old: old, oldValues: oldValues, new: try tuple())
        case "D":
            let oid = UInt32(try integer(4))
            let old = try marker()
            self = .delete(oid: oid, old: old, values: try tuple())
        case "T":
            let count = Int(try integer(4))
            let options = UInt8(try integer(1))
            self = .truncate(oids: try (0..<count).map { _ in UInt32(try integer(4)) }, options: options)
        case "M":
            let flags = try integer(1)
            _ = try integer(8)
            let prefix = try string()
            self = .message(transactional: flags & 1 == 1, prefix: prefix, content: String(decoding: try take(Int(try integer(4))), as: UTF8.self))
        default:
            throw Malformed()
        }
        guard offset == payload.count else { throw Malformed() }
    }
}

/// One transaction as the stream delivered it: its messages (Relation messages left out: the server may send
/// one again whenever the table's cache entry was invalidated), and where its Commit's data started.
private struct Transaction {
    var messages: [Seen] = []
    var relations: [Seen] = []
    var commitLSN = LSN.invalid
    var endLSN = LSN.invalid
    var commitWALStart = LSN.invalid
}

/// Reads the stream's data messages until `count` transactions have committed, within `deadline`: past it, the
/// stream is asked to stop (so that its iteration ends), the reading records an issue, and what came is returned.
private func readTransactions(
    _ count: Int, from messages: inout PGReplicationStream.Messages.Iterator, of stream: PGReplicationStream,
    within deadline: Duration = defaultPollDeadline, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> [Transaction] {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            // A deadline for the whole read, not a synchronisation: cancelled as soon as the read is done.
            try await Task.sleep(for: deadline)
            stream.requestStop()
        }
        defer { group.cancelAll() }
        var transactions: [Transaction] = []
        var current: Transaction?
        while transactions.count < count, let message = try await messages.next() {
            guard case .data(let data) = message else { continue }
            let seen = try Seen(data.payload)
            switch seen {
            case .begin:
                #expect(current == nil, "Begin inside a transaction", sourceLocation: sourceLocation)
                current = Transaction(messages: [seen])
            case .commit(let commitLSN, let endLSN):
                guard var finished = current else {
                    Issue.record("Commit outside a transaction", sourceLocation: sourceLocation)
                    continue
                }
                finished.messages.append(seen)
                // Logical messages are not filtered by publication: other sessions' (stacks of other tests name
                // themselves in every commit) come as transactions of their own, which are not this test's.
                if finished.messages.dropFirst().dropLast().allSatisfy(\.isForeignMessage) {
                    current = nil
                    continue
                }
                finished.commitLSN = commitLSN
                finished.endLSN = endLSN
                finished.commitWALStart = data.walStart
                transactions.append(finished)
                current = nil
            case .relation:
                current?.relations.append(seen)
            case .message(transactional: false, let prefix, _) where prefix == testMessagePrefix:
                Issue.record("unexpected non-transactional message \(seen)", sourceLocation: sourceLocation)
            default:
                #expect(current != nil, "\(seen) outside a transaction", sourceLocation: sourceLocation)
                current?.messages.append(seen.withoutOIDs)
            }
        }
        if transactions.count < count {
            Issue.record("\(transactions.count) of \(count) transactions within \(deadline)", sourceLocation: sourceLocation)
        }
        return transactions
    }
}

/// A slot and a publication with names of their own, dropped after the test whatever it did: a walsender
/// still streaming from the slot is terminated first.
private struct ReplicationFixture {
    let schema: String
    let slot = "skyros_test_\(UUID().uuidString.prefix(8).lowercased())"
    /// A publication name that needs quoting inside `publication_names`: quotes, a comma, a space, upper case.
    let publication = "Skyros pub \"p\", 'q' \(UUID().uuidString.prefix(8))"

    static func with(_ body: (ReplicationFixture) async throws -> Void) async throws {
        try await TestServer.withSchema("repl") { schema in
            let fixture = ReplicationFixture(schema: schema)
            try await withCleanup { try await body(fixture) } cleanup: { await fixture.drop() }
        }
    }

    func drop() async {
        _ = try? await TestServer.withConnection { connection in
            let slot = self.slot
            _ = try? await connection.query(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = \(slot) AND active_pid IS NOT NULL")
            _ = await eventually(within: defaultPollDeadline) {
                let active = try? await connection.query("SELECT count(*) FROM pg_replication_slots WHERE slot_name = \(slot) AND active")
                return (try? active?[0].decode(Int.self, at: 0)) == 0
            }
            _ = try? await connection.query("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = \(slot)")
            _ = try? await connection.execute(script: "DROP PUBLICATION IF EXISTS \(quoteIdentifier(self.publication))")
        }
    }

    /// The slot's `confirmed_flush_lsn` and whether a walsender streams from it.
    func slotState(_ connection: PGConnection) async throws -> (confirmed: LSN, active: Bool)? {
        let rows = try await connection.query(
            "SELECT confirmed_flush_lsn, active FROM pg_replication_slots WHERE slot_name = \(self.slot)")
        guard let row = rows.first else { return nil }
        return (try row.decode(LSN.self, at: 0), try row.decode(Bool.self, at: 1))
    }
}

@Suite("PGReplicationStream", .serialized, .enabled(if: TestServer.allowsLogicalDecoding, "needs logical decoding (scripts/test's logical-decoding pass)"))
struct ReplicationStreamTests {
    /// The table's name and columns need quoting everywhere: `"n"` and `o'k` form the key.
    static let table = "it's \"o\""
    static let columns = ["\"n\"", "o'k", "\"o\"", "é $1"]

    /// Changes to a table with hostile names arrive in commit order, each transaction whole, with the keys the
    /// server sends; the slot follows only what the consumer confirms; a second stream on the active slot fails
    /// with 55006; a restart from the confirmed position streams only what was not confirmed.
    @Test func changesArriveInCommitOrderAndTheSlotFollowsOnlyConfirmations() async throws {
        try await ReplicationFixture.with { fixture in
            try await TestServer.withConnection { admin in
                let table = quoteIdentifier(fixture.schema) + "." + quoteIdentifier(Self.table)
                let c = Self.columns.map(quoteIdentifier)
                try await admin.execute(script: """
                    CREATE TABLE \(table) (\(c[0]) int NOT NULL, \(c[1]) text NOT NULL, \(c[2]) text, \(c[3]) int,
                        PRIMARY KEY (\(c[0]), \(c[1])));
                    CREATE PUBLICATION \(quoteIdentifier(fixture.publication)) FOR TABLE \(table);
                    """)

                let connection = try await PGReplicationConnection.connect(to: try TestServer.configuration)
                let system = try await connection.identifySystem()
                #expect(system.database == (try TestServer.configuration).database)
                #expect(system.timeline >= 1 && system.walPosition > .invalid && !system.systemID.isEmpty)
                // A logical walsender runs SQL too.
                let lockKey = Int64.random(in: 1...Int64.max)
                #expect(try await connection.simpleQuery("SELECT pg_try_advisory_lock(\(lockKey))")[0].decode(Bool.self, at: 0))
                let walsenderPID = try await connection.simpleQuery("SELECT pg_backend_pid()")[0].decode(Int.self, at: 0)
                let slot = try await connection.createLogicalSlot(fixture.slot)
                #expect(slot.name == fixture.slot && slot.outputPlugin == "pgoutput" && slot.snapshotName == nil)
                #expect(try await fixture.slotState(admin)?.confirmed == slot.consistentPoint)
                let stream = try await connection.startReplication(
                    slot: fixture.slot, from: slot.consistentPoint, publications: [fixture.publication])
                // The connection now belongs to the stream.
                let handedOver = await #expect(throws: PGError.self) { try await connection.identifySystem() }
                #expect(handedOver?.kind == .connectionClosed)
                var messages = stream.messages.makeAsyncIterator()

                try await admin.execute(script: "INSERT INTO \(table) VALUES (1, 'a', 'x', 10), (2, 'b', 'y', 20)")
                try await admin.execute(script: "UPDATE \(table) SET \(c[2]) = 'z' WHERE \(c[0]) = 1")
                try await admin.execute(script: "UPDATE \(table) SET \(c[0]) = 3 WHERE \(c[0]) = 2")
                try await admin.execute(script: "DELETE FROM \(table) WHERE \(c[0]) = 3")
                try await admin.execute(script: """
                    BEGIN;
                    INSERT INTO \(table) VALUES (4, 'd', NULL, NULL);
                    SELECT pg_logical_emit_message(true, '\(testMessagePrefix)', 'hello');
                    COMMIT;
                    """)
                try await admin.execute(script: "TRUNCATE \(table)")

                let transactions = try await readTransactions(6, from: &messages, of: stream)
                try #require(transactions.count == 6)
                let bodies = transactions.map { Array($0.messages.dropFirst().dropLast()) }
                #expect(bodies[0] == [.insert(oid: 0, new: ["1", "a", "x", "10"]), .insert(oid: 0, new: ["2", "b", "y", "20"])])
                // The key did not change: no old tuple.
                #expect(bodies[1] == [.update(oid: 0, old: nil, oldValues: nil, new: ["1", "a", "z", "10"])])
                // The key changed: the old key ('K', other columns NULL), then the new row.
                #expect(bodies[2] == [.update(oid: 0, old: "K", oldValues: ["2", "b", nil, nil], new: ["3", "b", "y", "20"])])
                #expect(bodies[3] == [.delete(oid: 0, old: "K", values: ["3", "b", nil, nil])])
                #expect(bodies[4] == [.insert(oid: 0, new: ["4", "d", nil, nil]), .message(transactional: true, prefix: testMessagePrefix, content: "hello")])
                #expect(bodies[5] == [.truncate(oids: [0], options: 0)])
                // The table was announced before its first change, with its names and key columns as they are.
                #expect(transactions[0].relations.first == .relation(
                    namespace: fixture.schema, name: Self.table, columns: Self.columns, keyFlags: [1, 1, 0, 0]))
                for transaction in transactions {
                    guard case .begin(let finalLSN, _) = transaction.messages.first else {
                        Issue.record("a transaction that does not start with Begin")
                        continue
                    }
                    #expect(finalLSN == transaction.commitLSN)
                    // A Commit's XLogData starts at the transaction's end: the position to confirm.
                    #expect(transaction.commitWALStart == transaction.endLSN)
                }
                #expect(zip(transactions, transactions.dropFirst()).allSatisfy { $0.endLSN <= $1.commitLSN })

                // The stream reported what it received (write_lsn), and still nothing as flushed: the slot stays.
                let lastEnd = transactions[5].endLSN
                try await expectEventually("write_lsn reaches the last commit") {
                    let rows = try await admin.query("SELECT write_lsn FROM pg_stat_replication WHERE pid = \(walsenderPID)")
                    return try rows.first.map { try $0.decode(LSN?.self, at: 0) ?? .invalid }.map { $0 >= lastEnd } ?? false
                }
                #expect(try await fixture.slotState(admin)?.confirmed == slot.consistentPoint)
                #expect(stream.reportedFlush == .invalid)

                // The consumer made the first five transactions durable.
                let fifthEnd = transactions[4].endLSN
                stream.confirm(flushedThrough: fifthEnd)
                #expect(stream.confirmedFlush == fifthEnd)
                try await expectEventually("confirmed_flush_lsn reaches the confirmed position") {
                    try await fixture.slotState(admin)?.confirmed == fifthEnd
                }
                // Confirmations only go forward.
                stream.confirm(flushedThrough: transactions[0].endLSN)
                #expect(stream.confirmedFlush == fifthEnd)

                // The slot is active: a second stream on it fails with 55006, and its connection stays usable.
                let second = try await PGReplicationConnection.connect(to: try TestServer.configuration)
                let inUse = await #expect(throws: PGError.self) {
                    _ = try await second.startReplication(slot: fixture.slot, publications: [fixture.publication])
                }
                #expect(inUse?.sqlState == .objectInUse, "\(String(describing: inUse))")
                #expect(try await second.simpleQuery("SELECT 1")[0].decode(Int.self, at: 0) == 1)
                await second.close()

                // Stopping ends the iteration and frees the slot before it returns.
                await stream.stop()
                while let message = try await messages.next() {
                    guard case .data(let data) = message, let seen = try? Seen(data.payload) else { continue }
                    switch seen {
                    case .begin, .commit: continue
                    case _ where seen.isForeignMessage: continue
                    default: Issue.record("data after the last transaction: \(seen)")
                    }
                }
                #expect(try await fixture.slotState(admin)?.active == false)
                #expect(try await fixture.slotState(admin)?.confirmed == fifthEnd)

                // A restart from the confirmed position: only the truncate (not confirmed) comes again, then what
                // commits next.
                let again = try await PGReplicationConnection.connect(to: try TestServer.configuration)
                let restarted = try await again.startReplication(slot: fixture.slot, from: fifthEnd, publications: [fixture.publication])
                var more = restarted.messages.makeAsyncIterator()
                try await admin.execute(script: "INSERT INTO \(table) VALUES (5, 'e', NULL, 50)")
                let redelivered = try await readTransactions(2, from: &more, of: restarted)
                try #require(redelivered.count == 2)
                #expect(redelivered[0].endLSN == lastEnd)
                #expect(Array(redelivered[0].messages.dropFirst().dropLast()) == [.truncate(oids: [0], options: 0)])
                #expect(Array(redelivered[1].messages.dropFirst().dropLast()) == [.insert(oid: 0, new: ["5", "e", nil, "50"])])
                // This connection announces the table again before its first change.
                #expect(redelivered[0].relations.count == 1)
                restarted.confirm(flushedThrough: redelivered[1].endLSN)
                try await expectEventually("confirmed_flush_lsn follows the restarted stream") {
                    try await fixture.slotState(admin)?.confirmed == redelivered[1].endLSN
                }
                await restarted.stop()
            }
        }
    }

    /// A terminated walsender ends the stream with the server's error and its SQLSTATE (57P01); a stream whose
    /// consumer lags behind a tiny buffer still delivers everything, in order; a temporary slot goes with its
    /// connection.
    @Test func aTerminatedWalsenderEndsTheStreamWithItsSQLStateAndATemporarySlotGoesWithIt() async throws {
        try await ReplicationFixture.with { fixture in
            try await TestServer.withConnection { admin in
                let table = quoteIdentifier(fixture.schema) + ".t"
                try await admin.execute(script: """
                    CREATE TABLE \(table) (id int PRIMARY KEY, v text);
                    CREATE PUBLICATION \(quoteIdentifier(fixture.publication)) FOR TABLE \(table);
                    """)
                let connection = try await PGReplicationConnection.connect(to: try TestServer.configuration)
                let pid = try await connection.simpleQuery("SELECT pg_backend_pid()")[0].decode(Int.self, at: 0)
                let slot = try await connection.createLogicalSlot(fixture.slot, temporary: true)
                #expect(try await fixture.slotState(admin) != nil)
                // Without logical messages, so that the walsender is idle when terminated. With them, every commit
                // of the stacks of the tests running beside this one reaches it, and a walsender terminated while
                // blocked in the middle of sending one closes without its error (PostgreSQL's
                // ProcessClientWriteInterrupt): the stream then ends at a truncated message, with no SQLSTATE.
                let stream = try await connection.startReplication(
                    slot: fixture.slot, from: slot.consistentPoint, publications: [fixture.publication], messages: false,
                    options: .init(bufferLimit: 1))
                var messages = stream.messages.makeAsyncIterator()
                // 200 transactions while nobody reads: the stream holds one message at a time.
                try await admin.execute(script: "INSERT INTO \(table) SELECT i, repeat('x', 100) FROM generate_series(1, 200) i")
                for i in 1...200 { try await admin.execute(script: "UPDATE \(table) SET v = 'v\(i)' WHERE id = \(i)") }
                let transactions = try await readTransactions(201, from: &messages, of: stream, within: .seconds(60))
                try #require(transactions.count == 201)
                #expect(transactions[0].messages.count == 202)
                for i in 1...200 {
                    #expect(transactions[i].messages.dropFirst().first == .update(oid: 0, old: nil, oldValues: nil, new: ["\(i)", "v\(i)"]))
                }

                _ = try await admin.query("SELECT pg_terminate_backend(\(pid)::int)")
                var failure: (any Error)?
                do {
                    while try await messages.next() != nil {}
                } catch {
                    failure = error
                }
                let error = try #require(failure as? PGError, "\(String(describing: failure))")
                #expect(error.sqlState == .adminShutdown, "\(error)")
                #expect(error.kind == .connectionLost)
                await stream.stop()
                // The temporary slot went with its connection.
                try await expectEventually("the temporary slot is dropped") { try await fixture.slotState(admin) == nil }
            }
        }
    }

    /// A publication that does not exist fails the stream when the first change is decoded, with the server's
    /// SQLSTATE (42704).
    @Test func aMissingPublicationEndsTheStreamWithTheServersError() async throws {
        try await ReplicationFixture.with { fixture in
            try await TestServer.withConnection { admin in
                let table = quoteIdentifier(fixture.schema) + ".t"
                try await admin.execute(script: "CREATE TABLE \(table) (id int PRIMARY KEY)")
                let connection = try await PGReplicationConnection.connect(to: try TestServer.configuration)
                let slot = try await connection.createLogicalSlot(fixture.slot)
                let stream = try await connection.startReplication(
                    slot: fixture.slot, from: slot.consistentPoint, publications: [fixture.publication])
                try await admin.execute(script: "INSERT INTO \(table) VALUES (1)")
                var messages = stream.messages.makeAsyncIterator()
                let failure = await #expect(throws: PGError.self) {
                    _ = try await readTransactions(1, from: &messages, of: stream)
                }
                #expect(failure?.sqlState == SQLState("42704"), "\(String(describing: failure))")
                #expect(failure?.message.contains("does not exist") == true)
                await stream.stop()
            }
        }
    }

    /// The replication commands' errors keep their SQLSTATE, and the connection stays usable after each.
    @Test func commandErrorsKeepTheirSQLState() async throws {
        try await ReplicationFixture.with { fixture in
            let connection = try await PGReplicationConnection.connect(to: try TestServer.configuration)
            let missing = await #expect(throws: PGError.self) { try await connection.dropSlot(fixture.slot) }
            #expect(missing?.sqlState == SQLState("42704"), "\(String(describing: missing))")
            let noSlot = await #expect(throws: PGError.self) {
                _ = try await connection.startReplication(slot: fixture.slot, publications: ["p"])
            }
            #expect(noSlot?.sqlState == SQLState("42704"), "\(String(describing: noSlot))")
            _ = try await connection.createLogicalSlot(fixture.slot)
            let duplicate = await #expect(throws: PGError.self) { try await connection.createLogicalSlot(fixture.slot) }
            #expect(duplicate?.sqlState == .duplicateObject, "\(String(describing: duplicate))")
            let invalid = await #expect(throws: PGError.self) { try await connection.createLogicalSlot("Not a valid name") }
            #expect(invalid?.sqlState == SQLState("42602"), "\(String(describing: invalid))")
            let sqlError = await #expect(throws: PGError.self) { try await connection.simpleQuery("SELECT * FROM no_such_table") }
            #expect(sqlError?.sqlState == .undefinedTable)
            try await connection.dropSlot(fixture.slot, wait: true)
            let dropped = try await TestServer.withConnection { admin in try await fixture.slotState(admin) == nil }
            #expect(dropped)
            await connection.close()
            let closed = await #expect(throws: PGError.self) { try await connection.identifySystem() }
            #expect(closed?.kind == .connectionClosed)
        }
    }

    /// A role without `REPLICATION` cannot start a walsender: SQLSTATE 42501, and no trace of its password.
    @Test func aRoleWithoutReplicationGetsInsufficientPrivilegeAndNoPassword() async throws {
        let role = "skyros_norepl_\(UUID().uuidString.prefix(8).lowercased())"
        let password = "Pw-\(UUID().uuidString)"
        try await TestServer.withConnection { admin in
            try await admin.execute(script: "CREATE ROLE \(quoteIdentifier(role)) LOGIN NOREPLICATION PASSWORD \(PGReplicationConnection.quoteLiteral(password))")
            try await withCleanup {
                var configuration = try TestServer.configuration
                configuration["user"] = role
                configuration["password"] = password
                // The role itself can connect.
                let plain = try await PGConnection.connect(to: configuration)
                await plain.close()
                let error = await #expect(throws: PGError.self) { _ = try await PGReplicationConnection.connect(to: configuration) }
                #expect(error?.sqlState == .insufficientPrivilege, "\(String(describing: error))")
                #expect(error?.kind == .connectionFailed)
                let shown = error.map { "\($0) \(String(reflecting: $0)) \($0.message)" } ?? ""
                #expect(!shown.contains(password), "\(shown)")
                #expect(!shown.contains(password.dropFirst(3).prefix(8)))
            } cleanup: {
                _ = try? await admin.execute(script: "DROP ROLE IF EXISTS \(quoteIdentifier(role))")
            }
        }
    }
}
