import Foundation
import SkyrosPostgres
@testable import SkyrosSync
import Testing

/// Builds `pgoutput` messages byte by byte, laid out as the server writes them (big-endian integers,
/// NUL-terminated strings), independently of the decoder.
private struct Wire {
    var bytes: [UInt8]

    init(_ type: Character) { self.bytes = [type.asciiValue!] }

    mutating func byte(_ value: UInt8) { self.bytes.append(value) }
    mutating func char(_ value: Character) { self.bytes.append(value.asciiValue!) }
    mutating func int16(_ value: Int16) { self.bigEndian(UInt64(UInt16(bitPattern: value)), size: 2) }
    mutating func int32(_ value: Int32) { self.bigEndian(UInt64(UInt32(bitPattern: value)), size: 4) }
    mutating func uint32(_ value: UInt32) { self.bigEndian(UInt64(value), size: 4) }
    mutating func uint64(_ value: UInt64) { self.bigEndian(value, size: 8) }
    mutating func int64(_ value: Int64) { self.bigEndian(UInt64(bitPattern: value), size: 8) }
    mutating func string(_ value: String) { self.bytes += Array(value.utf8) + [0] }

    private mutating func bigEndian(_ value: UInt64, size: Int) {
        for shift in stride(from: (size - 1) * 8, through: 0, by: -8) { self.bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    /// TupleData: the column count, then `n`, `u`, or `t`/`b` with an `Int32` length and the bytes.
    mutating func tuple(_ values: [PgOutputMessage.Value]) {
        self.int16(Int16(values.count))
        for value in values {
            switch value {
            case .null: self.char("n")
            case .unchangedToast: self.char("u")
            case .text(let bytes):
                self.char("t")
                self.int32(Int32(bytes.count))
                self.bytes += bytes
            case .binary(let bytes):
                self.char("b")
                self.int32(Int32(bytes.count))
                self.bytes += bytes
            }
        }
    }
}

private func message(_ type: Character, _ build: (inout Wire) -> Void) -> [UInt8] {
    var wire = Wire(type)
    build(&wire)
    return wire.bytes
}

private func text(_ value: String) -> PgOutputMessage.Value { .text(Array(value.utf8)) }

/// `pgoutput` protocol version 1 decoding without a server: every message kind from hand-built bytes, hostile
/// names, tuple column kinds, malformed and truncated input, and key extraction through the relation cache.
@Suite struct PgOutputMessageTests {
    /// Names a table or column can have: quotes, `$`, spaces, commas, non-ASCII, and 63 bytes (NAMEDATALEN - 1).
    static let hostileNames = [
        "n", "o", "\"n\"", "it's", "a\"b'c", "$1", "a$b", "with space", "a,b", "Ünïcödé 表", "🐘",
        String(repeating: "x", count: 63), String(repeating: "é", count: 31) + "x",
    ]

    static let commitTime = PGTimestamp(rawValue: 789_012_345_678_901)

    // MARK: Every message kind

    @Test func beginCommitAndOriginDecode() throws {
        let begin = message("B") {
            $0.uint64(0x16_B374_D848)
            $0.int64(Self.commitTime.rawValue)
            $0.uint32(0xFFFF_FFF0)
        }
        #expect(try PgOutputMessage(begin) == .begin(.init(finalLSN: LSN("16/B374D848")!, commitTime: Self.commitTime, xid: 0xFFFF_FFF0)))

        let commit = message("C") {
            $0.byte(0)
            $0.uint64(0x16_B374_D848)
            $0.uint64(0x16_B374_D878)
            $0.int64(Self.commitTime.rawValue)
        }
        let decoded = try PgOutputMessage(commit)
        #expect(decoded == .commit(.init(flags: 0, commitLSN: LSN(0x16_B374_D848), endLSN: LSN(0x16_B374_D878), commitTime: Self.commitTime)))
        guard case .commit(let value) = decoded else { return }
        #expect(value.endLSN.description == "16/B374D878")
        // Microseconds since 2000-01-01 00:00:00 UTC.
        #expect(PGTimestamp(rawValue: 0).date == Date(timeIntervalSince1970: 946_684_800))
        #expect(PGTimestamp(rawValue: 1_500_000).date == Date(timeIntervalSince1970: 946_684_801.5))
        #expect(PGTimestamp(Self.commitTime.date) == Self.commitTime)

        for name in Self.hostileNames {
            let origin = message("O") {
                $0.uint64(42)
                $0.string(name)
            }
            #expect(try PgOutputMessage(origin) == .origin(.init(commitLSN: LSN(42), name: name)))
        }
    }

    @Test(arguments: hostileNames)
    func relationsKeepHostileNamesKeyFlagsTypesAndModifiers(_ name: String) throws {
        let bytes = message("R") {
            $0.uint32(16_384)
            $0.string(name)
            $0.string(name + "_table")
            $0.char("d")
            $0.int16(3)
            $0.byte(1)
            $0.string(name)
            $0.uint32(23)
            $0.int32(-1)
            $0.byte(0)
            $0.string("\"o\"")
            $0.uint32(1043)
            $0.int32(68)
            $0.byte(1)
            $0.string("")
            $0.uint32(25)
            $0.int32(-1)
        }
        let expected = PgOutputMessage.Relation(
            oid: 16_384, namespace: name, name: name + "_table", replicaIdentity: .default,
            columns: [
                .init(flags: 1, name: name, typeOID: 23, typeModifier: -1),
                .init(flags: 0, name: "\"o\"", typeOID: 1043, typeModifier: 68),
                .init(flags: 1, name: "", typeOID: 25, typeModifier: -1),
            ])
        #expect(try PgOutputMessage(bytes) == .relation(expected))
        #expect(expected.columns.map(\.isKey) == [true, false, true])
        #expect(expected.schema == name)
    }

    @Test func relationsReadEveryReplicaIdentityAndAnEmptyNamespaceIsPgCatalog() throws {
        for (byte, identity) in [("d", PgOutputMessage.ReplicaIdentity.default), ("n", .nothing), ("f", .full), ("i", .index)] {
            let bytes = message("R") {
                $0.uint32(1)
                $0.string("")
                $0.string("pg_thing")
                $0.char(Character(byte))
                $0.int16(0)
            }
            guard case .relation(let relation) = try PgOutputMessage(bytes) else {
                Issue.record("not a relation")
                continue
            }
            #expect(relation.replicaIdentity == identity)
            #expect(relation.namespace.isEmpty && relation.schema == "pg_catalog" && relation.columns.isEmpty)
        }
    }

    @Test func typesDecode() throws {
        for name in Self.hostileNames {
            let bytes = message("Y") {
                $0.uint32(70_000)
                $0.string(name)
                $0.string(name + " type")
            }
            #expect(try PgOutputMessage(bytes) == .type(.init(oid: 70_000, namespace: name, name: name + " type")))
        }
    }

    /// Every column kind: NULL, unchanged TOAST, text (empty, with quotes, non-ASCII), binary (with NULs).
    static let everyKind: [PgOutputMessage.Value] = [
        .null, .unchangedToast, text(""), text("it's \"quoted\", $1"), text("Ünïcödé 表 🐘"), .binary([0, 1, 0, 255]),
        text(String(repeating: "long ", count: 2000)),
    ]

    @Test func insertsCarryEveryColumnKind() throws {
        let bytes = message("I") {
            $0.uint32(16_384)
            $0.char("N")
            $0.tuple(Self.everyKind)
        }
        let decoded = try PgOutputMessage(bytes)
        #expect(decoded == .insert(.init(relationOID: 16_384, newTuple: Self.everyKind)))
        guard case .insert(let insert) = decoded else { return }
        #expect(insert.newTuple.map(\.text) == [nil, nil, "", "it's \"quoted\", $1", "Ünïcödé 表 🐘", nil, String(repeating: "long ", count: 2000)])
        // An empty tuple (a table without columns) is valid too.
        #expect(try PgOutputMessage(message("I") { $0.uint32(1); $0.char("N"); $0.tuple([]) }) == .insert(.init(relationOID: 1, newTuple: [])))
    }

    @Test func updatesWithoutWithAKeyAndWithAnOldTuple() throws {
        let new: [PgOutputMessage.Value] = [text("2"), .unchangedToast, .null]
        let plain = message("U") {
            $0.uint32(7)
            $0.char("N")
            $0.tuple(new)
        }
        #expect(try PgOutputMessage(plain) == .update(.init(relationOID: 7, oldTuple: nil, newTuple: new)))

        let keyed = message("U") {
            $0.uint32(7)
            $0.char("K")
            $0.tuple([text("1"), .null, .null])
            $0.char("N")
            $0.tuple(new)
        }
        #expect(try PgOutputMessage(keyed) == .update(.init(relationOID: 7, oldTuple: .key([text("1"), .null, .null]), newTuple: new)))

        let full = message("U") {
            $0.uint32(7)
            $0.char("O")
            $0.tuple([text("1"), text("old"), .null])
            $0.char("N")
            $0.tuple(new)
        }
        #expect(try PgOutputMessage(full) == .update(.init(relationOID: 7, oldTuple: .old([text("1"), text("old"), .null]), newTuple: new)))
    }

    @Test func deletesWithAKeyOrAnOldTuple() throws {
        let keyed = message("D") {
            $0.uint32(9)
            $0.char("K")
            $0.tuple([text("5"), .null])
        }
        #expect(try PgOutputMessage(keyed) == .delete(.init(relationOID: 9, oldTuple: .key([text("5"), .null]))))
        let full = message("D") {
            $0.uint32(9)
            $0.char("O")
            $0.tuple([text("5"), text("x")])
        }
        #expect(try PgOutputMessage(full) == .delete(.init(relationOID: 9, oldTuple: .old([text("5"), text("x")]))))
    }

    @Test func truncatesCarryTheirOptionsAndRelations() throws {
        let bytes = message("T") {
            $0.int32(3)
            $0.byte(3)
            $0.uint32(10)
            $0.uint32(11)
            $0.uint32(0xFFFF_FFFF)
        }
        let decoded = try PgOutputMessage(bytes)
        #expect(decoded == .truncate(.init(options: 3, relationOIDs: [10, 11, 0xFFFF_FFFF])))
        guard case .truncate(let truncate) = decoded else { return }
        #expect(truncate.cascade && truncate.restartIdentity)
        let plain = try PgOutputMessage(message("T") { $0.int32(1); $0.byte(0); $0.uint32(10) })
        guard case .truncate(let single) = plain else { return }
        #expect(!single.cascade && !single.restartIdentity && single.relationOIDs == [10])
    }

    @Test func logicalDecodingMessagesKeepTheirFlagsPrefixAndBytes() throws {
        for (flags, content) in [(UInt8(1), Array("hello".utf8)), (0, [0, 0, 255, 10]), (1, [])] {
            for prefix in ["skyros", "", "it's $ \"p\" 表"] {
                let bytes = message("M") {
                    $0.byte(flags)
                    $0.uint64(0x1_0000_0001)
                    $0.string(prefix)
                    $0.int32(Int32(content.count))
                    $0.bytes += content
                }
                let decoded = try PgOutputMessage(bytes)
                #expect(decoded == .message(.init(flags: flags, lsn: LSN("1/1")!, prefix: prefix, content: content)))
                guard case .message(let value) = decoded else { continue }
                #expect(value.isTransactional == (flags == 1))
            }
        }
    }

    // MARK: Bytes a server sent

    /// What PostgreSQL 15.18 sent (`pg_logical_slot_peek_binary_changes`, `proto_version '1'`, `messages 'true'`)
    /// for five transactions on `cap_fixture."it's ""o"""` (key `"n"`, `o'k`): an insert, an update that kept the
    /// key, one that changed it, a delete with a transactional message, a truncate (which announced the table
    /// again).
    static let serverPayloads = [
        "420000000003e64c880003044c9ce0f802000015c4",
        "52000068db6361705f66697874757265006974277320226f220064000401226e220000000017ffffffff016f276b0000000019ffffffff00226f220000000019ffffffff00c3a92024310000000017ffffffff",
        "49000068db4e000474000000013174000000016174000000017874000000023130",
        "43000000000003e64c880000000003e64cb80003044c9ce0f802",
        "420000000003e64d080003044c9ce0f92c000015c5",
        "55000068db4e000474000000013174000000016174000000017a74000000023130",
        "43000000000003e64d080000000003e64d380003044c9ce0f92c",
        "420000000003e64dd80003044c9ce0f98a000015c6",
        "55000068db4b00047400000001317400000001616e6e4e000474000000013374000000016174000000017a74000000023130",
        "43000000000003e64dd80000000003e64e080003044c9ce0f98a",
        "420000000003e64e900003044c9ce0fa7a000015c7",
        "44000068db4b00047400000001337400000001616e6e",
        "4d010000000003e64e90736b79726f73000000000568656c6c6f",
        "43000000000003e64e900000000003e64ec00003044c9ce0fa7a",
        "420000000003e65a500003044c9ce0fc1d000015c8",
        "52000068db6361705f66697874757265006974277320226f220064000401226e220000000017ffffffff016f276b0000000019ffffffff00226f220000000019ffffffff00c3a92024310000000017ffffffff",
        "540000000100000068db",
        "43000000000003e65a500000000003e65bc00003044c9ce0fc1d",
    ].map { hex in
        stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! }
    }

    @Test func whatAServerSentDecodesToItsChangesAndKeys() throws {
        let messages = try Self.serverPayloads.map { try PgOutputMessage($0) }
        var cache = PgOutputRelationCache()
        let changes = try messages.compactMap { try cache.apply($0) }
        let table = PgOutputTable(schema: "cap_fixture", name: "it's \"o\"")
        let key = ["\"n\"", "o'k"]
        #expect(changes == [
            .row(.init(operation: .insert, table: table, keyColumns: key, key: ["1", "a"])),
            .row(.init(operation: .update, table: table, keyColumns: key, key: ["1", "a"])),
            .row(.init(operation: .update, table: table, keyColumns: key, key: ["1", "a"], newKey: ["3", "a"])),
            .row(.init(operation: .delete, table: table, keyColumns: key, key: ["3", "a"])),
            .truncate([table]),
        ])
        #expect(messages[0] == .begin(.init(finalLSN: LSN("0/3E64C88")!, commitTime: PGTimestamp(rawValue: 0x3044c9ce0f802), xid: 5572)))
        #expect(messages[1] == .relation(.init(
            oid: 26_843, namespace: "cap_fixture", name: "it's \"o\"", replicaIdentity: .default,
            columns: [
                .init(flags: 1, name: "\"n\"", typeOID: 23, typeModifier: -1), .init(flags: 1, name: "o'k", typeOID: 25, typeModifier: -1),
                .init(flags: 0, name: "\"o\"", typeOID: 25, typeModifier: -1), .init(flags: 0, name: "é $1", typeOID: 23, typeModifier: -1),
            ])))
        #expect(messages[3] == .commit(.init(commitLSN: LSN("0/3E64C88")!, endLSN: LSN("0/3E64CB8")!, commitTime: PGTimestamp(rawValue: 0x3044c9ce0f802))))
        #expect(messages[12] == .message(.init(flags: 1, lsn: LSN("0/3E64E90")!, prefix: "skyros", content: Array("hello".utf8))))
        // Each Begin names its Commit's LSN; transactions follow one another.
        let begins = messages.compactMap { if case .begin(let begin) = $0 { begin } else { nil } }
        let commits = messages.compactMap { if case .commit(let commit) = $0 { commit } else { nil } }
        #expect(begins.map(\.finalLSN) == commits.map(\.commitLSN))
        #expect(zip(commits, commits.dropFirst()).allSatisfy { $0.endLSN < $1.commitLSN })
    }

    // MARK: Malformed and truncated input

    /// One valid message of each kind (and each tuple shape).
    static var validMessages: [[UInt8]] {
        Self.serverPayloads + [
            message("B") { $0.uint64(1); $0.int64(2); $0.uint32(3) },
            message("C") { $0.byte(0); $0.uint64(1); $0.uint64(2); $0.int64(3) },
            message("O") { $0.uint64(1); $0.string("origin") },
            message("R") {
                $0.uint32(1); $0.string("s"); $0.string("t"); $0.char("f"); $0.int16(2)
                $0.byte(1); $0.string("a"); $0.uint32(23); $0.int32(-1)
                $0.byte(0); $0.string("b"); $0.uint32(25); $0.int32(-1)
            },
            message("Y") { $0.uint32(1); $0.string("s"); $0.string("t") },
            message("I") { $0.uint32(1); $0.char("N"); $0.tuple(Self.everyKind) },
            message("U") { $0.uint32(1); $0.char("N"); $0.tuple([text("x"), .null]) },
            message("U") { $0.uint32(1); $0.char("K"); $0.tuple([text("k"), .null]); $0.char("N"); $0.tuple([text("x"), .unchangedToast]) },
            message("U") { $0.uint32(1); $0.char("O"); $0.tuple([text("k"), .binary([0])]); $0.char("N"); $0.tuple([text("x"), .null]) },
            message("D") { $0.uint32(1); $0.char("K"); $0.tuple([text("k"), .null]) },
            message("D") { $0.uint32(1); $0.char("O"); $0.tuple([text("k"), text("v")]) },
            message("T") { $0.int32(2); $0.byte(1); $0.uint32(1); $0.uint32(2) },
            message("M") { $0.byte(1); $0.uint64(1); $0.string("p"); $0.int32(3); $0.bytes += [0, 1, 2] },
        ]
    }

    /// Every proper prefix of every valid message throws "truncated", and never traps.
    @Test func everyTruncationOfAValidMessageThrows() throws {
        for bytes in Self.validMessages {
            _ = try PgOutputMessage(bytes)
            for length in 0..<bytes.count {
                let error = #expect(throws: PgOutputError.self) { try PgOutputMessage(Array(bytes.prefix(length))) }
                #expect(error?.reason == .truncated, "prefix of \(length) of \(bytes)")
            }
            // A byte more is left over.
            #expect(throws: PgOutputError(.trailingBytes, messageType: bytes[0], offset: bytes.count)) {
                try PgOutputMessage(bytes + [0])
            }
        }
    }

    /// Any single byte of a valid message changed to any value: the decoder throws or decodes, never traps.
    @Test func changedBytesNeverTrap() {
        var outcomes = (decoded: 0, thrown: 0)
        for bytes in Self.validMessages {
            for index in bytes.indices {
                for value in [0, 1, 0x7F, 0x80, 0xFE, 0xFF, UInt8(ascii: "t"), UInt8(ascii: "u"), UInt8(ascii: "N")] as [UInt8] {
                    var changed = bytes
                    changed[index] = value
                    do {
                        _ = try PgOutputMessage(changed)
                        outcomes.decoded += 1
                    } catch {
                        outcomes.thrown += 1
                    }
                }
            }
        }
        #expect(outcomes.decoded > 0 && outcomes.thrown > 0)
    }

    @Test func malformedMessagesThrowTheirReason() {
        func reason(_ bytes: [UInt8]) -> PgOutputError.Reason? {
            #expect(throws: PgOutputError.self) { try PgOutputMessage(bytes) }?.reason
        }
        #expect(reason([]) == .truncated)
        #expect(reason([UInt8(ascii: "Z")]) == .unknownMessageType(UInt8(ascii: "Z")))
        // Streaming (protocol version 2) messages are not version 1's.
        #expect(reason([UInt8(ascii: "S"), 0, 0, 0, 1, 1]) == .unknownMessageType(UInt8(ascii: "S")))
        #expect(reason(message("I") { $0.uint32(1); $0.char("X"); $0.tuple([]) }) == .unexpectedMarker(UInt8(ascii: "X")))
        #expect(reason(message("D") { $0.uint32(1); $0.char("N"); $0.tuple([]) }) == .unexpectedMarker(UInt8(ascii: "N")))
        #expect(reason(message("U") { $0.uint32(1); $0.char("K"); $0.tuple([]); $0.char("K"); $0.tuple([]) }) == .unexpectedMarker(UInt8(ascii: "K")))
        #expect(reason(message("I") { $0.uint32(1); $0.char("N"); $0.int16(1); $0.char("x") }) == .unknownColumnKind(UInt8(ascii: "x")))
        #expect(reason(message("I") { $0.uint32(1); $0.char("N"); $0.int16(-1) }) == .negativeLength(-1))
        #expect(reason(message("I") { $0.uint32(1); $0.char("N"); $0.int16(1); $0.char("t"); $0.int32(-5) }) == .negativeLength(-5))
        #expect(reason(message("I") { $0.uint32(1); $0.char("N"); $0.int16(1); $0.char("t"); $0.int32(.max) }) == .truncated)
        // A column count far beyond the message's bytes fails before anything is allocated for it.
        #expect(reason(message("I") { $0.uint32(1); $0.char("N"); $0.int16(.max); $0.char("n") }) == .truncated)
        #expect(reason(message("T") { $0.int32(.max); $0.byte(0) }) == .truncated)
        #expect(reason(message("T") { $0.int32(-1); $0.byte(0) }) == .negativeLength(-1))
        #expect(reason(message("M") { $0.byte(0); $0.uint64(1); $0.string("p"); $0.int32(-1) }) == .negativeLength(-1))
        #expect(reason(message("R") { $0.uint32(1); $0.string("s"); $0.string("t"); $0.char("x"); $0.int16(0) })
            == .unknownReplicaIdentity(UInt8(ascii: "x")))
        #expect(reason(message("R") { $0.uint32(1); $0.string("s"); $0.string("t"); $0.char("d"); $0.int16(.max) }) == .truncated)
        #expect(reason(message("O") { $0.uint64(1); $0.bytes += [0xC3, 0x28, 0] }) == .invalidUTF8)
        // The error says where, and never quotes values.
        let error = #expect(throws: PgOutputError.self) {
            try PgOutputMessage(message("I") { $0.uint32(1); $0.char("N"); $0.int16(2); $0.char("t"); $0.int32(6); $0.bytes += Array("secret".utf8); $0.char("?") })
        }
        #expect(error?.offset == 19 && error?.messageType == UInt8(ascii: "I"))
        #expect(error.map { !"\($0)".contains("secret") } ?? false)
    }

    // MARK: Key extraction

    /// `"n"."o"`: `id` (int) and `"o"` (text) form the key; `v` is not part of it.
    static let relation = PgOutputMessage.Relation(
        oid: 16_400, namespace: "\"n\"", name: "\"o\"", replicaIdentity: .default,
        columns: [
            .init(flags: 1, name: "id", typeOID: 23, typeModifier: -1),
            .init(flags: 0, name: "v", typeOID: 25, typeModifier: -1),
            .init(flags: 1, name: "\"o\"", typeOID: 25, typeModifier: -1),
        ])
    static let table = PgOutputTable(schema: "\"n\"", name: "\"o\"")

    private static func cache() throws -> PgOutputRelationCache {
        var cache = PgOutputRelationCache()
        #expect(try cache.apply(.relation(Self.relation)) == nil)
        return cache
    }

    @Test func insertsAndDeletesYieldTheirTableAndKey() throws {
        var cache = try Self.cache()
        #expect(Self.table.description == #""""n"""."""o""""#)
        let insert = try cache.apply(.insert(.init(relationOID: 16_400, newTuple: [text("1"), text("it's"), text("k'1")])))
        #expect(insert == .row(.init(operation: .insert, table: Self.table, keyColumns: ["id", "\"o\""], key: ["1", "k'1"])))
        let delete = try cache.apply(.delete(.init(relationOID: 16_400, oldTuple: .key([text("1"), .null, text("k'1")]))))
        #expect(delete == .row(.init(operation: .delete, table: Self.table, keyColumns: ["id", "\"o\""], key: ["1", "k'1"])))
        // Begin, Commit, Message and Type change no data.
        #expect(try cache.apply(.begin(.init(finalLSN: LSN(1), commitTime: Self.commitTime, xid: 1))) == nil)
        #expect(try cache.apply(.message(.init(flags: 1, lsn: LSN(1), prefix: "p", content: []))) == nil)
        #expect(cache.relations.count == 1)
    }

    /// An update that kept its key has no old tuple: the key is the new row's (a TOASTed value the update left as
    /// it was does not matter unless it is part of the key).
    @Test func anUpdateWithoutAnOldKeyTakesTheKeyFromTheNewRow() throws {
        var cache = try Self.cache()
        let update = try cache.apply(.update(.init(relationOID: 16_400, oldTuple: nil, newTuple: [text("1"), .unchangedToast, text("a")])))
        #expect(update == .row(.init(operation: .update, table: Self.table, keyColumns: ["id", "\"o\""], key: ["1", "a"], newKey: nil)))
        let unknownKey = #expect(throws: PgOutputError.self) {
            try cache.apply(.update(.init(relationOID: 16_400, oldTuple: nil, newTuple: [text("1"), text("v"), .unchangedToast])))
        }
        #expect(unknownKey?.reason == .keyUnavailable(column: "\"o\""))
    }

    /// An update that changed its key carries the old key (`K`): the key is the old one, `newKey` the new one;
    /// a key column left unchanged (TOAST) in the new row takes the old value.
    @Test func anUpdateWithAnOldKeyTakesTheKeyFromIt() throws {
        var cache = try Self.cache()
        let changed = try cache.apply(
            .update(.init(relationOID: 16_400, oldTuple: .key([text("1"), .null, text("a")]), newTuple: [text("2"), text("v"), .unchangedToast])))
        #expect(changed == .row(.init(operation: .update, table: Self.table, keyColumns: ["id", "\"o\""], key: ["1", "a"], newKey: ["2", "a"])))
        // REPLICA IDENTITY FULL: the old row (`O`); every column is part of the key, NULLs included.
        let full = PgOutputMessage.Relation(
            oid: 16_401, namespace: "", name: "t", replicaIdentity: .full,
            columns: [.init(flags: 1, name: "a", typeOID: 25, typeModifier: -1), .init(flags: 1, name: "b", typeOID: 25, typeModifier: -1)])
        _ = try cache.apply(.relation(full))
        let same = try cache.apply(.update(.init(relationOID: 16_401, oldTuple: .old([text("x"), .null]), newTuple: [text("x"), .null])))
        #expect(same == .row(.init(operation: .update, table: .init(schema: "pg_catalog", name: "t"), keyColumns: ["a", "b"], key: ["x", nil])))
    }

    @Test func truncatesYieldTheirTablesAndUnknownRelationsThrow() throws {
        var cache = try Self.cache()
        _ = try cache.apply(.relation(.init(oid: 5, namespace: "s", name: "t", replicaIdentity: .nothing, columns: [])))
        #expect(try cache.apply(.truncate(.init(options: 0, relationOIDs: [16_400, 5]))) == .truncate([Self.table, .init(schema: "s", name: "t")]))
        // A table without a key: its inserts resolve with an empty key.
        #expect(try cache.apply(.insert(.init(relationOID: 5, newTuple: []))) == .row(.init(operation: .insert, table: .init(schema: "s", name: "t"), keyColumns: [], key: [])))
        #expect(throws: PgOutputError(.unknownRelation(6), messageType: nil, offset: 0)) {
            try cache.apply(.truncate(.init(options: 0, relationOIDs: [16_400, 6])))
        }
        #expect(throws: PgOutputError(.unknownRelation(6), messageType: nil, offset: 0)) {
            try cache.apply(.insert(.init(relationOID: 6, newTuple: [])))
        }
        let mismatch = #expect(throws: PgOutputError.self) { try cache.apply(.insert(.init(relationOID: 16_400, newTuple: [text("1")]))) }
        #expect(mismatch?.reason == .columnCountMismatch(relation: 3, tuple: 1))
        let binary = #expect(throws: PgOutputError.self) {
            try cache.apply(.delete(.init(relationOID: 16_400, oldTuple: .key([.binary([0, 0, 0, 1]), .null, text("a")]))))
        }
        #expect(binary?.reason == .keyUnavailable(column: "id"))
    }

    /// A new Relation message for an OID replaces the old definition (the table changed).
    @Test func aNewRelationMessageReplacesTheOld() throws {
        var cache = try Self.cache()
        var renamed = Self.relation
        renamed.name = "renamed"
        renamed.columns = [.init(flags: 1, name: "id", typeOID: 23, typeModifier: -1)]
        _ = try cache.apply(.relation(renamed))
        #expect(try cache.apply(.insert(.init(relationOID: 16_400, newTuple: [text("9")])))
            == .row(.init(operation: .insert, table: .init(schema: "\"n\"", name: "renamed"), keyColumns: ["id"], key: ["9"])))
    }
}
