@testable import SkyrosStack
import Dispatch
import SkyrosPostgres
import SkyrosStore
import Testing

/// The main context's identity map on its own: LRU order, pins, byte accounting, and the row key's hashing.
@Suite struct RowCacheTests {
    private static func key(_ id: Int, table: String = "stack_notes") -> RowKey {
        RowKey(table: table, id: try! PGValue(Int64(id)))
    }

    /// A cached row's value (the cache holds any entity).
    private struct Note: Entity, Equatable {
        var id: Int
        var title: String

        static let tableName = "stack_notes"
        static let columns: [EntityColumn<Note>] = [EntityColumn(\.id, "id"), EntityColumn(\.title, "title")]
    }

    private static func note(_ id: Int) -> Note { Note(id: id, title: "note \(id)") }

    private static func put(_ cache: inout RowCache, _ id: Int, version: Int64 = 1, bytes: Int = 10) {
        cache.put(Self.key(id), value: Self.note(id), version: version, bytes: bytes)
    }

    @Test func aRowOlderThanMaxAgeIsReadAgainAndAPinnedRowStays() {
        var fresh = RowCache(limit: CacheLimit(maxRows: 10, maxAge: .seconds(3600)))
        Self.put(&fresh, 1)
        #expect(fresh.get(Self.key(1)) != nil)

        var aged = RowCache(limit: CacheLimit(maxRows: 10, maxAge: .zero))
        Self.put(&aged, 1)
        aged.put(Self.key(2), value: Self.note(2), version: 1, bytes: 10, pinned: true)
        // Until the clock has moved past the moment the rows were cached (no sleep: the uptime clock advances).
        let cachedAt = DispatchTime.now().uptimeNanoseconds
        while DispatchTime.now().uptimeNanoseconds == cachedAt {}
        let expired = aged.get(Self.key(1))
        #expect(expired == nil)
        #expect(aged.misses == 1 && aged.count == 1)
        let pinned = aged.get(Self.key(2))
        #expect(pinned != nil)
    }

    @Test func theLeastRecentlyUsedRowIsEvictedFirst() {
        var cache = RowCache(limit: CacheLimit(maxRows: 3))
        for id in 1...3 { Self.put(&cache, id) }
        _ = cache.get(Self.key(1))                 // 1 is now the most recently used; 2 the least
        Self.put(&cache, 4)
        #expect(!cache.contains(Self.key(2)))
        #expect([1, 3, 4].allSatisfy { cache.contains(Self.key($0)) })
        Self.put(&cache, 3, version: 2)            // replacing a row uses it
        Self.put(&cache, 5)
        #expect(!cache.contains(Self.key(1)))
        #expect(cache.version(Self.key(3)) == 2)
        #expect(cache.count == 3 && cache.evictions == 2)
        // Evicting down to one row leaves only the newest, and the list stays consistent while emptied.
        for id in 6...20 { Self.put(&cache, id) }
        #expect(cache.count == 3 && [18, 19, 20].allSatisfy { cache.contains(Self.key($0)) })
        for id in 18...20 { cache.remove(Self.key(id)) }
        #expect(cache.count == 0 && cache.totalBytes == 0)
        Self.put(&cache, 21)
        #expect(cache.get(Self.key(21))?.version == 1)
    }

    @Test func pinnedRowsAreNeverEvictedAndRejoinTheListWhenUnpinned() {
        var cache = RowCache(limit: CacheLimit(maxRows: 2))
        cache.pin(Self.key(1))                     // its first queued change; not cached yet
        cache.put(Self.key(1), value: Self.note(1), version: 1, bytes: 10, pinned: true)
        Self.put(&cache, 2)
        Self.put(&cache, 3)
        Self.put(&cache, 4)
        #expect(cache.contains(Self.key(1)) && cache.isPinned(Self.key(1)))   // over the bound by the pinned row only
        #expect(cache.count == 2 && cache.contains(Self.key(4)))
        cache.unpin(Self.key(1))                   // its last queued change is done
        #expect(!cache.isPinned(Self.key(1)))
        Self.put(&cache, 5)                        // 1 rejoined as most recent when unpinned: 4 goes
        #expect(cache.contains(Self.key(1)) && cache.contains(Self.key(5)) && !cache.contains(Self.key(4)))
        cache.pin(Self.key(5))                     // a cached row gets a queued change: it leaves the list
        Self.put(&cache, 6)
        Self.put(&cache, 7)
        #expect(cache.contains(Self.key(5)) && cache.isPinned(Self.key(5)) && !cache.contains(Self.key(1)))
        cache.put(Self.key(5), value: Self.note(5), version: 2, bytes: 10, pinned: true)   // committed, another queued
        #expect(cache.isPinned(Self.key(5)) && cache.version(Self.key(5)) == 2)
    }

    @Test func aByteBoundEvictsByTheRowsSizes() {
        var cache = RowCache(limit: CacheLimit(maxRows: nil, maxBytes: 100))
        Self.put(&cache, 1, bytes: 60)
        Self.put(&cache, 2, bytes: 30)
        #expect(cache.totalBytes == 90)
        Self.put(&cache, 2, bytes: 50)             // grows in place: 110 > 100, the older row goes
        #expect(!cache.contains(Self.key(1)) && cache.totalBytes == 50)
    }

    @Test func rowKeysAreEqualExactlyWhenTableAndIDAre() {
        var keys = Set<RowKey>()
        for id in 0..<10_000 {
            keys.insert(Self.key(id))
            keys.insert(Self.key(id, table: "other"))
        }
        #expect(keys.count == 20_000)
        for id in 0..<10_000 { keys.insert(Self.key(id)) }
        #expect(keys.count == 20_000)
        #expect(keys.contains(Self.key(9_999, table: "other")) && !keys.contains(Self.key(10_000)))
        #expect(Self.key(7) == Self.key(7) && Self.key(7).hashValue == Self.key(7).hashValue)
        #expect(Self.key(7) != Self.key(7, table: "other"))
    }
}
