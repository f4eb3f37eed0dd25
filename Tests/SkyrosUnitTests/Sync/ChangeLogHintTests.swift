import Foundation
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosPostgres
import Testing

/// What the change log writes and parses without a server: the NOTIFY hint and its tag, the logged change
/// list's JSON, announced rows, channel names.
@Suite struct ChangeLogHintTests {
    static let key = HintKey(hex: String(repeating: "5a", count: 64) + String(repeating: "C3", count: 64))!

    /// The hex tag a hint carries for `head` and `changes` under `key`.
    static func tag(_ head: String, _ changes: String, _ key: HintKey = Self.key) -> String {
        key.tag([Substring(head).utf8, Substring(" ").utf8, Substring(changes).utf8]).map { String(format: "%02x", $0) }.joined()
    }

    /// The tag is `SHA-256(outer ‖ SHA-256(inner ‖ message))` truncated to 16 bytes, as the server's SQL computes
    /// it (expected value from Python's hashlib); with keys whose bytes differ by `0x6a` it is HMAC-SHA-256 (the
    /// second value is Python's `hmac` with key `0x6c` × 64, whose pads are `0x5a` and `0x30`).
    @Test func theTagIsTheServersConstructionByteForByte() throws {
        let head = "43 6f1c5e0a-3f3e-4b8e-9a61-2d7c4b1e8f00 1234"
        #expect(Self.tag(head, "[{\"t\":\"t\"}]") == "ccc67b82645cfe026fed5d0ed387088d")
        let hmacKey = try #require(HintKey(hex: String(repeating: "5a", count: 64) + String(repeating: "30", count: 64)))
        #expect(Self.tag(head, "[{\"t\":\"t\"}]", hmacKey) == "51d442b061ff8a7cb695018572af7313")
    }

    @Test func hintsParseWithAndWithoutTheirEntryWhichOnlyAVerifiedTagLetsThrough() throws {
        let origin = UUID().uuidString.lowercased()
        let key = Self.key
        let otherKey = try #require(HintKey(hex: String(repeating: "5a", count: 64) + String(repeating: "c4", count: 64)))
        func tag(_ head: String, _ changes: String, _ key: HintKey) -> String { Self.tag(head, changes, key) }
        let short = try #require(ChangeLog.Hint("42 \(origin)"))
        #expect(short.position == 42 && short.origin?.uuidString.lowercased() == origin && short.entry(verifiedWith: key) == nil)
        let json = LoggedRowChange.json([RowChange(entity: "E", table: "t", id: try PGValue(Int64(7)), kind: .updated, version: 9)])
        let head = "43 \(origin) 1234"
        let full = try #require(ChangeLog.Hint("\(head) \(tag(head, json, key)) \(json)"))
        #expect(full.entry(verifiedWith: key)?.xid == "1234")
        #expect(full.entry(verifiedWith: key)?.changes.first?.v == 9)
        // Only with the right key; not before any key was read; not with a tag for other bytes; not without a
        // tag (the format before tags: such hints make the log be read).
        #expect(full.entry(verifiedWith: otherKey) == nil)
        #expect(full.entry(verifiedWith: nil) == nil)
        #expect(try #require(ChangeLog.Hint("44 \(origin) 1234 \(tag(head, json, key)) \(json)")).entry(verifiedWith: key) == nil)
        #expect(try #require(ChangeLog.Hint("\(head) - \(json)")).entry(verifiedWith: key) == nil)
        #expect(try #require(ChangeLog.Hint("\(head) \(json)")).entry(verifiedWith: key) == nil)
        // A damaged entry is ignored (the log is read instead); a bare position still parses.
        let damaged = "[{\"t\":"
        #expect(try #require(ChangeLog.Hint("\(head) \(tag(head, damaged, key)) \(damaged)")).entry(verifiedWith: key) == nil)
        let badXID = "45 \(origin) notanxid"
        #expect(try #require(ChangeLog.Hint("\(badXID) \(tag(badXID, json, key)) \(json)")).entry(verifiedWith: key) == nil)
        #expect(ChangeLog.Hint("0")?.position == 0)
        #expect(ChangeLog.Hint("x 1") == nil)
        #expect(HintKey(hex: "00") == nil && HintKey(hex: String(repeating: "zz", count: 128)) == nil)
    }

    /// Capture version 2 stamps its hints with the commit time and the rows captured (`@<µs>/<rows>` after the
    /// origin); version 1 hints (none) still parse, with the changes running to the end even when they hold
    /// spaces.
    @Test func versionTwoHintsCarryTheCommitTimeAndTheRowCount() throws {
        let origin = UUID().uuidString.lowercased()
        let key = Self.key
        func tag(_ head: String, _ changes: String) -> String { Self.tag(head, changes) }
        let short = try #require(ChangeLog.Hint("42 \(origin) @1700000000123456/3"))
        #expect(short.position == 42 && short.committedAt == 1_700_000_000_123_456 && short.rows == 3)
        #expect(short.inline == nil && short.entry(verifiedWith: key) == nil)

        // An id with spaces: the changes' JSON holds spaces, and the tag covers the stamp.
        let json = LoggedRowChange.json([RowChange(entity: "E", table: "t", id: PGValue(type: .text, text: "a b c"), kind: .updated, version: 9)])
        let head = "43 \(origin) @1700000000123456/1 1234"
        let full = try #require(ChangeLog.Hint("\(head) \(tag(head, json)) \(json)"))
        #expect(full.committedAt == 1_700_000_000_123_456 && full.rows == 1)
        #expect(full.entry(verifiedWith: key)?.xid == "1234")
        #expect(full.entry(verifiedWith: key)?.changes.first?.i == "a b c")
        let forged = "43 \(origin) @1600000000000000/1 1234"
        #expect(try #require(ChangeLog.Hint("\(forged) \(tag(head, json)) \(json)")).entry(verifiedWith: key) == nil)

        let oldHead = "44 \(origin) 1234"
        let old = try #require(ChangeLog.Hint("\(oldHead) \(tag(oldHead, json)) \(json)"))
        #expect(old.committedAt == nil && old.rows == nil)
        #expect(old.entry(verifiedWith: key)?.changes.first?.i == "a b c")
    }

    /// The capture's SQL is a `format()` template the server fills in: every schema, table, column and channel is
    /// a `%I`/`%L` argument, and no name of a user's column can shadow an alias or a variable.
    @Test func theCaptureSQLSplicesNoNameAndShadowsNoColumn() {
        let functions = ChangeCapture.functionsTemplate
        #expect(functions.contains("INSERT INTO %1$I.skyros_change_log (origin, changes)"))
        #expect(functions.contains("FROM %1$I.skyros_change_log_state AS s"))
        #expect(functions.contains("pg_notify(%2$L, head)"))
        #expect(!functions.contains("skyros_changes_"))
        #expect(functions.components(separatedBy: "#variable_conflict use_variable").count == 3)
        // A whole row is always `alias.*`: `to_jsonb(alias)` reads a column of that name when the table has one.
        #expect(!functions.contains(/to_jsonb\([a-z_]+\)/))
        let triggers = ChangeCapture.triggersTemplate
        #expect(triggers.contains("ON %1$I.%3$I"))
        #expect(triggers.contains("skyros_capture(%4$L, %5$L)"))
        let composite = ChangeCapture.triggersTemplate(for: ChangeCapture.Table(name: "t", keyColumns: ["a", "b"], keyType: PGType.record.rawValue))
        #expect(composite.contains("skyros_capture(%4$L, %5$L, 'row')") && !composite.contains("skyros_capture(%4$L, %5$L)"))
        // Every `%` is a placeholder or `%%` (a `%` the composite key's `EXECUTE format(…)` reads): `format()`
        // would read any other as one and fail or mangle the text.
        for template in [functions, triggers, composite, ChangeCapture.flushTriggerTemplate] {
            #expect(!template.replacingOccurrences(of: "%%", with: "").contains(/%(?![1-5]\$[IL])/))
        }
    }

    @Test func theLoggedJSONDecodesToTheSameChanges() throws {
        let ids = ["plain", "quote \" and \\ backslash", "line\nbreak\ttab\r", "\u{1}\u{1f}", "naïve 表 🚀", ""]
        let changes = ids.enumerated().map { index, id in
            RowChange(entity: "E", table: "t \"\(index)", id: PGValue(type: .text, text: id),
                      kind: index % 2 == 0 ? .inserted : .deleted, version: index % 2 == 0 ? Int64(index) : nil)
        }
        let decoded = try JSONDecoder().decode([LoggedRowChange].self, from: Data(LoggedRowChange.json(changes).utf8))
        #expect(decoded == changes.map(LoggedRowChange.init))
        #expect(try LoggedRowChange.decodeList(LoggedRowChange.json(changes)) == decoded)
        #expect(LoggedRowChange.json([]) == "[]")
        #expect(LoggedRowChange.readList(" [ ] ") == [])
    }

    @Test func aRowTooLargeForTheHintIsAnnouncedWithoutItsValues() throws {
        func change(title: String) -> RowChange {
            var change = RowChange(entity: "MPItem", table: "mp_items", id: PGValue(type: .int8, text: "1"), kind: .updated, version: nil)
            change.row = AnnouncedRow(
                base: 5, layout: "abc",
                values: [PGValue(type: .int8, text: "1"), PGValue(type: .text, text: title), PGValue(type: .text, text: nil)])
            return change
        }
        let log = ChangeLog(schema: "s")
        func hint(_ change: RowChange) throws -> String {
            let statement = try #require(log.recordStatement([change], origin: UUID().uuidString.lowercased(), includingRows: true))
            return try #require(statement.binds.compactMap(\.text).last)
        }
        let small = try hint(change(title: "short, \"quoted\""))
        #expect(small.contains(#""r":"#))
        let parsed = try #require(LoggedRowChange.readList(small)?.first?.announcedRow)
        #expect(parsed.base == 5 && parsed.layout == "abc")
        #expect(parsed.values.map(\.text) == ["1", "short, \"quoted\"", nil])
        #expect(parsed.values.map(\.type) == [.int8, .text, .text])
        // JSONDecoder (the fallback for another spelling of the same list) reads it alike.
        let decoded = try JSONDecoder().decode([LoggedRowChange].self, from: Data(small.utf8))
        #expect(decoded == LoggedRowChange.readList(small))

        let large = try hint(change(title: String(repeating: "x", count: ChangeLog.announcedRowsHintLimit)))
        #expect(!large.contains(#""r":"#))
        #expect(LoggedRowChange.readList(large)?.first?.announcedRow == nil)
    }

    @Test func longSchemaNamesGetAChannelThatFitsAnIdentifier() {
        let name = ChangeLog.channelName(schema: String(repeating: "schema", count: 20))
        #expect(name.utf8.count <= 63)
        #expect(name != ChangeLog.channelName(schema: String(repeating: "schema", count: 21)))
        #expect(ChangeLog.channelName(schema: "app") == "skyros_changes_app")
    }
}
